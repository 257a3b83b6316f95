"""DDP's buckets across two emulated nodes, where the network is the bottleneck.

On loopback a gradient all-reduce costs milliseconds and any bucket size hides
it. Across a shaped link the all-reduce of a model's gradients takes about as
long as its backward pass, and DDP's buckets decide how much of it the backward
pass hides: one bucket starts only when the last gradient is ready, so all of
it shows; many buckets start while the backward pass still runs.

``bucket_sweep_across_nodes`` trains one model with ``DistributedDataParallel``
on two ranks in two emulated nodes (``cl.cluster``), once per bucket cap. Each
layer's backward pass waits ``backward_ms / layers`` (a sleep, which lets the
all-reduce threads run, as a GPU's kernels would), and every layer's weight is
1 MiB, so a cap decides how many layers share a bucket (DDP closes a bucket
once it reaches the cap: at 1.01 MiB two layers, at 64 MiB all). The same ranks time
the link alone (one all-reduce of all the gradients, and one of 4 bytes) and
the backward pass alone, without DDP. ``predicted`` feeds those into the
book's bucket model (``cl.models.data_parallel.bucket_overlap_time``), which
knows nothing of DDP, to predict each cap's exposed communication.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from clusterlab.core.validate import check_float, check_int

#: The book's run: 2 nodes x 1 rank at 300 Mbit/s, eight 1 MiB layers, 240 ms
#: of backward pass, caps giving 4, 3, 2 and 1 buckets.
EXPERIMENT = {
    "rate_mbit": 300.0,
    "layers": 8,
    "backward_ms": 240.0,
    "caps_mib": (1.01, 2.01, 4.01, 64.0),
    "steps": 3,
}

#: Width of each square layer: 512 x 512 float32 weights are 1 MiB.
WIDTH = 512

#: The columns of a sweep's table (and of the recorded run in ``data/``).
COLUMNS = [
    "cap_mib", "buckets", "bucket_bytes", "grad_bytes", "backward_alone_s",
    "backward_s", "exposed_s", "allreduce_s", "tiny_allreduce_s", "rate_mbit",
]  # fmt: skip

#: The recorded run's table in ``data/``.
TABLE = "overlap_runs"


def _slow_layers(layers: int, seconds_each: float):
    import torch

    class SlowBackward(torch.autograd.Function):
        """Identity going forward; its backward waits, as a layer's kernels would."""

        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            time.sleep(seconds_each)
            return grad

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(WIDTH, WIDTH, bias=False)

        def forward(self, x):
            return SlowBackward.apply(torch.tanh(self.linear(x)))

    return torch.nn.Sequential(*[Layer() for _ in range(layers)])


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _sweep(rank, world_size, *, layers, backward_ms, caps_mib, steps, seed=0):
    """One rank of the sweep: the link alone, the backward alone, then DDP per cap."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = _slow_layers(layers, backward_ms / 1e3 / layers)
    x = torch.randn(16, WIDTH)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    flat = torch.zeros(grad_bytes // 4)
    tiny = torch.zeros(1)
    dist.barrier()
    allreduce_s = _median_time(lambda: dist.all_reduce(flat), 3)
    tiny_s = _median_time(lambda: dist.all_reduce(tiny), 5)

    def backward_of(net) -> float:
        out = net(x).square().mean()
        t0 = time.perf_counter()
        out.backward()
        return time.perf_counter() - t0

    alone = float(np.median([backward_of(model) for _ in range(steps)]))
    rows = []
    for cap in caps_mib:
        ddp = DDP(model, bucket_cap_mb=cap)
        for _ in range(2):  # the first step builds the buckets, the second rebuilds
            backward_of(ddp)
        dist.barrier()
        taken = float(np.median([backward_of(ddp) for _ in range(steps)]))
        # the buckets DDP rebuilt after its first step, in gradients' order
        logged = ddp._get_ddp_logging_data()
        sizes = logged.get("rebuilt_bucket_sizes") or logged.get("bucket_sizes", "")
        sizes = [int(s) for s in str(sizes).replace(",", " ").split()]
        rows.append({
            "cap_mib": float(cap), "buckets": len(sizes),
            "bucket_bytes": " ".join(map(str, sizes)), "grad_bytes": grad_bytes,
            "backward_alone_s": alone, "backward_s": taken,
            "exposed_s": taken - alone, "allreduce_s": allreduce_s,
            "tiny_allreduce_s": tiny_s,
        })  # fmt: skip
        del ddp
        dist.barrier()
    return rows


def bucket_sweep_across_nodes(
    rate_mbit: float = EXPERIMENT["rate_mbit"],
    *,
    layers: int = EXPERIMENT["layers"],
    backward_ms: float = EXPERIMENT["backward_ms"],
    caps_mib=EXPERIMENT["caps_mib"],
    steps: int = EXPERIMENT["steps"],
    timeout_s: float = 120.0,
) -> pd.DataFrame:
    """DDP's backward pass per bucket cap, two ranks on two emulated nodes.

    Args:
        rate_mbit: each node's link, Mbit/s, in [10, 10000].
        layers: 1 MiB layers, in [1, 32].
        backward_ms: the backward pass's compute, ms, in [0, 10000].
        caps_mib: DDP's ``bucket_cap_mb`` values to try, each in (0, 1024].
        steps: timed steps per cap (the median is kept), in [1, 50].
        timeout_s: the process group's timeout, seconds.

    Returns:
        One row per cap, ``COLUMNS``: the buckets DDP made, the backward pass
        with DDP and alone (medians), its exposed communication (the
        difference), and the link's all-reduce of every gradient and of 4 bytes.

    Raises:
        RuntimeError: this machine cannot emulate nodes (``cl.cluster.support``).
    """
    from clusterlab.cluster.launch import launch
    from clusterlab.cluster.support import why_not

    rate_mbit = check_float("rate_mbit", rate_mbit, 10.0, 10_000.0)
    layers = check_int("layers", layers, 1, 32)
    backward_ms = check_float("backward_ms", backward_ms, 0.0, 10_000.0)
    caps = [
        check_float(f"caps_mib[{i}]", c, 0.0, 1024.0, low_inclusive=False)
        for i, c in enumerate(caps_mib)
    ]
    if not caps:
        raise ValueError("caps_mib=() is empty: give 1 to 10 bucket caps")
    steps = check_int("steps", steps, 1, 50)
    reason = why_not()
    if reason:
        raise RuntimeError(reason)
    rows = launch(
        _sweep, nodes=2, ranks_per_node=1, rate_mbit=rate_mbit, timeout=timeout_s,
        layers=layers, backward_ms=backward_ms, caps_mib=caps, steps=steps,
    )[0]  # fmt: skip
    return pd.DataFrame(rows).assign(rate_mbit=rate_mbit)[COLUMNS]


def predicted(sweep: pd.DataFrame, world_size: int = 2) -> pd.DataFrame:
    """Each cap's exposed communication by the book's bucket model.

    The model takes the backward pass measured alone, the buckets DDP made
    (their bytes, in the order the backward pass fills them), and the link as
    the same ranks timed it: the bandwidth from the all-reduce of every
    gradient, the latency from the 4-byte one.

    Returns:
        ``sweep`` with ``model_exposed_s`` and ``model_comm_s`` added.
    """
    from clusterlab.models.data_parallel import bucket_overlap_time

    out = sweep.copy()
    exposed, comm = [], []
    for r in out.itertuples():
        alpha_s = r.tiny_allreduce_s / (2 * (world_size - 1))
        # the bandwidth that makes the ring model give the measured all-reduce
        ring_bytes = 2 * (world_size - 1) / world_size * r.grad_bytes
        bw_Bps = ring_bytes / max(r.allreduce_s - 2 * (world_size - 1) * alpha_s, 1e-9)
        sizes = [float(b) for b in str(r.bucket_bytes).split()]
        t = bucket_overlap_time(
            r.backward_alone_s, r.grad_bytes, world_size, alpha_s, bw_Bps,
            r.buckets, bucket_bytes=sizes,
        )  # fmt: skip
        exposed.append(t["exposed_s"])
        comm.append(t["comm_s"])
    return out.assign(model_exposed_s=exposed, model_comm_s=comm)


def recorded() -> pd.DataFrame:
    """The book's recorded sweep, with its provenance columns."""
    import clusterlab.core.published as published

    return published.load(TABLE)


def measure_or_recorded(**kwargs) -> tuple[pd.DataFrame, str]:
    """The sweep measured across emulated nodes here, or the recorded one.

    ``kwargs`` go to ``bucket_sweep_across_nodes`` (``EXPERIMENT`` by default).

    Returns:
        The table and one sentence (also in the table's ``attrs["note"]``):
        measured here, or why not and what is shown.
    """
    from clusterlab.cluster.recorded import here_or_recorded

    sweep, note = here_or_recorded(
        lambda: bucket_sweep_across_nodes(**{**EXPERIMENT, **kwargs}),
        recorded,
        COLUMNS,
    )
    sweep.attrs["note"] = note  # kept by ``predicted``
    return sweep, note


__all__ = [
    "COLUMNS",
    "EXPERIMENT",
    "TABLE",
    "bucket_sweep_across_nodes",
    "measure_or_recorded",
    "predicted",
    "recorded",
]
