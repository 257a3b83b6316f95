"""Widgets for data parallelism: ZeRO memory per GPU, and DDP's bucket count.

Only wiring: each control change recomputes a model from
``clusterlab.models.data_parallel`` and redraws a chart from ``clusterlab.core.theme``.
"""

from __future__ import annotations

import html

from clusterlab.core.validate import check_float
from clusterlab.data_parallel.chart import (
    BUCKET_RANKS,
    COMPUTE_SCALE,
    ZERO_STAGE,
    bucket_chart,
    zero_memory_chart,
)
from clusterlab.models.data_parallel import bucket_sweep, zero_memory_sweep


def zero_memory_explorer(n_params: float = 7e9, gpu_bytes: float = 80e9):
    """Widget: model size, ZeRO stage and DP degree → bytes per GPU.

    Args:
        n_params: starting model size in parameters, in [1e6, 1e13].
        gpu_bytes: the memory of one GPU in bytes (default 80 GB, an H100).

    Returns:
        An ``ipywidgets.VBox``: controls, a one-line verdict and a chart.
    """
    import ipywidgets as w
    from IPython.display import display

    n_params = check_float("n_params", n_params, 1e6, 1e13)
    gpu_bytes = check_float("gpu_bytes", gpu_bytes, 0.0, low_inclusive=False)
    size = w.FloatLogSlider(
        value=n_params, base=10, min=8, max=12, step=0.05, description="parameters"
    )
    stage = ZERO_STAGE.widget()
    verdict = w.HTML()
    out = w.Output()

    def update(_=None):
        sweep = zero_memory_sweep(
            [size.value], dp_list=[2**k for k in range(11)], stages=[stage.value]
        )
        fits = sweep.groupby("dp")["total_bytes"].first()
        enough = fits[fits <= gpu_bytes]
        need = f"{enough.index[0]} GPUs" if len(enough) else "more than 1024 GPUs"
        verdict.value = html.escape(
            f"{size.value / 1e9:.3g}B parameters, ZeRO stage {stage.value}: "
            f"{fits.iloc[0] / 1e9:,.0f} GB of model state on one GPU; it fits in "
            f"{gpu_bytes / 1e9:g} GB per GPU from {need} (activations not counted)"
        )
        out.clear_output(wait=True)
        with out:
            display(zero_memory_chart(sweep, gpu_bytes=gpu_bytes, controls=False))

    size.observe(update, names="value")
    stage.observe(update, names="value")
    update()
    return w.VBox([w.HBox([size, stage]), verdict, out])


def bucket_explorer(
    backward_s: float, grad_bytes: float, alpha_s: float, bw_Bps: float
):
    """Widget: ranks, bucket count and compute scale → overlap of DDP.

    Args:
        backward_s: seconds of one backward pass (measured in the lab), > 0.
        grad_bytes: bytes of gradients per rank, > 0.
        alpha_s, bw_Bps: the all-reduce's latency per step and bandwidth.

    Returns:
        An ``ipywidgets.VBox``: controls, the numbers and a chart.
    """
    import ipywidgets as w
    from IPython.display import display

    backward_s = check_float("backward_s", backward_s, 0.0, low_inclusive=False)
    ranks = BUCKET_RANKS.widget()
    scale = COMPUTE_SCALE.widget()
    text = w.HTML()
    out = w.Output()

    def update(_=None):
        sweep = bucket_sweep(
            backward_s,
            grad_bytes,
            alpha_s,
            bw_Bps,
            world_sizes=[ranks.value],
            compute_scales=[scale.value],
        )
        best = sweep.loc[sweep["done_s"].idxmin()]
        text.value = html.escape(
            f"backward {best['backward_s'] * 1e3:.2f} ms; best of 1–256 buckets: "
            f"{int(best['buckets'])}, done after {best['done_s'] * 1e3:.2f} ms "
            f"({best['exposed_s'] * 1e3:.2f} ms of communication not hidden)"
        )
        out.clear_output(wait=True)
        with out:
            display(bucket_chart(sweep, controls=False))

    ranks.observe(update, names="value")
    scale.observe(update, names="value")
    update()
    return w.VBox([w.HBox([ranks, scale]), text, out])


__all__ = ["bucket_explorer", "zero_memory_explorer"]
