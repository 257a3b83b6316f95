"""The two pictures every diagram is made of: boxes with links, and lanes.

A *box diagram* is two DataFrames. ``nodes`` has one row per box: ``id``, its
top-left corner ``x, y`` and size ``w, h`` (in the diagram's own units, y
pointing down), ``label`` and ``kind`` (which picks its colour). ``links`` has
one row per arrow: ``src, dst`` (node ids), ``label`` and ``kind``. A *lane
diagram* is one DataFrame of bars: ``lane, start, end, kind, label``.

Either may be *steppable*: rows with ``t0`` and ``t1`` are shown only while
``t0 <= step < t1``, and ``step`` is a Vega-Lite parameter bound to a range
input, so the slider works in a static page, with no kernel.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.theme import PALETTE, blend, ink

NODE_COLUMNS = ("id", "x", "y", "w", "h", "label", "kind")


LINK_COLUMNS = ("src", "dst", "label", "kind")


#: Links without an ``arrow`` column get an arrowhead; ``arrow=False`` rows do not.
LANE_COLUMNS = ("lane", "start", "end", "kind", "label")


#: Shown at every step.
ALWAYS = 10**6


STEP = "step"


def rate_label(bytes_per_s: float) -> str:
    """A rate as a diagram prints it: ``4.5e11`` -> ``"450 GB/s"``."""
    value = float(bytes_per_s)
    for scale, unit in ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} B/s"


def size_label(n_bytes: float) -> str:
    """A size as a diagram prints it: ``8e10`` -> ``"80 GB"``."""
    value = float(n_bytes)
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} B"


def frame(rows, columns) -> pd.DataFrame:
    """Rows (dicts) as a DataFrame with ``t0 = 0``, ``t1 = ALWAYS`` if absent."""
    df = pd.DataFrame(list(rows))
    for col in columns:
        if col not in df.columns:
            df[col] = ""
    if "t0" not in df.columns:
        df["t0"] = 0
    if "t1" not in df.columns:
        df["t1"] = ALWAYS
    df["t0"] = df["t0"].fillna(0).astype(int)
    df["t1"] = df["t1"].fillna(ALWAYS).astype(int)
    return df


def step_param(n_steps: int, name: str = "step") -> alt.Parameter:
    """A slider over ``0 .. n_steps - 1`` that runs in the browser."""
    return alt.param(
        name=STEP,
        value=0,
        bind=alt.binding_range(min=0, max=n_steps - 1, step=1, name=f"{name} "),
    )


#: One colour per kind of thing, the same in every diagram.
KIND_COLOURS = {
    "GPU": PALETTE[1],
    "CPU": PALETTE[0],
    "NVSwitch": PALETTE[2],
    "PCIe switch": PALETTE[3],
    "NIC": PALETTE[4],
    "fabric": PALETTE[5],
    "own": PALETTE[5],
    "partial sum": PALETTE[1],
    "whole sum": PALETTE[2],
    "label": "#dddddd",
    "process": "#bbbbbb",
    "lane": "#bbbbbb",
    "crash": PALETTE[3],
    "lost": PALETTE[3],
    "false suspicion": PALETTE[4],
    "suspected": PALETTE[3],
    "work": PALETTE[0],
    "checkpoint": PALETTE[1],
    "lost work": PALETTE[3],
    "restart": PALETTE[7],
    "compute": PALETTE[0],
    "waiting": "#cccccc",
    "skipped (causal)": "#cccccc",
    "node": "#d9e8f5",
}


def _colour(kinds) -> alt.Scale:
    kinds = list(dict.fromkeys(kinds))
    colours, k = [], 0
    for kind in kinds:
        if kind in KIND_COLOURS:
            colours.append(KIND_COLOURS[kind])
        else:
            colours.append(PALETTE[k % 6])
            k += 1
    return alt.Scale(domain=kinds, range=colours)


def _ink(kinds, opacity: float = 1.0) -> alt.Scale:
    """The ink of text on each kind's colour: 4.5:1 or more (``theme.ink``)."""
    scale = _colour(kinds)
    inks = [ink(blend(c, opacity)) for c in scale.range]
    return alt.Scale(domain=scale.domain, range=inks)


#: Boxes are drawn at this opacity; their labels' ink is chosen for it.
BOX_OPACITY = 0.85


def _visible(chart, steppable: bool):
    if steppable:
        return chart.transform_filter(f"datum.t0 <= {STEP} && {STEP} < datum.t1")
    return chart


def link_geometry(nodes: pd.DataFrame, links: pd.DataFrame) -> pd.DataFrame:
    """``links`` with the end points of each arrow and its head's angle.

    An arrow runs from the edge of ``src`` to the edge of ``dst``; its angle
    is in degrees clockwise from up, as Vega's ``triangle`` shape expects.
    """
    centre = {
        r.id: (r.x + r.w / 2, r.y + r.h / 2, r.w / 2, r.h / 2)
        for r in nodes.drop_duplicates("id").itertuples()
    }
    unknown = sorted((set(links["src"]) | set(links["dst"])) - set(centre))
    if unknown:
        raise ValueError(f"links names node(s) {unknown} that nodes lacks")
    out = links.copy()
    geo = []
    straight = (
        links["straight"] if "straight" in links.columns else [False] * len(links)
    )
    for r, line in zip(links.itertuples(), straight, strict=True):
        geo.append(_ends(centre[r.src], centre[r.dst], bool(line)))
    out[["x1", "y1", "x2", "y2", "angle"]] = pd.DataFrame(geo, index=links.index)
    out["mx"] = (out["x1"] + out["x2"]) / 2
    out["my"] = (out["y1"] + out["y2"]) / 2
    return out


def _ends(a, b, straight=False):
    """End points of a link from box ``a`` to box ``b`` (centre, half sizes).

    Unless ``straight``, boxes that overlap in x are joined by a vertical
    line, boxes that overlap in y by a horizontal one, others by a line from
    the middle of the source's top or bottom edge to the target's edge; a
    ``straight`` link runs from centre to edge.
    """
    (ax, ay, aw, ah), (bx, by, bw, bh) = a, b
    lo, hi = max(ax - aw, bx - bw), min(ax + aw, bx + bw)
    if straight:
        lo = hi = 0
    if hi > lo and by != ay:
        x = (lo + hi) / 2
        sign = 1 if by > ay else -1
        return (x, ay + sign * ah, x, by - sign * bh, 180.0 if sign > 0 else 0.0)
    lo, hi = max(ay - ah, by - bh), min(ay + ah, by + bh)
    if hi > lo and bx != ax and not straight:
        y = (lo + hi) / 2
        sign = 1 if bx > ax else -1
        return (ax + sign * aw, y, bx - sign * bw, y, 90.0 if sign > 0 else 270.0)
    # Leave the source through the middle of its edge that faces the target
    # (its top or bottom), not from its centre: a line never crosses the
    # source's label or the boxes beside it in its row.
    if by != ay and not straight:
        ay = ay + (ah if by > ay else -ah)
    vx, vy = bx - ax, by - ay
    t = min(bw / abs(vx) if vx else math.inf, bh / abs(vy) if vy else math.inf)
    t = min(t, 1.0)
    return (ax, ay, bx - vx * t, by - vy * t, math.degrees(math.atan2(vx, -vy)))


def box_diagram(
    nodes: pd.DataFrame,
    links: pd.DataFrame | None = None,
    *,
    title: str,
    subtitle: str | None = None,
    size: tuple[int, int] = (620, 300),
    n_steps: int | None = None,
    step_name: str = "step",
    font_size: int = 11,
    legend: bool = False,
) -> alt.LayerChart:
    """Boxes, arrows and their labels as one Altair chart.

    Args:
        nodes, links: see the module docstring (``links`` may be None).
        title, subtitle: the chart's title.
        size: width and height in pixels.
        n_steps: steps of the slider, or None for a still picture.
        step_name: the slider's label.
        font_size: label size in pixels.
        legend: whether to show what the box colours mean.

    Returns:
        A layered chart: boxes, links, link labels, box labels.
    """
    check_columns(nodes, NODE_COLUMNS, "nodes")
    nodes = frame(nodes.to_dict("records"), NODE_COLUMNS)
    if links is None or len(links) == 0:
        links = frame([], LINK_COLUMNS).iloc[0:0]
    check_columns(links, LINK_COLUMNS, "links")
    links = frame(links.to_dict("records"), LINK_COLUMNS)
    width, height = size
    x_max = float((nodes["x"] + nodes["w"]).max()) * 1.06
    y_max = float((nodes["y"] + nodes["h"]).max()) * 1.02
    xs = alt.Scale(domain=[0, x_max], nice=False, zero=True)
    ys = alt.Scale(domain=[0, y_max], nice=False, zero=True, reverse=True)
    steppable = n_steps is not None
    nd = nodes.assign(x2=nodes["x"] + nodes["w"], y2=nodes["y"] + nodes["h"])
    nd["cx"] = nd["x"] + nd["w"] / 2
    nd["cy"] = nd["y"] + nd["h"] / 2
    # Vega draws a label's first line at its y and the next ones below it:
    # lift a label of n lines by (n - 1) / 2 lines, so it sits in its box.
    line_px = round(1.2 * font_size, 1)
    lines = nd["label"].astype(str).str.count("\n")
    nd["ty"] = nd["cy"] - lines / 2 * line_px * y_max / height
    colour = alt.Color(
        "kind:N",
        scale=_colour(nodes["kind"]),
        legend=alt.Legend(title=None, orient="bottom") if legend else None,
    )
    base = alt.Chart(nd)
    boxes = _visible(
        base.mark_rect(
            cornerRadius=4, stroke="#333", strokeWidth=0.8, opacity=BOX_OPACITY
        ).encode(
            x=alt.X("x:Q", scale=xs, axis=None),
            x2="x2:Q",
            y=alt.Y("y:Q", scale=ys, axis=None),
            y2="y2:Q",
            color=colour,
            tooltip=["label:N"],
        ),
        steppable,
    )
    text = _visible(
        base.mark_text(fontSize=font_size, lineBreak="\n", lineHeight=line_px).encode(
            x=alt.X("cx:Q", scale=xs, axis=None),
            y=alt.Y("ty:Q", scale=ys, axis=None),
            text="label:N",
            color=alt.Color(
                "kind:N", scale=_ink(nodes["kind"], BOX_OPACITY), legend=None
            ),
        ),
        steppable,
    )
    layers = [boxes, text]
    if len(links):
        geo = link_geometry(nodes, links)
        if "arrow" not in geo.columns:
            geo["arrow"] = True
        geo["arrow"] = geo["arrow"].fillna(True).astype(bool)
        lk = alt.Chart(geo)
        pos = dict(
            x=alt.X("x1:Q", scale=xs, axis=None), y=alt.Y("y1:Q", scale=ys, axis=None)
        )
        # The arrows are drawing, not data (a box's label and the link's label
        # say what they join), and may be empty at a step: hidden from
        # assistive technology, where an unnamed mark is noise.
        rules = lk.mark_rule(strokeWidth=1.6, aria=False).encode(
            **pos, x2="x2:Q", y2="y2:Q", color=alt.value("#555")
        )
        heads = lk.transform_filter("datum.arrow").mark_point(
            shape="triangle", size=70, filled=True, opacity=1, aria=False
        )
        heads = heads.encode(
            x=alt.X("x2:Q", scale=xs, axis=None),
            y=alt.Y("y2:Q", scale=ys, axis=None),
            angle=alt.Angle("angle:Q", scale=None),
            color=alt.value("#555"),
        )
        ltext = lk.mark_text(
            fontSize=font_size - 1, dx=4, align="left", color="#7a3b00"
        ).encode(
            x=alt.X("mx:Q", scale=xs, axis=None),
            y=alt.Y("my:Q", scale=ys, axis=None),
            text="label:N",
        )
        layers = [_visible(c, steppable) for c in (rules, heads)] + layers
        layers.append(_visible(ltext, steppable))
    # The labels' ink is a colour scale of its own on the same field: shared
    # (Vega-Lite's default in a layer), the boxes' fills would paint the text
    # and every label would vanish into its box.
    chart = (
        alt.layer(*layers)
        .resolve_scale(color="independent")
        .properties(
            width=width,
            height=height,
            title=alt.Title(title, subtitle=subtitle) if subtitle else title,
        )
    )
    if steppable:
        chart = chart.add_params(step_param(n_steps, step_name))
    return chart


def lane_diagram(
    bars: pd.DataFrame,
    *,
    title: str,
    x_title: str,
    subtitle: str | None = None,
    lane_title: str | None = None,
    kinds: list[str] | None = None,
    size: tuple[int, int] = (620, 220),
    n_steps: int | None = None,
    step_name: str = "step",
) -> alt.LayerChart:
    """Bars on lanes against time (a Gantt chart), with labels inside the bars.

    Args:
        bars: see the module docstring; ``lane`` keeps its order of appearance.
        title, subtitle: the chart's title.
        x_title: the time axis's title, with its unit.
        lane_title: the lane axis's title, or None for none.
        kinds: the order of the colours' legend (default: order of appearance).
        size: width and height in pixels.
        n_steps: steps of the slider, or None for a still picture.
        step_name: the slider's label.

    Returns:
        A layered chart: bars and their labels.
    """
    check_columns(bars, LANE_COLUMNS, "bars")
    bars = frame(bars.to_dict("records"), LANE_COLUMNS)
    bars["mid"] = (bars["start"] + bars["end"]) / 2
    lanes = list(dict.fromkeys(bars["lane"]))
    kinds = kinds or list(dict.fromkeys(bars["kind"]))
    steppable = n_steps is not None
    y = alt.Y("lane:N", sort=lanes, title=lane_title)
    base = alt.Chart(bars)
    rect = base.mark_bar(stroke="white", strokeWidth=0.8, cornerRadius=2).encode(
        x=alt.X("start:Q", title=x_title),
        x2="end:Q",
        y=y,
        color=alt.Color(
            "kind:N", scale=_colour(kinds), legend=alt.Legend(title=None, orient="top")
        ),
        tooltip=["lane:N", "kind:N", "label:N", "start:Q", "end:Q"],
    )
    text = base.mark_text(fontSize=10).encode(
        x="mid:Q",
        y=y,
        text="label:N",
        color=alt.Color("kind:N", scale=_ink(kinds), legend=None),
    )
    chart = alt.layer(_visible(rect, steppable), _visible(text, steppable))
    chart = chart.properties(
        width=size[0],
        height=size[1],
        title=alt.Title(title, subtitle=subtitle) if subtitle else title,
    )
    if steppable:
        chart = chart.add_params(step_param(n_steps, step_name))
    return chart
