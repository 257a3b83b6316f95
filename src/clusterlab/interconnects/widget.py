"""Widget: a node's network ports, link rates and step time (interconnects)."""

import html

from clusterlab.interconnects.chart import LOG2_TOKENS, NICS, step_time_chart
from clusterlab.models.interconnects import cluster_allreduce_time, interconnect_sweep
from clusterlab.models.links import link
from clusterlab.ring.widget import _output_with


def interconnect_calculator(nodes: int = 16, gpus_per_node: int = 8):
    """Widget: a model and a cluster shape in, step time per network out.

    Args:
        nodes, gpus_per_node: the cluster's starting shape.

    Returns:
        An ``ipywidgets.VBox`` with the controls, a line on H3 and the chart.
    """
    import ipywidgets as w

    params = w.FloatLogSlider(
        value=7e9, base=10, min=8, max=12, step=0.05, description="params"
    )
    n_nodes = w.IntSlider(value=nodes, min=1, max=256, description="nodes")
    nics = NICS.widget()
    tokens = LOG2_TOKENS.widget()
    overlap = w.FloatSlider(
        value=0.0, min=0.0, max=1.0, step=0.05, description="overlap"
    )
    tcp_eff = w.FloatSlider(
        value=link("100GbE TCP").efficiency,
        min=0.1,
        max=1.0,
        step=0.05,
        description="TCP eff.",
    )
    note = w.HTML()

    def draw():
        links = (
            link("100GbE TCP", efficiency=tcp_eff.value),
            "100GbE RoCE",
            "NDR400 InfiniBand",
            "NVLink 4",
        )
        df = interconnect_sweep(
            [params.value],
            [2**tokens.value],
            [nics.value],
            nodes=n_nodes.value,
            gpus_per_node=gpus_per_node,
            overlap=overlap.value,
            links=links,
        )
        grads = 2 * params.value
        eth = cluster_allreduce_time(
            grads, links[0], n_nodes.value, gpus_per_node, nics.value
        )
        ndr = cluster_allreduce_time(
            grads, links[2], n_nodes.value, gpus_per_node, nics.value
        )
        speed = df["step_s"].iloc[0] / df["step_s"].iloc[2]
        note.value = html.escape(
            f"all-reduce {eth:.3f} s on 100GbE TCP, {ndr:.3f} s on NDR400: "
            f"{1 - ndr / eth:.0%} less (H3 says 78%); step {speed:.2f}x faster "
            "(E5 needs 3x)"
        )
        return step_time_chart(df, controls=False)

    out, redraw = _output_with(draw)
    controls = (params, n_nodes, nics, tokens, overlap, tcp_eff)
    for control in controls:
        control.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox(controls[:3]), w.HBox(controls[3:]), note, out])


__all__ = ["interconnect_calculator"]
