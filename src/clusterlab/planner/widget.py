"""Widget: choose a model, GPUs, memory and the 5-D knobs; see which plans fit.

The planner behind it is ``cl.models.planner5d.plan5d``: the reader fixes the
context- and expert-parallel degrees, the precision and, if they like, the
ZeRO stage and the recomputation; every TP x PP x DP split of the GPUs is
then tried.
"""

from __future__ import annotations

import copy
import html
import json

import altair as alt

from clusterlab.models import compute
from clusterlab.models.memory import USABLE_MEMORY_FRACTION
from clusterlab.models.planner5d import MoEShape, moe_shape, plan5d
from clusterlab.planner.chart import GPU_MEMORY_GB, planner_chart, planner_sweep

#: Models on the widget's menu, with the GPU count and global batch (sequences)
#: it starts from for each.
PLANNER_MODELS = {
    "Llama 2 7B": (compute.LLAMA2_7B, 8, 64),
    "Llama 2 13B": (compute.LLAMA2_13B, 64, 256),
    "Llama 2 70B": (compute.LLAMA2_70B, 1024, 512),
    "GPT-3 175B": (compute.GPT3_175B, 1024, 1024),
    "DeepSeek-V3 (MoE)": (moe_shape("DeepSeek-V3 pre-training"), 2048, 15360),
}


#: The choices of the 5-D knobs ("any" lets the planner try every value).
CP_CHOICES = (1, 2, 4, 8)


EP_CHOICES = (1, 8, 16, 32, 64)


ZERO_CHOICES = ("any", 0, 1, 2, 3)


RECOMPUTE_CHOICES = ("any", "none", "selective", "full")


PRECISION_CHOICES = ("bf16", "fp16", "fp32", "fp8")


def _why_none(df, batch: int, micro_batch: int, usable_GB: float) -> str:
    """Why no plan is feasible, naming the value that stops them."""
    if not df["batch_ok"].any():
        dps = sorted(set(df["dp"]))
        works = [b for b in range(1, 9) if any(batch % (b * d) == 0 for d in dps)]
        return (
            f"<b>No plan splits the global batch.</b> Each data-parallel replica "
            f"runs whole micro-batches, so micro-batch ({micro_batch}) × DP must "
            f"divide the global batch ({batch}); DP here is one of "
            f"{', '.join(map(str, dps))}. Micro-batches that work with this batch: "
            f"{', '.join(map(str, works)) or 'none up to 8; change the global batch'}."
        )
    smallest = df.loc[df["batch_ok"], "memory_bytes"].min() / 1e9
    return (
        f"<b>No plan fits in memory.</b> The smallest plan needs {smallest:.1f} GB "
        f"per GPU, more than the {usable_GB:.0f} GB usable "
        f"({USABLE_MEMORY_FRACTION:.0%} of the GPU). "
        "Add GPUs or memory, or shorten the micro-batch."
    )


def _table(df, n=5) -> str:
    """The fastest feasible plans as a small HTML table."""
    ok = df[df["feasible"]].head(n)
    rows = "".join(
        f"<tr><td>TP{r.tp} CP{r.cp} PP{r.pp} DP{r.dp} EP{r.ep}</td>"
        f"<td>ZeRO-{r.zero_stage}</td>"
        f"<td>{r.recompute}{' +SP' if r.sequence_parallel else ''}</td>"
        f"<td>{r.memory_bytes / 1e9:.1f}</td><td>{r.bubble:.1%}</td>"
        f"<td>{(r.cp_comm_s + r.ep_comm_s) / r.step_s:.0%}</td>"
        f"<td>{r.tokens_per_s:,.0f}</td><td>{r.mfu:.1%}</td></tr>"
        for r in ok.itertuples()
    )
    head = (
        "<tr><th>plan</th><th>ZeRO</th><th>recompute</th><th>GB/GPU</th>"
        "<th>bubble</th><th>CP+EP share</th><th>tokens/s</th><th>MFU</th></tr>"
    )
    return f"<table>{head}{rows}</table>"


class _FastChart:
    """Redraw the planner chart by swapping its data and limit in a fixed spec.

    Building and validating an Altair chart costs more than the model itself;
    the spec's shape never changes between updates, so it is built once.
    """

    def __init__(self):
        self.spec = None

    def bundle(self, sweep, limit_GB):
        if self.spec is None:
            self.spec = planner_chart(sweep, limit_GB).to_dict()
            big = max(self.spec["datasets"].items(), key=lambda kv: len(kv[1]))
            self.key = big[0]
        spec = copy.copy(self.spec)
        spec["datasets"] = dict(spec["datasets"])
        spec["datasets"][self.key] = json.loads(sweep.to_json(orient="records"))
        spec["params"] = [dict(p, value=float(limit_GB)) for p in spec["params"]]
        out = alt.renderers.get()(spec)
        return out[0] if isinstance(out, tuple) else out


def _knob_note(shape, ep: int) -> str:
    """What the reader should know about the knobs they set."""
    if ep > 1 and not isinstance(shape, MoEShape):
        return (
            f" <i>EP {ep} is not used: expert parallelism splits MoE layers, and "
            f"{html.escape(shape.name)} is dense.</i>"
        )
    return ""


def _knobs(zero, rc, ep, shape) -> dict:
    """plan5d's options for the reader's choices ("any": try every value)."""
    kw = {}
    if zero != "any":
        kw["zero_stages"] = (zero,)
    if rc != "any":
        kw["recompute_modes"] = (rc,)
    kw["ep_options"] = (ep,) if isinstance(shape, MoEShape) else (1,)
    return kw


def planner_widget(model: str = "Llama 2 70B", micro_batch: int = 1):
    """A live planner: dropdowns and sliders in, chart and best plans out.

    Args:
        model: the starting entry of :data:`PLANNER_MODELS`.
        micro_batch: the starting micro-batch (sequences).

    Returns:
        An ``ipywidgets.VBox``; its ``update()`` attribute redraws it once
        (for timing).
    """
    import ipywidgets as w
    from IPython.display import display

    if model not in PLANNER_MODELS:
        raise ValueError(f"model={model!r} is not one of {list(PLANNER_MODELS)}")
    shape0, gpus, batch = PLANNER_MODELS[model]
    moe0 = isinstance(shape0, MoEShape)
    pick = w.Dropdown(options=list(PLANNER_MODELS), value=model, description="model")
    log2_gpus = w.IntSlider(value=gpus.bit_length() - 1, min=0, max=12)
    log2_gpus.description = "log2 GPUs"
    mem = GPU_MEMORY_GB.widget()
    mb = w.IntSlider(value=micro_batch, min=1, max=8, description="micro-batch")
    gbatch = w.IntText(value=batch, description="global batch")
    cp = w.Dropdown(options=CP_CHOICES, value=1, description="CP")
    ep = w.Dropdown(options=EP_CHOICES, value=64 if moe0 else 1, description="EP")
    zero = w.Dropdown(options=ZERO_CHOICES, value="any", description="ZeRO")
    rc = w.Dropdown(options=RECOMPUTE_CHOICES, value="any", description="recompute")
    prec = w.Dropdown(
        options=PRECISION_CHOICES, value="fp8" if moe0 else "bf16",
        description="precision",
    )  # fmt: skip
    status = w.HTML()
    out = w.Output()

    chart = _FastChart()
    quiet = {"on": False}  # set while a model change moves several controls

    def update(*_):
        if quiet["on"]:
            return
        shape = PLANNER_MODELS[pick.value][0]
        n = 2**log2_gpus.value
        try:
            df = plan5d(
                shape, n, global_batch=gbatch.value, micro_batch=mb.value,
                gpu_memory_bytes=mem.value * 1e9, cp_options=(cp.value,),
                precisions=(prec.value,),
                **_knobs(zero.value, rc.value, ep.value, shape),
            )  # fmt: skip
        except ValueError as exc:  # a bad combination: say so, stay usable
            status.value = f"<b>no plans:</b> {html.escape(str(exc))}"
            out.clear_output()
            return
        usable_GB = USABLE_MEMORY_FRACTION * mem.value
        head = (
            f"{pick.value} on {n} GPUs, CP {cp.value}, EP {ep.value}, "
            f"{prec.value}, micro-batch {mb.value}, global batch {gbatch.value}, "
            f"{usable_GB:.0f} GB usable: "
            f"{int(df.feasible.sum())} of {len(df)} plans feasible"
        )
        hidden = int((~df.batch_ok).sum())
        if hidden and df.batch_ok.any():
            head += (
                f" ({hidden} not drawn: their DP × micro-batch {mb.value} does not "
                f"divide the global batch {gbatch.value})"
            )
        head += _knob_note(shape, ep.value)
        if df.feasible.any():
            status.value = f"{head}; the fastest:" + _table(df)
        else:
            status.value = f"{head}. " + _why_none(
                df, gbatch.value, mb.value, usable_GB
            )
        out.clear_output(wait=True)
        with out:
            display(chart.bundle(planner_sweep(df, thin=True), usable_GB), raw=True)

    def on_model(change):
        shape, gpus, batch = PLANNER_MODELS[change["new"]]
        moe = isinstance(shape, MoEShape)
        quiet["on"] = True
        try:
            gbatch.value = batch
            log2_gpus.value = gpus.bit_length() - 1
            ep.value = 64 if moe else 1
            prec.value = "fp8" if moe else "bf16"
        finally:
            quiet["on"] = False
        update()

    pick.observe(on_model, names="value")
    for control in (log2_gpus, mem, mb, gbatch, cp, ep, zero, rc, prec):
        control.observe(update, names="value")
    update()
    box = w.VBox(
        [
            w.HBox([pick, log2_gpus, mem]),
            w.HBox([mb, gbatch, prec]),
            w.HBox([cp, ep, zero, rc]),
            status,
            out,
        ]
    )
    box.update = update
    return box


__all__ = ["PLANNER_MODELS", "planner_widget"]
