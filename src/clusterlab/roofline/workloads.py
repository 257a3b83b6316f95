"""Measuring a workload's traits: small kernels of the GPU-or-CPU table, timed.

Whether a workload belongs on GPUs depends on four traits: its arithmetic
intensity (FLOP per byte), the share of its compute time in dense matrix
arithmetic, the share of its time waiting on I/O, and whether the rest is
branchy per-record code (which a GPU does not speed up) or streaming array
code (which gains the ratio of memory bandwidths). This module measures them
by running a small kernel of each workload on one core of this machine:

* training: a two-layer network's forward and backward pass, written out as
  matrix multiplies and element-wise steps, on token ids that a loader
  thread reads from disk while the previous shard trains;
* batch inference: the forward pass of four layers, 32 requests at a time,
  on requests read the same way;
* preprocessing + training: the preprocessing kernel, then one training pass
  over the very tokens it produced;
* web serving, key-value store, data preprocessing, real-time analytics and
  web crawler: per-record kernels (``perf.record_kernels``).

FLOPs and bytes are counted from each operation's sizes (every operand read
once, every result written once). What cannot be measured here: a real
network (a local socket costs microseconds, a data-centre round trip tens of
microseconds or more), a cold disk (the page cache or the host may serve
reads), and a GPU. So the I/O shares are lower bounds, and a small kernel's
intensity is a lower bound of a large model's (a matrix multiply's intensity
grows with its sizes).

Run it from a shell: ``python -m clusterlab.roofline.workloads``.
"""

from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from clusterlab.core.env import size
from clusterlab.core.validate import check_int
from clusterlab.roofline.kernels import RECORD_KERNELS, preprocessing
from clusterlab.roofline.phase_clock import (
    PHASES,
    Clock,
    cold_file,
    count_elementwise,
    matmul,
)

_WIDTH = 128  # model width of the training kernels


def _train_pass(c: Clock, x, width: int, batch: int, rng) -> None:
    """One pass over ``x`` (rows, d) of an autoencoder d -> width -> d, by batches."""
    import torch

    d = x.shape[1]
    w1 = torch.randn(d, width, generator=rng) / d**0.5
    w2 = torch.randn(width, d, generator=rng) / width**0.5
    for start in range(0, x.shape[0], batch):
        xb = x[start : start + batch]
        h = matmul(c, xb, w1)
        a = torch.relu(h)
        y = matmul(c, a, w2)
        dy = (y - xb) * (2.0 / y.numel())  # gradient of the squared error
        count_elementwise(c, h.numel(), 1, 2)
        count_elementwise(c, y.numel(), 3, 3)
        dw2 = matmul(c, a.T, dy)
        da = matmul(c, dy, w2.T)
        dh = da * (h > 0)
        dw1 = matmul(c, xb.T, dh)
        w1 -= 1e-3 * dw1
        w2 -= 1e-3 * dw2
        count_elementwise(c, h.numel(), 2, 3)
        count_elementwise(c, w1.numel() + w2.numel(), 2, 3)
        c.lap("stream")


def _embed(c: Clock, ids, table):
    """Token ids to rows of an embedding table: a gather, streaming."""
    x = table[ids]
    count_elementwise(c, x.numel(), 0, 2)
    c.lap("stream")
    return x


def _prefetched(c: Clock, paths, dtype):
    """Yield each file as a tensor, read by a loader thread one file ahead.

    The first file is read before the clock starts: a real job fills its
    loader's queue once, then overlaps reading with compute for days. Only
    the time the step waits for the next file counts as I/O.
    """
    import torch

    def load(path):
        with open(path, "rb") as f:
            return torch.frombuffer(bytearray(f.read()), dtype=dtype)

    with ThreadPoolExecutor(max_workers=1) as loader:
        pending = loader.submit(load, paths[0])
        pending.result()
        c.start()
        for i in range(len(paths)):
            part = pending.result()
            c.bytes += part.numel() * part.element_size()
            c.lap("io")  # waiting for the loader
            if i + 1 < len(paths):
                pending = loader.submit(load, paths[i + 1])
            yield part
        c.lap("stream")


def _training(c: Clock, n: int, folder: str, rng) -> None:
    import torch

    ids = torch.randint(0, 32000, (n,), generator=rng, dtype=torch.int32)
    paths = [
        cold_file(folder, f"tokens{i}.bin", part.numpy().tobytes())
        for i, part in enumerate(ids.chunk(4))
    ]
    table = torch.randn(32000, _WIDTH, generator=rng)
    for shard in _prefetched(c, paths, torch.int32):
        _train_pass(c, _embed(c, shard.long(), table), 4 * _WIDTH, 256, rng)


def _inference(c: Clock, n: int, folder: str, rng) -> None:
    import torch

    d, layers = 512, 4
    weights = [torch.randn(d, d, generator=rng) / d**0.5 for _ in range(layers)]
    x = torch.randn(n, d, generator=rng)
    paths = [
        cold_file(folder, f"requests{i}.bin", part.numpy().tobytes())
        for i, part in enumerate(x.split(128))
    ]
    for part in _prefetched(c, paths, torch.float32):
        part = part.reshape(-1, d)
        for start in range(0, part.shape[0], 32):  # batches of 32 requests
            h = part[start : start + 32]
            for w in weights:
                h = torch.relu(matmul(c, h, w))
                count_elementwise(c, h.numel(), 1, 2)
                c.lap("stream")


def _pipeline(c: Clock, n: int, folder: str, rng) -> None:
    import torch

    table = torch.randn(256, _WIDTH, generator=rng)  # more rows than words
    ids = torch.tensor(preprocessing(c, n, folder))
    c.lap("branchy")
    _train_pass(c, _embed(c, ids, table), 4 * _WIDTH, 256, rng)


def _record(kernel):
    return lambda c, n, folder, rng: kernel(c, n, folder)


_SIZES = {  # records at SMOKE size and at FULL size
    "LLM training (70B)": (2048, 16384),
    "batch inference (70B)": (512, 4096),
    "preprocessing + training": (600, 4000),
    "web serving": (1500, 20000),
    "data preprocessing": (3000, 40000),
    "real-time analytics": (3000, 40000),
    "key-value store (Redis)": (3000, 40000),
    "web crawler": (60, 600),
}


_KERNELS = {
    "LLM training (70B)": _training,
    "batch inference (70B)": _inference,
    "preprocessing + training": _pipeline,
    **{name: _record(k) for name, k in RECORD_KERNELS.items()},
}


#: Workload name -> (kernel, records at SMOKE size, records at FULL size).
WORKLOAD_KERNELS = {name: (_KERNELS[name], *_SIZES[name]) for name in _SIZES}


def run_kernel(name: str, records: int | None = None, seed: int = 0) -> dict:
    """Run one workload's kernel on one core and time its phases.

    Args:
        name: a key of ``WORKLOAD_KERNELS``.
        records: rows, requests, events or pages, in [1, 10**6]; default: the
            kernel's SMOKE or FULL size.
        seed: seeds the kernel's tensors.

    Returns:
        ``{"workload", "records", "time_s", "io_s", "dense_s", "stream_s",
        "branchy_s", "flop", "bytes", "messages"}``: seconds per phase (they
        sum to ``time_s``), and the FLOPs, bytes and messages counted.
    """
    import torch

    if name not in WORKLOAD_KERNELS:
        raise ValueError(f"name={name!r} must be one of {list(WORKLOAD_KERNELS)}")
    kernel, smoke, full = WORKLOAD_KERNELS[name]
    n = size(smoke=smoke, full=full) if records is None else records
    n = check_int("records", n, 1, 10**6)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core: the decision compares one GPU with one
    try:
        with tempfile.TemporaryDirectory() as folder:
            c = Clock()
            kernel(c, n, folder, torch.Generator().manual_seed(seed))
    finally:
        torch.set_num_threads(threads)
    times = {f"{p}_s": c.s[p] for p in PHASES}
    return {
        "workload": name,
        "records": n,
        "time_s": sum(times.values()),
        **times,
        "flop": c.flop,
        "bytes": c.bytes,
        "messages": c.messages,
    }


def traits_from_phases(run: dict) -> dict:
    """The decision's traits from one kernel's phase times and counts.

    Args:
        run: ``run_kernel``'s result (or the same keys).

    Returns:
        ``intensity`` (FLOP per byte; a kernel with no floating-point work
        counts one FLOP, since the roofline has no point at zero),
        ``io_fraction`` (I/O seconds / all seconds), ``dense_fraction``
        (dense seconds / compute seconds), ``branch_fraction`` (branchy
        seconds / the compute that is not dense; 0 when there is none) and
        ``branching`` (``branch_fraction >= 0.5``).
    """
    total = float(run["time_s"])
    if not total > 0:
        raise ValueError(f"time_s={total!r} must be > 0")
    compute = max(total - run["io_s"], 1e-12)
    other = max(compute - run["dense_s"], 0.0)
    branch = run["branchy_s"] / other if other > 1e-12 else 0.0
    return {
        "intensity": max(run["flop"], 1.0) / max(run["bytes"], 1.0),
        "io_fraction": run["io_s"] / total,
        "dense_fraction": min(run["dense_s"] / compute, 1.0),
        "branch_fraction": min(branch, 1.0),
        "branching": branch >= 0.5,
    }


def measure_traits(names=None, seed: int = 0) -> pd.DataFrame:
    """Run each workload's kernel and return its measured traits.

    Args:
        names: workloads to measure (keys of ``WORKLOAD_KERNELS``); default all.
        seed: seeds the kernels.

    Returns:
        One row per workload: ``run_kernel``'s columns and
        ``traits_from_phases``'s.
    """
    names = list(WORKLOAD_KERNELS) if names is None else list(names)
    rows = []
    for name in names:
        run = run_kernel(name, seed=seed)
        rows.append({**run, **traits_from_phases(run)})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    cols = ["workload", "intensity", "io_fraction", "dense_fraction", "branching"]
    print(measure_traits()[cols].round(3).to_string(index=False))


__all__ = [
    "WORKLOAD_KERNELS",
    "measure_traits",
    "run_kernel",
    "traits_from_phases",
]
