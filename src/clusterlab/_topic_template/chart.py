"""The example's chart: the running total over workers."""

from __future__ import annotations

import altair as alt

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.controls import Range

# One spec per explorer control: the live widget builds its slider from it
# (WORKERS.widget()), and a static twin its Vega slider (WORKERS.param()).
WORKERS = Range("workers", min=1, max=32, step=1, default=4, label="workers ")


def total_chart(df) -> alt.Chart:
    """A DataFrame of ``cl.<topic>.sim.simulate`` in, its running total out."""
    check_columns(df, ["worker", "total"])
    return (
        alt.Chart(df, title="The running total over workers")
        .mark_line(point=True)
        .encode(
            x=alt.X("worker:O", title="worker"),
            y=alt.Y("total:Q", title="running total"),
        )
        .properties(description="The running total grows with every worker's value.")
    )
