"""Charts of stragglers: how the slowest of N sets the step, and what mitigates it.

Every builder takes a tidy DataFrame (from ``cl.models.stragglers``,
``cl.stragglers.sim`` or ``cl.stragglers.ranks``) and returns an Altair chart;
nothing here computes a model or runs anything.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Choice, Range
from clusterlab.models.jitter import JITTERS

N_AXIS = "workers N (log scale)"


RATIO_AXIS = "step time / mean compute time"


def _n_x() -> alt.X:
    return alt.X(
        "n_workers:Q",
        scale=alt.Scale(type="log", base=2),
        axis=alt.Axis(values=[2**k for k in range(17)], format="d"),
        title=N_AXIS,
    )


def _wide_legend() -> alt.Legend:
    return alt.Legend(orient="bottom", direction="vertical", labelLimit=400)


def straggler_growth_chart(
    df: pd.DataFrame,
    title: str = "The slowest of N runs further ahead as N grows",
) -> alt.Chart:
    """Expected maximum of N compute times, in standard deviations above the mean.

    Args:
        df: columns ``n_workers, series, excess_sd`` (``max_growth_table``).
    """
    check_columns(df, ["n_workers", "series", "excess_sd"])
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=_n_x(),
            y=alt.Y("excess_sd:Q", title="E[slowest] − mean (standard deviations)"),
            color=alt.Color("series:N", title="distribution"),
            strokeDash=alt.StrokeDash("series:N", title="distribution"),
            tooltip=[
                "series",
                alt.Tooltip("n_workers:Q", title="N", format="d"),
                alt.Tooltip("excess_sd:Q", title="σ above the mean", format=".3f"),
            ],
        )
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="normal noise grows like √(2 ln N), slowly; "
                "heavier tails grow faster",
            )
        )
    )


def straggler_scaling_chart(
    model: pd.DataFrame,
    sim: pd.DataFrame | None = None,
    title: str = "Expected step time against the number of workers",
) -> alt.LayerChart:
    """Model lines (and simulated points) of step time over mean compute time.

    Args:
        model: columns ``n_workers, series, step_ratio``.
        sim: optional simulated points, same columns.
    """
    check_columns(model, ["n_workers", "series", "step_ratio"])
    y = alt.Y("step_ratio:Q", title=RATIO_AXIS, scale=alt.Scale(zero=False))
    color = alt.Color("series:N", title="scenario")
    tips = [
        "series",
        alt.Tooltip("n_workers:Q", title="N", format="d"),
        alt.Tooltip("step_ratio:Q", title="step / mean", format=".4f"),
    ]
    # A rule at 1 (no stragglers) keeps small differences in proportion.
    one = pd.DataFrame({"step_ratio": [1.0]})
    layers = [
        alt.Chart(one).mark_rule(color="#999", strokeDash=[2, 2]).encode(y=y),
        alt.Chart(model).mark_line().encode(x=_n_x(), y=y, color=color, tooltip=tips),
    ]
    subtitle = "lines: model (order statistics); grey: no stragglers"
    if sim is not None:
        check_columns(sim, ["n_workers", "series", "step_ratio"])
        layers.append(
            alt.Chart(sim)
            .mark_point(shape="diamond", size=90)
            .encode(x=_n_x(), y=y, color=color, tooltip=tips)
        )
        subtitle += "; diamonds: NumPy simulation of the same scenario"
    return alt.layer(*layers).properties(
        title=alt.TitleParams(title, subtitle=subtitle)
    )


# The noise's distribution, on the live widget's menu and the page's radio (the
# distributions the sweep holds).
JITTER = Choice(
    "jitter_pick", options=JITTERS, default="normal",
    label="distribution ", widget_label="noise",
)  # fmt: skip

# The jitter's cv and the slow worker's factor: the live widget's sliders, and
# the page's radios over the sweep's cases (Range.points).
JITTER_CV = Range(
    "cv_pick", min=0.0, max=1.0, step=0.01, default=0.1,
    label="jitter cv (std / mean) ", widget_label="cv",
)  # fmt: skip
SLOW_FACTOR = Range(
    "slow_pick", min=1.0, max=4.0, step=0.001, default=1.5,
    label="one worker slower by × ", widget_label="× slower",
)  # fmt: skip


def straggler_sweep_chart(
    df: pd.DataFrame,
    title: str = "Pick the noise and a slow worker: which mitigation helps?",
) -> alt.Chart:
    """The static twin of the lab's widget: radio buttons over a precomputed sweep.

    Args:
        df: ``cl.models.stragglers.step_time_sweep()``'s columns.
    """
    cols = ["n_workers", "jitter", "cv", "slow_factor", "mitigation", "step_ratio"]
    cols += ["throughput_loss"]
    check_columns(df, cols)
    jitters = list(dict.fromkeys(df["jitter"]))
    cvs = sorted(float(c) for c in df["cv"].unique())
    slows = sorted(float(f) for f in df["slow_factor"].unique())
    p_jitter = JITTER.among(jitters).param(value=jitters[0])
    p_cv = JITTER_CV.points(cvs).param(value=cvs[len(cvs) // 2])
    p_slow = SLOW_FACTOR.points(slows).param(value=slows[0])
    # The page carries every row, so it gets them as CSV text: one short row per
    # scenario and N, one column per mitigation (folded back into rows in the
    # browser), rounded to the tooltip's four decimals. A tenth of the bytes of
    # the long table as JSON objects.
    names = list(dict.fromkeys(df["mitigation"]))
    wide = (
        df.pivot_table(
            index=["n_workers", "jitter", "cv", "slow_factor"],
            columns="mitigation",
            values="step_ratio",
            sort=False,
        )
        .round(4)
        .rename(columns={m: f"m{i}" for i, m in enumerate(names)})
        .reset_index()
        .rename(columns={"n_workers": "n", "jitter": "j", "slow_factor": "f"})
    )
    label = "'" + names[-1].replace("'", "") + "'"
    for i in range(len(names) - 2, -1, -1):
        label = f"datum.key == 'm{i}' ? '{names[i]}' : {label}"
    fields = [f"m{i}" for i in range(len(names))]
    data = alt.InlineData(
        values=wide.to_csv(index=False, lineterminator="\n"),
        format=alt.DataFormat(
            type="csv", parse={k: "number" for k in ["n", "cv", "f", *fields]}
        ),
    )
    return (
        alt.Chart(data)
        .transform_filter(
            "datum.j == jitter_pick && abs(datum.cv - cv_pick) < 1e-9"
            " && abs(datum.f - slow_pick) < 1e-9"
        )
        .transform_fold(fields, as_=["key", "ratio"])
        .transform_calculate(
            n_workers="datum.n",
            step_ratio="datum.ratio",
            mitigation=label,
            throughput_loss="1 - 1 / datum.ratio",
        )
        .mark_line(point=True)
        .encode(
            x=_n_x(),
            y=alt.Y("step_ratio:Q", title=RATIO_AXIS, scale=alt.Scale(zero=False)),
            color=alt.Color("mitigation:N", title="mitigation"),
            # Dashes let a line that lies on another (no backups below 20
            # workers) show through it.
            strokeDash=alt.StrokeDash("mitigation:N", title="mitigation"),
            tooltip=[
                "mitigation:N",
                alt.Tooltip("n_workers:Q", title="N", format="d"),
                alt.Tooltip("step_ratio:Q", title="step / mean", format=".4f"),
                alt.Tooltip("throughput_loss:Q", title="throughput lost", format=".1%"),
            ],
        )
        .add_params(p_jitter, p_cv, p_slow)
        .properties(
            title=alt.TitleParams(
                title,
                subtitle="model; backup workers: the step waits for the fastest 95%; "
                "local SGD: all-reduce every 4 steps",
            )
        )
    )


def straggler_rounds_chart(
    df: pd.DataFrame,
    title: str = "Round by round: the real run follows the simulation",
) -> alt.FacetChart:
    """Time per step in each round, real and simulated, one panel per scenario.

    Args:
        df: columns ``scenario, engine, round, step_s``.
    """
    check_columns(df, ["scenario", "engine", "round", "step_s"])
    source = np.where(df["engine"] == "real", "real run", "simulation, same draws")
    # Only what the chart reads, rounded: a run carries a dozen more columns.
    data = pd.DataFrame(
        {
            "scenario": df["scenario"],
            "source": source,
            "round": df["round"],
            "step_ms": (df["step_s"] * 1e3).round(2),
        }
    )
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("round:Q", title="round (synchronisation)"),
            y=alt.Y(
                "step_ms:Q", title="time per step (ms)", scale=alt.Scale(zero=False)
            ),
            color=alt.Color("source:N", title="source"),
            tooltip=[
                "scenario",
                "source",
                "round",
                alt.Tooltip("step_ms:Q", format=".2f"),
            ],
        )
        .properties(width=440, height=130)
        .facet(row=alt.Row("scenario:N", title=None))
        .properties(title=title)
        .resolve_scale(y="independent")
    )


def straggler_compare_chart(
    df: pd.DataFrame,
    title: str = "Mean step time: model, simulation and the real run",
) -> alt.Chart:
    """One dot per scenario and source.

    Args:
        df: columns ``scenario, source, step_s``.
    """
    check_columns(df, ["scenario", "source", "step_s"])
    data = df[["scenario", "source"]].assign(step_ms=(df["step_s"] * 1e3).round(2))
    return (
        alt.Chart(data)
        .mark_point(size=110, opacity=0.9)
        .encode(
            x=alt.X("step_ms:Q", title="mean time per step (ms)"),
            y=alt.Y("scenario:N", title=None, sort=None),
            color=alt.Color("source:N", title="source", legend=_wide_legend()),
            shape=alt.Shape("source:N", title="source", legend=_wide_legend()),
            tooltip=["scenario", "source", alt.Tooltip("step_ms:Q", format=".2f")],
        )
        .properties(title=title, height=alt.Step(34))
    )


__all__ = [
    "straggler_compare_chart",
    "straggler_growth_chart",
    "straggler_rounds_chart",
    "straggler_scaling_chart",
    "straggler_sweep_chart",
]
