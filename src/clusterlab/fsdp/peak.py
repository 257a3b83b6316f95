"""FSDP's peak memory, measured while forward and backward run.

The bytes a rank keeps between steps are ZeRO-3's ``16 N / d``; the peak
comes while a step runs, when whole layers are gathered and activations are
saved. ``fsdp_peak_worker`` trains ``dp_mlp`` under FSDP2 with resharding
(``reshard_after_forward``) and explicit prefetching on or off, and measures
the highest memory in use during forward and backward:

- on a GPU, ``torch.cuda.max_memory_allocated`` (the caching allocator's own
  count) after ``reset_peak_memory_stats``;
- on a CPU, the C library's count of bytes in use (glibc's ``mallinfo2``:
  every ``malloc`` of every thread, tensors included), read after every
  operator through a ``TorchDispatchMode``.

``fsdp_peak_vs_model`` sets the measurements beside
:func:`clusterlab.models.fsdp_memory.fsdp_peak_bytes`. Run it from a shell::

    python -m clusterlab.fsdp.peak
"""

from __future__ import annotations

import ctypes
import ctypes.util
import statistics

import pandas as pd
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from clusterlab.core.launcher import launch
from clusterlab.core.validate import check_float, check_int
from clusterlab.data_parallel.ranks import (
    dp_batch,
    dp_mlp,
    one_thread_per_rank,
    rank_device,
)
from clusterlab.fsdp.ranks import local_bytes

#: How far a measured rise may be from the model's, in layers: gloo frees its
#: temporary copy of one layer from its own thread, so a reading may or may not
#: include it (the lab measures the spread), and the model leaves out pieces
#: smaller than a layer (the loss, early or late frees).
PEAK_TOLERANCE_LAYERS = 1.0


#: (reshard_after_forward, prefetch) pairs the lab measures.
FSDP_PEAK_CONFIGS = ((True, False), (True, True), (False, False), (False, True))


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks "
            "keepcost"
        ).split()
    ]


def _heap_in_use():
    """A function giving the bytes ``malloc`` has handed out, or None."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if not hasattr(libc, "mallinfo2"):  # not glibc >= 2.33 (macOS, musl)
        return None
    libc.mallinfo2.restype = _MallInfo2

    def in_use() -> int:
        info = libc.mallinfo2()
        return int(info.uordblks + info.hblkhd)  # heap chunks + mmapped blocks

    return in_use


class _CpuPeak(TorchDispatchMode):
    """Highest ``in_use()`` above its value on entry, read after every operator."""

    def __init__(self, in_use):
        super().__init__()
        self.in_use, self.base, self.rise = in_use, in_use(), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.rise = max(self.rise, self.in_use() - self.base)
        return out


def _shard(model, world_size, device, reshard: bool, prefetch: bool):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (world_size,))
    layers = [m for m in model if isinstance(m, torch.nn.Linear)]
    for layer in layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    for i, layer in enumerate(layers):
        if prefetch:
            layer.set_modules_to_forward_prefetch(layers[i + 1 : i + 2])
            layer.set_modules_to_backward_prefetch(layers[max(i - 1, 0) : i])
        else:
            # Naming the layer itself (already gathered) turns off FSDP's
            # implicit backward prefetch, which an empty list would keep.
            layer.set_modules_to_backward_prefetch([layer])
    return model


def fsdp_peak_worker(
    rank: int,
    world_size: int,
    *,
    width: int = 256,
    depth: int = 5,
    batch_per_rank: int = 128,
    reshard_after_forward: bool = True,
    prefetch: bool = False,
    steps: int = 3,
    seed: int = 0,
    lr: float = 1e-3,
) -> dict:
    """Train ``dp_mlp(width, depth)`` under FSDP2 with Adam; measure each step's peak.

    The first step is not measured (it builds Adam's state and FSDP's
    buffers); each later step's forward and backward are.

    Args:
        rank, world_size: given by the launcher.
        width, depth: the MLP's shape (``depth + 1`` equal Linear layers).
        batch_per_rank: rows per rank, in [1, 65536].
        reshard_after_forward: FSDP2's option of that name.
        prefetch: gather the next layer early (forward and backward), or not.
        steps: steps in all, in [2, 100]; ``steps - 1`` are measured.
        seed: seeds the weights and the data.
        lr: Adam's learning rate, in (0, 1].

    Returns:
        dict: ``rises`` (bytes above the step's start, one per measured step),
        ``state_bytes`` (this rank's weight and Adam shards at the last step's
        start), ``layer_bytes``, ``act_bytes``, ``n_layers``, ``meter``.
    """
    steps = check_int("steps", steps, 2, 100)
    batch_per_rank = check_int("batch_per_rank", batch_per_rank, 1, 65536)
    lr = check_float("lr", lr, 0.0, 1.0, low_inclusive=False)
    one_thread_per_rank()
    device = rank_device(rank)
    model = dp_mlp(width, depth, seed).to(device)
    model = _shard(model, world_size, device, reshard_after_forward, prefetch)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    in_use = _heap_in_use() if device.type == "cpu" else None
    if device.type == "cpu" and in_use is None:
        raise RuntimeError("measuring CPU memory needs glibc's mallinfo2 (Linux)")
    rises, state = [], 0
    for step in range(steps):
        x, y = (
            t.to(device)
            for t in dp_batch(step, rank, world_size, batch_per_rank, width, seed)
        )
        opt.zero_grad()  # gradients to None: backward allocates them again
        opt_state = [t for s in opt.state.values() for t in s.values()]
        state = local_bytes([*model.parameters(), *opt_state])[0]
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            start = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            torch.nn.functional.mse_loss(model(x), y).backward()
            torch.cuda.synchronize(device)
            rise = torch.cuda.max_memory_allocated(device) - start
        else:
            with _CpuPeak(in_use) as meter:
                torch.nn.functional.mse_loss(model(x), y).backward()
            rise = meter.rise
        if step:
            rises.append(int(rise))
        opt.step()
    return {
        "rank": rank,
        "rises": rises,
        "state_bytes": int(state),
        "layer_bytes": 4 * (width * width + width),
        "act_bytes": 4 * batch_per_rank * width,
        "n_layers": depth + 1,
        "meter": "cuda" if device.type == "cuda" else "mallinfo2",
    }


def measure_fsdp_peak(
    world_size: int = 2, configs=FSDP_PEAK_CONFIGS, **worker_kw
) -> pd.DataFrame:
    """Launch ``fsdp_peak_worker`` once per configuration; one row per measurement.

    Args:
        world_size: ranks, in [1, 64].
        configs: ``(reshard_after_forward, prefetch)`` pairs.
        **worker_kw: passed to the worker (``width``, ``depth``, ...).

    Returns:
        DataFrame ``reshard, prefetch, rank, step, rise_bytes, state_bytes,
        layer_bytes, act_bytes, n_layers, world_size``.
    """
    n = check_int("world_size", world_size, 1, 64)
    rows = []
    for reshard, prefetch in configs:
        out = launch(
            fsdp_peak_worker,
            n,
            reshard_after_forward=bool(reshard),
            prefetch=bool(prefetch),
            **worker_kw,
        )
        for r in out:
            for step, rise in enumerate(r["rises"], start=1):
                rows.append(
                    dict(
                        reshard=bool(reshard),
                        prefetch=bool(prefetch),
                        rank=r["rank"],
                        step=step,
                        rise_bytes=rise,
                        **{k: r[k] for k in ("state_bytes", "layer_bytes")},
                        **{k: r[k] for k in ("act_bytes", "n_layers")},
                        world_size=n,
                    )
                )
    return pd.DataFrame(rows)


def fsdp_peak_vs_model(measured: pd.DataFrame, model=None) -> pd.DataFrame:
    """Each configuration's measured rise beside a model's, in layers.

    Args:
        measured: ``measure_fsdp_peak``'s DataFrame.
        model: a function like
            :func:`~clusterlab.models.fsdp_memory.fsdp_peak_bytes` (the default);
            pass a wrong one to see the check fail.

    Returns:
        DataFrame, one row per ``reshard, prefetch``: ``measured_rise_bytes``
        (median over ranks and steps), ``spread_bytes`` (largest minus smallest),
        ``predicted_rise_bytes``, ``measured_peak_bytes``, ``predicted_peak_bytes``
        ``error_layers`` (measured minus predicted rise, in layers) and
        ``layer_bytes``.
    """
    from clusterlab.models.fsdp_memory import fsdp_peak_bytes

    model = fsdp_peak_bytes if model is None else model
    need = {"reshard", "prefetch", "rise_bytes", "state_bytes", "layer_bytes"}
    if not isinstance(measured, pd.DataFrame) or not need <= set(measured.columns):
        raise ValueError(f"measured must be a DataFrame with columns {sorted(need)}")
    rows = []
    for (reshard, prefetch), part in measured.groupby(["reshard", "prefetch"]):
        first = part.iloc[0]
        p = int(first["layer_bytes"])
        pred = model(
            int(first["n_layers"]),
            p,
            int(first["act_bytes"]),
            int(first["world_size"]),
            reshard_after_forward=bool(reshard),
            prefetch=bool(prefetch),
        )
        rise = float(statistics.median(part["rise_bytes"]))
        state = float(part["state_bytes"].max())
        rows.append(
            dict(
                reshard=bool(reshard),
                prefetch=bool(prefetch),
                measured_rise_bytes=rise,
                spread_bytes=float(part["rise_bytes"].max() - part["rise_bytes"].min()),
                predicted_rise_bytes=float(pred["rise"]),
                measured_peak_bytes=state + rise,
                predicted_peak_bytes=float(pred["peak"]),
                error_layers=(rise - pred["rise"]) / p,
                layer_bytes=p,
            )
        )
    return pd.DataFrame(rows)


def fsdp_peak_agrees(
    table: pd.DataFrame, tolerance_layers: float = PEAK_TOLERANCE_LAYERS
) -> tuple[bool, str]:
    """Whether every configuration's measured rise is within the tolerance.

    Args:
        table: ``fsdp_peak_vs_model``'s DataFrame.
        tolerance_layers: the bound, in layers, > 0.

    Returns:
        ``(ok, message)``: the message names the configurations that miss, and
        says whether the readings themselves spread wider than the bound (a
        noisy measurement, worth repeating) or not (a wrong model).
    """
    tol = check_float("tolerance_layers", tolerance_layers, 0.0, 100.0)
    if "error_layers" not in getattr(table, "columns", ()):
        raise ValueError("table must be fsdp_peak_vs_model's DataFrame")
    bad = table[table["error_layers"].abs() > tol]
    if bad.empty:
        worst = table["error_layers"].abs().max()
        return True, f"every configuration within {worst:.2f} of {tol:g} layers"
    parts = []
    for _, r in bad.iterrows():
        noisy = r["spread_bytes"] > tol * r["layer_bytes"]
        parts.append(
            f"reshard={r['reshard']}, prefetch={r['prefetch']}: measured "
            f"{r['measured_rise_bytes'] / 1e6:.2f} MB, model "
            f"{r['predicted_rise_bytes'] / 1e6:.2f} MB "
            f"({r['error_layers']:+.2f} layers)"
            + (" and the readings spread wider than the bound" if noisy else "")
        )
    return False, "; ".join(parts)


if __name__ == "__main__":  # pragma: no cover - a demonstration from the shell
    print(fsdp_peak_vs_model(measure_fsdp_peak(2)).round(3).to_string(index=False))


__all__ = [
    "FSDP_PEAK_CONFIGS",
    "PEAK_TOLERANCE_LAYERS",
    "fsdp_peak_agrees",
    "fsdp_peak_vs_model",
    "fsdp_peak_worker",
    "measure_fsdp_peak",
]
