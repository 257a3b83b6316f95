"""Widget: owning against renting, with every input on a slider."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from clusterlab.economics.chart import (
    CAPEX_PER_GPU,
    CLOUD_PRICE,
    LIFETIME_YEARS,
    PRICE_PER_KWH,
    useful_hour_curve,
)
from clusterlab.models.breakeven import useful_hour_table
from clusterlab.models.economics import (
    breakeven_utilization,
    cloud_price,
    useful_hour_cost,
)


def economics_explorer(start_price: float | None = None):
    """Sliders for the cloud price, utilisation and the owned GPU's inputs.

    Args:
        start_price: the cloud price the slider starts at, dollars per GPU-hour;
            default: the reference on-demand row of ``data/prices.csv``.

    Returns:
        An ``ipywidgets.VBox``: the sliders, the figures they give (break-even
        utilisation, owned and rented cost per useful hour) and the chart.
    """
    import ipywidgets as w
    from IPython.display import display

    start = cloud_price() if start_price is None else float(start_price)
    style = {"description_width": "150px"}
    sliders = {
        "cloud_price": CLOUD_PRICE.widget(value=CLOUD_PRICE.clamp(start)),
        "utilization": w.FloatSlider(
            value=0.6, min=0.05, max=1, step=0.05, description="utilisation"
        ),
        "capex_per_gpu": CAPEX_PER_GPU.widget(),
        "lifetime_years": LIFETIME_YEARS.widget(),
        "price_per_kwh": PRICE_PER_KWH.widget(),
    }
    for s in sliders.values():
        s.style = style
    figures = w.HTML()
    out = w.Output()

    def update(_=None):
        v = {k: s.value for k, s in sliders.items()}
        price, u = v.pop("cloud_price"), v.pop("utilization")
        u_star = breakeven_utilization(price, **v)
        owned = useful_hour_cost(u, **v)
        verdict = "owning is cheaper" if owned < price else "renting is cheaper"
        even = f"{u_star:.0%}" if u_star <= 1 else "never (above 100%)"
        figures.value = html.escape(
            f"break-even utilisation: {even}; at {u:.0%} an owned useful hour "
            f"costs ${owned:.2f} against ${price:.2f} rented: {verdict}"
        )
        curve = useful_hour_table(price, np.linspace(0.05, 1.0, 96), **v)
        here = pd.DataFrame({"u": [u], "owned": [owned]})
        out.clear_output(wait=True)
        with out:
            display(useful_hour_curve(curve, here))

    for s in sliders.values():
        s.observe(update, names="value")
    update()
    return w.VBox([*sliders.values(), figures, out])


__all__ = ["economics_explorer"]
