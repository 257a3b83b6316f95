"""Widget: drift, sync interval and protocol in, the skew chart out."""

from __future__ import annotations

import dataclasses

import pandas as pd

from clusterlab.clocks.chart import LOG2_INTERVAL, LOG10_DRIFT, PROTOCOL, skew_chart
from clusterlab.clocks.sim import ClockParams, simulate, skew


def clock_skew_explorer(base: ClockParams | None = None, *, seed: int = 0):
    """Sliders for the largest drift and the sync interval, buttons for the protocol.

    Every change reruns ``cl.clocks.sim.simulate`` with the free-running clocks
    beside the chosen protocol, and redraws the skew chart: the drift moves
    both lines, the interval the protocol's (the text says so when the protocol
    is "none"), the buttons pick the protocol.

    Args:
        base: the other parameters (default ``ClockParams()``, one hour).
        seed: the simulation's seed.

    Returns:
        The widget (an ``ipywidgets.VBox``).
    """
    import ipywidgets as w
    from IPython.display import display

    base = base or ClockParams()
    if not isinstance(base, ClockParams):
        raise ValueError(f"base={base!r} must be a ClockParams")
    style = {"description_width": "initial"}
    drift = LOG10_DRIFT.widget(
        value=LOG10_DRIFT.clamp(base.max_drift_ppm or 10.0), style=style
    )
    interval = LOG2_INTERVAL.widget(
        value=LOG2_INTERVAL.clamp(base.sync_interval_s), style=style
    )
    default = base.protocol if base.protocol != "none" else "ntp"
    protocol = PROTOCOL.widget(value=default, style=style)
    status = w.HTML()
    out = w.Output()

    def update(_=None):
        frames = []
        for proto in dict.fromkeys(["none", protocol.value]):
            p = dataclasses.replace(
                base,
                max_drift_ppm=drift.value,
                sync_interval_s=interval.value,
                protocol=proto,
            )
            frames.append(skew(simulate(p, seed)))
        s = pd.concat(frames, ignore_index=True)
        settled = s[(s["protocol"] == protocol.value) & (s["time_s"] >= 600)]
        worst = settled["skew_s"].max() if len(settled) else float("nan")
        status.value = (
            f"{protocol.value}: largest skew after the first 10 minutes "
            f"<b>{worst * 1e6:,.1f} µs</b>"
        )
        if protocol.value == "none":  # say why one slider has nothing to move
            status.value += "; with no protocol the sync interval changes nothing"
        out.clear_output(wait=True)
        with out:
            display(skew_chart(s))

    for control in (drift, interval, protocol):
        control.observe(update, names="value")
    update()
    return w.VBox([w.HBox([drift, interval]), protocol, status, out])


__all__ = ["clock_skew_explorer"]
