"""Choosing between a GPU cluster and distributed CPU computing, with reasons.

The decision framework of the book's last part, as a pure function: a workload's
traits in, a recommendation out (``"GPU cluster"``, ``"distributed CPU"`` or
``"both"``), with every reason tied to a rule and every number computed by
an earlier model:

* the roofline (``models.roofline``) gives the GPU's and the CPU's attainable
  FLOP/s at the workload's arithmetic intensity;
* Amdahl's law turns that into a speedup of the whole job: time spent waiting
  on I/O does not speed up, branchy code runs no faster on a GPU than on a
  core, and other streaming work speeds up by the ratio of memory bandwidths;
* the traits (intensity, dense share, I/O share, branchy share) are measured
  by running a small kernel of each workload (``perf.workloads``) and turned
  into a ``Workload`` by ``measured_workloads``; ``PRESETS`` holds what cannot
  be measured on one machine (memory to hold, whether requests are small and
  latency-bound, whether nodes must agree), with stated traits for pages
  that run no kernel;
* the price per hour turns the speedup into a cost per unit of work;
* the memory the job needs gives the number of GPUs it must be sharded over.

Rules D1 (when a GPU cluster), D2 (when distributed CPUs) and D3 (when both)
are the source's; the numbers decide between them when traits disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from clusterlab.core import published
from clusterlab.core.units import GB as _GB
from clusterlab.core.validate import check_float
from clusterlab.models.roofline import attainable_flops, matmul_intensity


@dataclass(frozen=True)
class Workload:
    """What the decision needs to know about a job.

    Attributes:
        name: a label.
        intensity: FLOP per byte of memory traffic of its main kernel.
        dense_fraction: share of its compute time (on a CPU core) in dense
            matrix or tensor arithmetic, in [0, 1].
        io_fraction: share of its time (on a CPU core) waiting on disk or
            network I/O, in [0, 1].
        state_bytes: memory it must hold (model state, working set), bytes.
        latency_bound: many small requests, each of which must finish fast.
        branching: complex, data-dependent control flow.
        strong_consistency: nodes must agree on shared state at every step.
        branch_fraction: share of the compute that is not dense spent in
            branchy code, in [0, 1]; the rest streams. Default: 1 when
            ``branching``, else 0.
    """

    name: str
    intensity: float
    dense_fraction: float
    io_fraction: float = 0.0
    state_bytes: float = 0.0
    latency_bound: bool = False
    branching: bool = False
    strong_consistency: bool = False
    branch_fraction: float | None = None


@dataclass(frozen=True)
class Hardware:
    """One GPU against one CPU core, with their prices per hour.

    Attributes:
        gpu_peak_flops, gpu_bandwidth_Bps, gpu_memory_bytes: one GPU.
        cpu_peak_flops, cpu_bandwidth_Bps: one CPU core (its share of the
            socket's memory bandwidth).
        gpu_price_per_hour, cpu_price_per_hour: dollars per GPU-hour and per
            core-hour.
    """

    gpu_peak_flops: float
    gpu_bandwidth_Bps: float
    gpu_memory_bytes: float
    cpu_peak_flops: float
    cpu_bandwidth_Bps: float
    gpu_price_per_hour: float
    cpu_price_per_hour: float


def reference_hardware(
    gpu_part: str = "H100 SXM5",
    *,
    cpu_peak_flops: float | None = None,
    cpu_bandwidth_Bps: float | None = None,
    gpu_price_per_hour: float | None = None,
    cpu_price_per_hour: float | None = None,
) -> Hardware:
    """One GPU from ``data/gpu_specs.csv`` against one CPU core, with prices.

    Args:
        gpu_part: a ``part`` of ``data/gpu_specs.csv``.
        cpu_peak_flops, cpu_bandwidth_Bps: one core's rates (measure yours);
            defaults: the assumption row of ``data/cpu_core.csv``.
        gpu_price_per_hour: dollars per GPU-hour; default: the reference
            on-demand row of ``data/prices.csv``.
        cpu_price_per_hour: dollars per core-hour; default: the assumption row
            ``cpu_core_hour`` of ``data/prices.csv``.

    Returns:
        A ``Hardware``.
    """
    from clusterlab.models.economics import cloud_price

    spec = published.row("gpu_specs", part=gpu_part)
    core = published.row("cpu_core", item="server_core_assumed")
    return Hardware(
        gpu_peak_flops=float(spec["bf16_dense_flops"]),
        gpu_bandwidth_Bps=float(spec["hbm_bandwidth_Bps"]),
        gpu_memory_bytes=float(spec["hbm_bytes"]),
        cpu_peak_flops=float(
            core["peak_flops"] if cpu_peak_flops is None else cpu_peak_flops
        ),
        cpu_bandwidth_Bps=float(
            core["bandwidth_Bps"] if cpu_bandwidth_Bps is None else cpu_bandwidth_Bps
        ),
        gpu_price_per_hour=float(
            cloud_price() if gpu_price_per_hour is None else gpu_price_per_hour
        ),
        cpu_price_per_hour=float(
            published.value("prices", "usd", item="cpu_core_hour")
            if cpu_price_per_hour is None
            else cpu_price_per_hour
        ),
    )


def job_speedup(w: Workload, hw: Hardware) -> dict:
    """How much faster one GPU runs the whole job than one CPU core, and at what price.

    Returns:
        ``kernel_speedup`` (the roofline ratio at the workload's intensity),
        ``job_speedup`` (Amdahl over I/O, dense and other work),
        ``price_ratio`` (GPU-hour / core-hour) and ``cost_ratio`` (GPU cost per
        unit of work / CPU cost per unit of work; below 1 the GPU is cheaper).
    """
    i = check_float("intensity", w.intensity, 0.0, low_inclusive=False)
    d = check_float("dense_fraction", w.dense_fraction, 0.0, 1.0)
    io = check_float("io_fraction", w.io_fraction, 0.0, 1.0)
    gpu = float(attainable_flops(i, hw.gpu_peak_flops, hw.gpu_bandwidth_Bps))
    cpu = float(attainable_flops(i, hw.cpu_peak_flops, hw.cpu_bandwidth_Bps))
    kernel = gpu / cpu
    b = float(w.branching) if w.branch_fraction is None else w.branch_fraction
    b = check_float("branch_fraction", b, 0.0, 1.0)
    # Non-dense work: branchy code gains nothing; streaming code gains the
    # bandwidth ratio. I/O waits the same on either.
    stream = hw.gpu_bandwidth_Bps / hw.cpu_bandwidth_Bps
    gpu_time = io + (1 - io) * (d / kernel + (1 - d) * (b + (1 - b) / stream))
    speedup = 1.0 / gpu_time
    price = hw.gpu_price_per_hour / hw.cpu_price_per_hour
    return {
        "kernel_speedup": kernel,
        "job_speedup": speedup,
        "price_ratio": price,
        "cost_ratio": price / speedup,
    }


def recommend(w: Workload, hw: Hardware) -> dict:
    """Recommend a GPU cluster, distributed CPUs or both, with the reasons.

    Args:
        w: the workload's traits.
        hw: the hardware and prices to compare.

    Returns:
        ``{"choice", "reasons", "numbers"}``: the choice, a list of
        ``(rule, sentence)`` pairs, and the numbers behind them.
    """
    n = job_speedup(w, hw)
    gpus = max(1, math.ceil(w.state_bytes / hw.gpu_memory_bytes))
    n["gpus_to_hold_state"] = gpus
    for_gpu, for_cpu = [], []
    if w.dense_fraction >= 0.5:
        for_gpu.append(
            ("D1", f"{w.dense_fraction:.0%} of the work is dense arithmetic")
        )
    if n["cost_ratio"] < 1:
        for_gpu.append(
            (
                "D1",
                f"a GPU runs the job {n['job_speedup']:.0f}x faster than a core for "
                f"{n['price_ratio']:.0f}x the price: {n['cost_ratio']:.2f}x the cost",
            )
        )
    else:
        for_cpu.append(
            (
                "D2",
                f"a GPU runs the job only {n['job_speedup']:.1f}x faster than a core "
                f"but costs {n['price_ratio']:.0f}x as much per hour",
            )
        )
    if w.io_fraction >= 0.5:
        for_cpu.append(("D2", f"{w.io_fraction:.0%} of the time waits on I/O"))
    if w.latency_bound:
        for_cpu.append(("D2", "many small requests: latency per request matters"))
    if w.branching:
        share = "" if w.branch_fraction is None else f" ({w.branch_fraction:.0%})"
        for_cpu.append(("D2", f"complex branching{share}: a GPU does not speed it up"))
    if w.strong_consistency:
        for_cpu.append(("D2", "strong consistency across nodes is a CPU-cluster job"))
    if gpus > 1 and for_gpu:
        for_gpu.append(("D1", f"its state needs {gpus} GPUs: shard it (Part III)"))
    if for_gpu and not for_cpu:
        choice = "GPU cluster"
    elif for_cpu and not for_gpu:
        choice = "distributed CPU"
    else:
        choice = "both"
    reasons = for_gpu + for_cpu
    if choice == "both":
        reasons.append(("D3", "split it: dense stages on GPUs, the rest on CPUs"))
    return {"choice": choice, "reasons": reasons, "numbers": n}


def decision_table(workloads, hw: Hardware) -> pd.DataFrame:
    """One row per (workload, reason) with the recommendation and its numbers.

    Args:
        workloads: ``Workload`` objects.
        hw: the hardware and prices to compare.

    Returns:
        Columns ``workload``, ``choice``, ``job_speedup``, ``cost_ratio``,
        ``line`` (the reason's index) and ``reason`` (``"rule: text"``).
    """
    rows = []
    for w in workloads:
        r = recommend(w, hw)
        for i, (rule, text) in enumerate(r["reasons"]):
            rows.append(
                {
                    "workload": w.name,
                    "choice": r["choice"],
                    "job_speedup": r["numbers"]["job_speedup"],
                    "cost_ratio": r["numbers"]["cost_ratio"],
                    "line": i,
                    "reason": f"{rule}: {text}",
                }
            )
    return pd.DataFrame(rows)


def measured_workloads(traits: pd.DataFrame, stated: dict | None = None) -> dict:
    """Workloads whose intensity, shares and branching are measured.

    Args:
        traits: ``cl.roofline.workloads.measure_traits()`` (columns ``workload``,
            ``intensity``, ``dense_fraction``, ``io_fraction``,
            ``branch_fraction``, ``branching``).
        stated: name -> ``Workload`` giving what is not measured (memory to
            hold, small requests, consistency); default ``PRESETS``.

    Returns:
        Name -> ``Workload``, in the order of ``traits``.
    """
    stated = PRESETS if stated is None else stated
    cols = ["workload", "intensity", "dense_fraction", "io_fraction"]
    missing = [c for c in cols + ["branch_fraction", "branching"] if c not in traits]
    if missing:
        raise ValueError(f"traits lacks the columns {missing}")
    out = {}
    for r in traits.itertuples(index=False):
        if r.workload not in stated:
            raise ValueError(f"workload={r.workload!r} must be one of {list(stated)}")
        out[r.workload] = replace(
            stated[r.workload],
            intensity=float(r.intensity),
            dense_fraction=float(r.dense_fraction),
            io_fraction=float(r.io_fraction),
            branching=bool(r.branching),
            branch_fraction=float(r.branch_fraction),
        )
    return out


#: Workloads of the source's GPU-versus-CPU table (W1) and its examples (F3, W4).
#: Memory, small requests and consistency are stated for the named job; the
#: intensity and the shares are stated guesses for pages that run no kernel,
#: and ``measured_workloads`` replaces them with measurements.
PRESETS = {
    "LLM training (70B)": Workload(
        "LLM training (70B)",
        matmul_intensity(4096, 8192, 8192),
        0.95,
        0.0,
        70 * _GB * 16,
    ),
    "batch inference (70B)": Workload(
        "batch inference (70B)",
        matmul_intensity(32, 8192, 8192),
        0.9,
        0.0,
        70 * _GB * 2,
    ),
    "preprocessing + training": Workload(
        "preprocessing + training",
        matmul_intensity(4096, 8192, 8192),
        0.6,
        0.3,
        7 * _GB * 16,
    ),
    "web serving": Workload(
        "web serving", 1 / 1024, 0.0, 0.3, 2 * _GB, True, True, False
    ),
    "data preprocessing": Workload(
        "data preprocessing", 0.25, 0.2, 0.7, 8 * _GB, False, True, False
    ),
    "real-time analytics": Workload(
        "real-time analytics", 0.125, 0.1, 0.4, 16 * _GB, True, True, False
    ),
    "key-value store (Redis)": Workload(
        "key-value store (Redis)", 1 / 1024, 0.0, 0.5, 32 * _GB, True, True, True
    ),
    "web crawler": Workload("web crawler", 0.01, 0.0, 0.8, 4 * _GB, False, True, False),
}


__all__ = [
    "Hardware",
    "PRESETS",
    "Workload",
    "decision_table",
    "job_speedup",
    "measured_workloads",
    "recommend",
    "reference_hardware",
]
