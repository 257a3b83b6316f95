"""A training run that checkpoints, crashes, and resumes where its checkpoint left it.

Run it under ``torchrun``, which restarts every rank when one dies::

    torchrun --standalone --nproc-per-node 2 --max-restarts 1 \\
        -m clusterlab.failures.resume --steps 30 --every 10 --crash-at 25 \\
        --dir /tmp/crash_resume

The model is a small linear regression trained by data parallelism (gradients
all-reduced) with SGD and momentum, in float64. Every ``every`` steps the run
saves the weights, the momentum and the step count. On the first
attempt the last rank kills itself (SIGKILL) at step ``crash_at``; ``torchrun``
tears the group down and starts it again; each rank then loads the last
checkpoint and carries on. The steps done after that checkpoint and before the
crash are done twice: that is the work a failure costs. Each step's batch
depends only on the step and the rank, so the resumed run ends with exactly the
weights of a run that never crashed.

``train`` is the same code as a worker for ``cl.launch`` (which restarts
nothing: the caller does), and ``--format dcp`` saves with
``torch.distributed.checkpoint`` instead of ``torch.save``.

Rank 0 logs each step it finished with its attempt and the time, and each
checkpoint with the seconds it took (``read_step_times``); each rank writes its
process id per attempt under ``pids/`` so that a driver can kill a rank from
outside, as a failed GPU would (``cl.fault_tolerance.race``). ``--step-ms``
pads each step to model a step of real compute.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from clusterlab.core.backend import choose_backend
from clusterlab.core.validate import check_float

FEATURES = 8


BATCH = 16


LOG = "steps.log"


FINAL = "final.pt"


CHECKPOINTS = "checkpoints.log"


PIDS = "pids"


def _batch(step: int, rank: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of one rank at one step: the same on every attempt."""
    gen = torch.Generator().manual_seed(100_003 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=gen, dtype=torch.float64)
    true_w = torch.linspace(-1.0, 1.0, FEATURES, dtype=torch.float64)
    y = x @ true_w + 0.1 * torch.randn(BATCH, generator=gen, dtype=torch.float64)
    return x.to(device), y.to(device)


def _save(state: dict, ckpt_dir: str, fmt: str, rank: int) -> None:
    if fmt == "dcp":
        from clusterlab.checkpointing.ranks import save_checkpoint

        save_checkpoint(state, os.path.join(ckpt_dir, f"step_{state['step']:06d}"))
        dist.barrier()  # every rank's files are on disk before the pointer moves
    if rank == 0:
        tmp = os.path.join(ckpt_dir, "latest.tmp")
        if fmt == "torch":
            torch.save(
                {k: v.cpu() if torch.is_tensor(v) else v for k, v in state.items()}, tmp
            )
        else:
            with open(tmp, "w") as f:
                f.write(f"step_{state['step']:06d}")
        # rename is atomic: a crash mid-save leaves the previous checkpoint whole
        os.replace(tmp, os.path.join(ckpt_dir, "latest"))
    dist.barrier()


def _load(state: dict, ckpt_dir: str, fmt: str) -> None:
    latest = os.path.join(ckpt_dir, "latest")
    if not os.path.exists(latest):
        return
    if fmt == "torch":
        saved = torch.load(latest, weights_only=True)
        for key in ("weight", "momentum"):
            state[key].copy_(saved[key])
        state["step"] = saved["step"]
    else:
        from clusterlab.checkpointing.ranks import load_checkpoint

        with open(latest) as f:
            load_checkpoint(state, os.path.join(ckpt_dir, f.read().strip()))


def train(
    rank: int,
    world_size: int,
    *,
    steps: int,
    every: int,
    ckpt_dir: str,
    crash_at: int = -1,
    attempt: int | None = None,
    fmt: str = "torch",
    lr: float = 0.05,
    step_ms: float = 0.0,
) -> dict:
    """Train with checkpoints every ``every`` steps; resume from the last one.

    Args:
        rank, world_size: this rank and the group's size (the group is ready).
        steps: steps in the whole run.
        every: checkpoint interval, in steps.
        ckpt_dir: folder for checkpoints and the step log (shared by all ranks).
        crash_at: on attempt 0 the last rank SIGKILLs itself before this step
            (-1: never).
        attempt: which attempt this is; default ``TORCHELASTIC_RESTART_COUNT``
            (set by ``torchrun``), else 0.
        fmt: ``"torch"`` (rank 0 writes one file with ``torch.save``) or
            ``"dcp"`` (``torch.distributed.checkpoint``: every rank takes part).
        lr: learning rate.
        step_ms: extra milliseconds of work per step (a sleep), in [0, 10000].

    Returns:
        ``{"weights": final weights, "start_step": step it resumed from}``.
    """
    if attempt is None:
        attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    step_ms = check_float("step_ms", step_ms, 0.0, 10_000.0)
    torch.set_num_threads(1)  # the same arithmetic under every launcher
    nccl = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if nccl else "cpu"
    zeros = torch.zeros(FEATURES, dtype=torch.float64, device=device)
    # The whole training state: weights, SGD's momentum, and the step count.
    # Saving the weights alone would resume with the momentum lost.
    state = {"weight": zeros.clone(), "momentum": zeros.clone(), "step": 0}
    os.makedirs(os.path.join(ckpt_dir, PIDS), exist_ok=True)
    with open(os.path.join(ckpt_dir, PIDS, f"attempt{attempt}_rank{rank}"), "w") as f:
        f.write(str(os.getpid()))
    _load(state, ckpt_dir, fmt)
    start = state["step"]
    w, m = state["weight"], state["momentum"]
    for step in range(start, steps):
        if attempt == 0 and step == crash_at and rank == world_size - 1:
            os.kill(os.getpid(), signal.SIGKILL)  # as abrupt as a lost GPU
        x, y = _batch(step, rank, device)
        grad = 2.0 / BATCH * x.T @ (x @ w - y)  # gradient of the mean squared error
        if step_ms:
            time.sleep(step_ms / 1000)  # the rest of a real step's compute
        dist.all_reduce(grad)
        grad /= world_size
        m.mul_(0.9).add_(grad)
        w.sub_(lr * m)
        if rank == 0:
            with open(os.path.join(ckpt_dir, LOG), "a") as f:
                f.write(f"{attempt} {step} {time.time():.6f}\n")
        if (step + 1) % every == 0:
            state["step"] = step + 1
            began = time.perf_counter()
            _save(state, ckpt_dir, fmt, rank)
            if rank == 0:
                took = time.perf_counter() - began
                with open(os.path.join(ckpt_dir, CHECKPOINTS), "a") as f:
                    f.write(f"{attempt} {step + 1} {took:.6f}\n")
    weights = w.cpu().clone()
    if rank == 0:
        torch.save({"weights": weights, "start_step": start}, _path(ckpt_dir, FINAL))
    return {"weights": weights, "start_step": start}


def _path(folder: str, name: str) -> str:
    return os.path.join(folder, name)


def read_step_log(ckpt_dir: str) -> list[tuple[int, int]]:
    """The (attempt, step) pairs rank 0 executed, in order."""
    with open(_path(ckpt_dir, LOG)) as f:
        return [tuple(int(v) for v in line.split()[:2]) for line in f if line.strip()]


def read_step_times(ckpt_dir: str) -> tuple[list[tuple], list[tuple]]:
    """Rank 0's logs: ``(attempt, step, time)`` per step finished, and
    ``(attempt, step, seconds)`` per checkpoint written (``time.time()`` clock)."""

    def rows(name):
        path = _path(ckpt_dir, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            parts = [line.split() for line in f if line.strip()]
        return [(int(p[0]), int(p[1]), float(p[2])) for p in parts if len(p) == 3]

    return rows(LOG), rows(CHECKPOINTS)


def worker_pid(ckpt_dir: str, attempt: int, rank: int) -> int | None:
    """The process id rank ``rank`` wrote in attempt ``attempt``, or None yet."""
    path = os.path.join(ckpt_dir, PIDS, f"attempt{attempt}_rank{rank}")
    try:
        with open(path) as f:
            return int(f.read())
    except (FileNotFoundError, ValueError):  # not yet written, or half written
        return None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--crash-at", type=int, default=-1)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--format", choices=("torch", "dcp"), default="torch")
    parser.add_argument("--step-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    world_size = int(os.environ["WORLD_SIZE"])
    backend = choose_backend(world_size, verbose=False)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    timeout = timedelta(seconds=60)
    # After a restart the new ranks could read the dead round's addresses from the
    # rendezvous store and fail to connect (seen with gloo on torch 2.13; NCCL in
    # pytorch/pytorch#167288), so each attempt gets its own key prefix.
    store, rank, size = next(dist.rendezvous("env://", timeout=timeout))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    store = dist.PrefixStore(f"clusterlab/attempt_{attempt}", store)
    dist.init_process_group(
        backend, store=store, rank=rank, world_size=size, timeout=timeout
    )
    train(
        dist.get_rank(),
        world_size,
        steps=args.steps,
        every=args.every,
        ckpt_dir=args.dir,
        crash_at=args.crash_at,
        fmt=args.format,
        step_ms=args.step_ms,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()


__all__ = ["read_step_log", "read_step_times", "train", "worker_pid"]
