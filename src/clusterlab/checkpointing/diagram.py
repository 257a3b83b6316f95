"""Checkpointing as a picture: checkpoints, failures, lost work.

The run it draws comes from the caller (``cl.checkpointing.sim.checkpoint_bars``).
"""

import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.diagram import lane_diagram


def checkpoint_timeline_diagram(bars: pd.DataFrame):
    """Work, checkpoints, failures and lost work at the Young/Daly interval.

    Args:
        bars: a run as bars, from ``cl.checkpointing.sim.checkpoint_bars``; its
            ``attrs`` carry the checkpoint cost, job MTBF and interval it ran at.
    """
    check_columns(bars, ["lane", "start", "end", "kind", "label"], "bars")
    checkpoint_cost_s = bars.attrs["checkpoint_cost_s"]
    mtbf_s, tau_s = bars.attrs["mtbf_s"], bars.attrs["interval_s"]
    lost = bars[bars["kind"] == "lost work"]
    return lane_diagram(
        bars,
        title="Checkpoints at the Young/Daly interval, and what failures cost",
        subtitle=(
            f"job MTBF {mtbf_s / 3600:.1f} h, checkpoint {checkpoint_cost_s / 60:.0f} "
            f"min, interval sqrt(2 C M) = {tau_s / 3600:.2f} h; {len(lost)} failures "
            f"lose {(lost['end'] - lost['start']).sum():.1f} h of work"
        ),
        x_title="wall-clock time (h)",
        kinds=["work", "checkpoint", "lost work", "restart"],
        size=(600, 50),
    )


__all__ = ["checkpoint_timeline_diagram"]
