"""Widget: message size and world size in, the alpha-beta model's time out."""

import html

import pandas as pd

from clusterlab.core.bench import bench_collective
from clusterlab.core.validate import check_int
from clusterlab.message_passing.chart import world_size_chart


def message_size_explorer(defaults: pd.DataFrame, *, max_world_size: int = 4):
    """Widget: pick a world size and a message size, measure an all-reduce.

    Args:
        defaults: measurements to start from, in ``bench_collective``'s columns.
        max_world_size: the largest world size on the slider, in [2, 8].

    Returns:
        The widget (an ``ipywidgets.VBox``); measured points accumulate in its chart.
    """
    import ipywidgets as w
    from IPython.display import display

    check_int("max_world_size", max_world_size, 2, 8)
    state = {"df": defaults.copy()}
    ranks = w.IntSlider(value=2, min=2, max=max_world_size, description="world size")
    log2 = w.IntSlider(value=16, min=2, max=24, description="log2 bytes")
    run = w.Button(description="Measure all-reduce", button_style="primary")
    status = w.HTML()
    out = w.Output()

    def redraw():
        out.clear_output(wait=True)
        with out:
            display(world_size_chart(state["df"]))

    def measure(_):
        run.disabled = True
        status.value = f"measuring {2**log2.value:,} bytes on {ranks.value} ranks..."
        try:
            row = bench_collective("all_reduce", [2**log2.value], ranks.value)
            state["df"] = pd.concat([state["df"], row], ignore_index=True)
            t = row["time_s"].iloc[0]
            status.value = (
                f"{row['size_bytes'].iloc[0]:,} bytes on {ranks.value} "
                f"ranks: {t * 1e6:,.0f} µs per all-reduce"
            )
            redraw()
        except Exception as exc:  # show the error in the widget, keep it usable
            status.value = f"<b>failed:</b> {html.escape(str(exc).splitlines()[0])}"
        finally:
            run.disabled = False

    def announce(_=None):  # a moved slider says what the button will measure
        status.value = (
            f"press the button to measure {2**log2.value:,} bytes on "
            f"{ranks.value} ranks"
        )

    ranks.observe(announce, names="value")
    log2.observe(announce, names="value")
    run.on_click(measure)
    announce()
    redraw()
    return w.VBox([w.HBox([ranks, log2, run]), status, out])
