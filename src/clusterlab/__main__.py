"""``python -m clusterlab``: a 2-rank all-reduce through ``launch``, timed."""

import time

from clusterlab.core.launcher import launch


def _demo(rank: int, world_size: int) -> float:
    import torch
    import torch.distributed as dist

    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    return x.item()


if __name__ == "__main__":
    start = time.perf_counter()
    results = launch(_demo, 2)
    elapsed = time.perf_counter() - start
    print(f"all-reduce of [1, 2] on 2 ranks -> {results} in {elapsed:.2f} s")
