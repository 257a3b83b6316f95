"""Charts of mixture-of-experts layers: all-to-all time, the busiest expert, balancing.

The tables come from ``cl.models.moe`` (the all-to-all cost model over
published configurations), ``cl.experts.sim`` and ``cl.experts.check`` (the
sampled busiest expert against the order statistic) and
``cl.experts.router.train_router`` (imbalance while the router trains).
"""

from __future__ import annotations

import functools

import altair as alt
import pandas as pd

from clusterlab.core import published
from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice


@functools.cache
def ep_model() -> Choice:
    """The model: the live widget's menu and the page's radio (the sweep's models).

    Its options are the ``model`` rows of ``data/moe_configs.csv``, read on
    first use.
    """
    names = tuple(published.load("moe_configs")["model"])
    return Choice("moe_model", options=names, default=names[-1], label="model ")


# Tokens per rank, on the live widget's slider of values and the page's radio
# (the token counts the sweep holds).
EP_TOKENS = Choice(
    "moe_tokens", options=(512, 1024, 2048, 4096, 8192, 16384, 32768), default=4096,
    label="tokens per rank ", widget_label="tokens/rank", widget_kind="slider",
)  # fmt: skip

_PLACES = ["inside NVLink", "across the network"]


def ep_alltoall_chart(df: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Dispatch plus combine time of one MoE layer against the expert-parallel size.

    Radio buttons pick the model and the tokens per rank (in the page, no
    kernel needed); colour says whether the ranks share an NVLink domain.

    Args:
        df: ``cl.models.moe.config_alltoall_sweep``'s table.
        title: the chart's title.
    """
    need = ["model", "tokens_per_rank", "ep", "layer_ms", "placement"]
    check_columns(df, [*need, "ranks_per_domain"])
    g = int(df["ranks_per_domain"].iloc[0])
    data = df[need]
    names = list(dict.fromkeys(data["model"]))
    sizes = sorted(set(int(t) for t in data["tokens_per_rank"]))
    model = ep_model().among(names).param(value=names[-1])
    tokens = EP_TOKENS.among(sizes).param(value=sizes[len(sizes) // 2])
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("ep:O", title="expert-parallel size (ranks)"),
            y=alt.Y("layer_ms:Q", title="dispatch + combine per layer (ms)"),
            color=alt.Color("placement:N", title="ranks", sort=_PLACES),
            tooltip=[
                "model:N",
                "ep:O",
                "tokens_per_rank:Q",
                alt.Tooltip("layer_ms:Q", format=".3f", title="ms"),
            ],
        )
        .add_params(model, tokens)
        .transform_filter("datum.model == moe_model")
        .transform_filter("datum.tokens_per_rank == moe_tokens")
        .properties(
            width=360,
            title=alt.TitleParams(
                title or "Expert parallelism is cheap inside NVLink",
                subtitle=f"alpha-beta model, bf16, {g} GPUs per NVLink domain; past "
                f"{g} ranks most bytes leave through one network port per GPU",
            ),
        )
    )


def imbalance_chart(table: pd.DataFrame, title: str | None = None) -> alt.LayerChart:
    """Busiest expert over the mean load, sampled (points) and from the model (line).

    Args:
        table: ``cl.experts.check.busiest_expert_matches``'s table (``n_experts``,
            ``mean_load``, ``busiest_load``, ``model_load``).
        title: the chart's title.
    """
    check_columns(table, ["n_experts", "mean_load", "busiest_load", "model_load"])
    data = pd.DataFrame(
        {
            "n_experts": table["n_experts"],
            "sampled": table["busiest_load"] / table["mean_load"],
            "order statistic": table["model_load"] / table["mean_load"],
        }
    ).melt("n_experts", var_name="source", value_name="imbalance")
    base = alt.Chart(data).encode(
        x=alt.X("n_experts:Q", title="experts", scale=alt.Scale(type="log", base=2)),
        y=alt.Y(
            "imbalance:Q",
            title="busiest expert / mean load",
            scale=alt.Scale(zero=False),
        ),
        color=alt.Color("source:N", title=None),
        tooltip=["n_experts:Q", "source:N", alt.Tooltip("imbalance:Q", format=".3f")],
    )
    line = base.transform_filter("datum.source == 'order statistic'").mark_line()
    dots = base.transform_filter("datum.source == 'sampled'").mark_point(size=60)
    return (line + dots).properties(
        width=360,
        title=alt.TitleParams(
            title or "The busiest expert is a straggler",
            subtitle="uniform random routing; the layer waits for the largest load",
        ),
    )


def aux_loss_chart(history: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Imbalance while a router trains, with and without the balancing loss.

    Args:
        history: ``train_router``'s tables, concatenated (``step``,
            ``imbalance``, ``aux_weight``).
        title: the chart's title.
    """
    check_columns(history, ["step", "imbalance", "aux_weight"])
    data = history[["step", "imbalance", "aux_weight"]].assign(
        run=history["aux_weight"].map(
            lambda w: "no auxiliary loss" if w == 0 else f"auxiliary loss x {w:g}"
        )
    )
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="training step"),
            y=alt.Y("imbalance:Q", title="busiest expert / mean load"),
            color=alt.Color("run:N", title=None),
            tooltip=["run:N", "step:Q", alt.Tooltip("imbalance:Q", format=".2f")],
        )
        .properties(
            width=360,
            title=alt.TitleParams(
                title or "A balancing loss evens out the experts",
                subtitle="the step waits for the busiest expert: 1 is perfectly even",
            ),
        )
    )


__all__ = ["aux_loss_chart", "ep_alltoall_chart", "imbalance_chart"]
