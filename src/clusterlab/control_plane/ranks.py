"""The worker of the store-host demonstration: a few all-reduces, a JSON line each.

``torchrun`` starts it on every node once the agents have met::

    torchrun --nnodes 1:2 --nproc-per-node 1 --rdzv-backend c10d \\
        --rdzv-endpoint 127.0.0.1:29500 --rdzv-id job42 --max-restarts 1 \\
        control_plane_worker.py 5 0.2

It runs ``steps`` all-reduces of a one, ``pause_s`` apart, and after each
prints ``PREFIX`` and a JSON object: rank, world size, how often the agent has
restarted the group, the step, the sum (the world size) and the monotonic time.
The demonstration runs this file by its path: it imports nothing but ``torch``,
and it always uses gloo on the CPU.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

PREFIX = "control-plane-worker "


def main() -> None:
    """Join the group ``torchrun`` set up; all-reduce and report ``steps`` times."""
    import torch
    import torch.distributed as dist

    steps, pause_s = int(sys.argv[1]), float(sys.argv[2])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    for step in range(steps):
        x = torch.ones(1)
        dist.all_reduce(x)
        report = {
            "rank": rank,
            "world_size": world_size,
            "restart": restart,
            "step": step,
            "sum": x.item(),
            "t": time.monotonic(),
        }
        sys.stdout.write(PREFIX + json.dumps(report) + "\n")  # one write
        sys.stdout.flush()
        time.sleep(pause_s)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
