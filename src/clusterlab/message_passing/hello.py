"""A first process group started by ``torchrun``: each rank reports an all-reduce.

Run it::

    torchrun --standalone --nproc-per-node 2 -m clusterlab.message_passing.hello

``torchrun`` sets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` for
every process; ``init_process_group`` reads them (the ``env://`` rendezvous).
"""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from clusterlab.core.backend import choose_backend


def main() -> None:
    world_size = int(os.environ["WORLD_SIZE"])
    backend = choose_backend(world_size, verbose=False)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend, timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    x = torch.tensor([float(rank + 1)], device="cuda" if backend == "nccl" else "cpu")
    dist.all_reduce(x)
    line = (
        f"rank {rank} of {world_size} ({backend}, pid {os.getpid()}): "
        f"all-reduce of rank + 1 = {x.item():g}\n"
    )
    sys.stdout.write(line)  # one write per line, so ranks' lines never interleave
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
