"""The worker of the rendezvous demonstration: one all-reduce, one line of JSON.

``torchrun`` starts it once its agent has met the others at the rendezvous::

    torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \\
        --rdzv-endpoint 127.0.0.1:29500 --rdzv-id job42 \\
        -m clusterlab.clocks.rendezvous_worker

The demonstration passes this file's path instead of ``-m``: the file imports
nothing from the package, so each rank starts with ``torch`` alone.

It always uses gloo on the CPU: two agents on one machine would otherwise give
both of their ranks the same GPU, which NCCL refuses, and the demonstration is
about the rendezvous, not the collective. It prints one line, ``PREFIX`` and a
JSON object: the rank, the world size, the rendezvous id ``torchrun`` joined,
the ``MASTER_ADDR:MASTER_PORT`` it was given and the sum of ``rank + 1`` over
all ranks.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

PREFIX = "rendezvous-worker "


def main() -> None:
    """Join the group ``torchrun`` set up, all-reduce ``rank + 1``, print a line."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    report = {
        "rank": rank,
        "world_size": world_size,
        "run_id": os.environ.get("TORCHELASTIC_RUN_ID", ""),
        "master": f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
        "allreduce": x.item(),
    }
    sys.stdout.write(PREFIX + json.dumps(report) + "\n")  # one write: no interleaving
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
