"""Module-level workers for the launcher tests (spawned ranks import them by name)."""

import os
import signal
import time

import psutil
import torch
import torch.distributed as dist


def allreduce_rank(rank, world_size):
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    return x.item()


def kill_self_during_collective(rank, world_size, victim=1):
    dist.barrier()
    if rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    x = torch.ones(4)
    dist.all_reduce(x)  # the survivors wait here for the dead rank
    return x.sum().item()


def hang(rank, world_size, victim=1, pid_dir=None):
    if pid_dir:
        with open(os.path.join(pid_dir, f"{rank}.pid"), "w") as f:
            f.write(str(os.getpid()))
    if rank == victim:
        time.sleep(10_000)
    x = torch.ones(1)
    dist.all_reduce(x)
    return x.item()


def listening_sockets(rank, world_size):
    """Return this rank's listening TCP addresses after a collective."""
    x = torch.ones(1)
    dist.all_reduce(x)
    conns = psutil.Process().net_connections(kind="inet")
    listening = sorted({c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN})
    dist.barrier()
    return listening


def preflight_clock(rank, world_size, skew_s=0.25, stamp_after_wait=True):
    """The preflight's clock exchange, rank 1's clock ahead by ``skew_s``."""
    from clusterlab.debugging.preflight import clock_group, clock_offsets

    group = clock_group(dist.get_backend())
    skew = skew_s if rank == 1 else 0.0
    leaders = {0: 0, 1: 1}
    try:
        found = clock_offsets(
            rank, leaders, lambda: time.time() + skew, 10, group, stamp_after_wait
        )
    except ValueError as err:  # non-causal stamps: the exchange measured nothing
        return {"error": str(err)}
    except RuntimeError as err:  # rank 1, when rank 0 gave up
        return {"error": str(err)}
    return {"found": found}
