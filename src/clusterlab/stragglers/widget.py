"""Widget: pick N, the noise, slow workers and a mitigation; see the step.

Only wiring: the controls call ``cl.models.stragglers`` and
``cl.stragglers.sim`` and hand the results to ``cl.stragglers.chart``.
"""

from __future__ import annotations

import html

import pandas as pd

from clusterlab.core.validate import check_int
from clusterlab.models.stragglers import expected_step_time
from clusterlab.stragglers.chart import (
    JITTER,
    JITTER_CV,
    SLOW_FACTOR,
    straggler_scaling_chart,
)
from clusterlab.stragglers.sim import StragglerParams, mean_step_time, simulate

N_VALUES = tuple(2**k for k in range(11))


MITIGATIONS = ("none", "backup workers", "local SGD")


def straggler_curves(
    settings: dict, n_values=N_VALUES, n_steps: int = 200, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Model lines and simulated points for the widget's settings.

    Args:
        settings: ``jitter, cv, slow_workers, slow_factor, mitigation, amount``
            (backup workers, or steps between all-reduces for local SGD).
        n_values: the numbers of workers on the x axis.
        n_steps: simulated steps per point.
        seed: seed of the simulation.

    Returns:
        ``(model, sim)``: DataFrames with columns ``n_workers, series, step_ratio``.
    """
    model_rows, sim_rows = [], []
    for label, mitigation in (("no mitigation", "none"), ("with mitigation", None)):
        mitigation = mitigation or settings["mitigation"]
        if label == "with mitigation" and mitigation == "none":
            break
        name = label if mitigation == "none" else f"{mitigation} ({settings['amount']})"
        for n in n_values:
            extra = {}
            if mitigation == "backup workers":
                extra["backup_workers"] = min(settings["amount"], n - 1)
            elif mitigation == "local SGD":
                extra["sync_period"] = settings["amount"]
            params = StragglerParams(
                n_workers=n,
                n_steps=n_steps,
                base_s=1.0,
                jitter=settings["jitter"],
                cv=settings["cv"],
                slow_workers=min(settings["slow_workers"], n),
                slow_factor=settings["slow_factor"],
                **extra,
            )
            kw = params.model_kwargs()
            model_rows.append((n, name, expected_step_time(**kw)))
            sim = simulate(params, seed=seed, engine="numpy")
            sim_rows.append((n, name, mean_step_time(sim)))
    cols = ["n_workers", "series", "step_ratio"]
    return pd.DataFrame(model_rows, columns=cols), pd.DataFrame(sim_rows, columns=cols)


def idle_controls(settings: dict) -> dict[str, str]:
    """Controls that cannot change the result at these settings, and why.

    Args:
        settings: as for ``straggler_curves``.

    Returns:
        ``{control description: reason}``; the widget disables those controls
        and prints the reasons, so that no control moves without an effect.
    """
    idle = {}
    if settings["slow_workers"] == 0:
        idle["× slower"] = "no worker is slow (slow workers is 0)"
    if settings["jitter"] == "none":
        idle["cv"] = "there is no noise to scale (noise is none)"
    if settings["mitigation"] == "none":
        idle["backups or H"] = "no mitigation is chosen"
    elif settings["mitigation"] == "local SGD" and settings["jitter"] == "none":
        idle["backups or H"] = (
            "without noise, and with the all-reduce not counted, local SGD's H "
            "changes no step"
        )
    return idle


def _display_unvalidated(chart) -> None:
    """Display ``chart`` with the active renderer, skipping schema validation.

    Altair checks a spec against the Vega-Lite schema on every display, which
    costs more than the model and simulation together; the chart builders are
    validated once by the tests, so the widget does not pay for it each time.
    """
    import altair as alt
    from IPython import get_ipython
    from IPython.display import display

    if get_ipython() is None:  # no front end to draw on (a script, a test)
        return
    spec = chart.to_dict(validate=False, context={"pre_transform": False})
    bundle = alt.renderers.get()(spec)
    if isinstance(bundle, tuple):
        bundle = bundle[0]
    display(bundle, raw=True)


def straggler_explorer(n_steps: int = 200, seed: int = 0):
    """The live widget: controls on the left, the chart and a one-line verdict below.

    Args:
        n_steps: simulated steps per point, in [10, 5000].
        seed: seed of the simulation, >= 0.

    Returns:
        An ``ipywidgets.VBox``.
    """
    import ipywidgets as w

    check_int("n_steps", n_steps, 10, 5000)
    check_int("seed", seed, 0)
    style = {"description_width": "initial"}
    n = w.SelectionSlider(options=list(N_VALUES), value=1024, description="N")
    jitter = JITTER.widget()
    cv = JITTER_CV.widget()
    slow = w.IntSlider(value=1, min=0, max=8, description="slow workers", style=style)
    factor = SLOW_FACTOR.widget(readout_format=".3f")
    mitigation = w.Dropdown(
        options=list(MITIGATIONS), value="local SGD", description="mitigation"
    )
    amount = w.IntSlider(
        value=4, min=1, max=64, description="backups or H", style=style
    )
    verdict = w.HTML()
    out = w.Output()

    def update(_=None):
        settings = dict(
            jitter=jitter.value,
            cv=cv.value,
            slow_workers=slow.value,
            slow_factor=factor.value,
            mitigation=mitigation.value,
            amount=amount.value,
        )
        try:
            model, sim = straggler_curves(settings, n_steps=n_steps, seed=seed)
        except ValueError as exc:  # say what is wrong, keep the widget usable
            verdict.value = f"<b>not allowed:</b> {html.escape(str(exc))}"
            return
        at_n = model[model["n_workers"] == n.value]
        parts = [
            f"{row.series}: step {row.step_ratio:.4f} × the mean compute time, "
            f"throughput −{1 - 1 / row.step_ratio:.2%}"
            for row in at_n.itertuples()
        ]
        idle = idle_controls(settings)
        for control in controls:
            control.disabled = control.description in idle
        notes = "".join(
            f"<br><i>{html.escape(name)} does nothing now: {html.escape(why)}</i>"
            for name, why in idle.items()
        )
        verdict.value = f"<b>N = {n.value}</b>: " + "; ".join(parts) + notes
        out.clear_output(wait=True)
        with out:
            _display_unvalidated(straggler_scaling_chart(model, sim))

    controls = (n, jitter, cv, slow, factor, mitigation, amount)
    for control in controls:
        control.observe(update, names="value")
    update()
    left = w.VBox([n, jitter, cv, slow])
    right = w.VBox([factor, mitigation, amount])
    return w.VBox([w.HBox([left, right]), verdict, out])


__all__ = ["idle_controls", "straggler_curves", "straggler_explorer"]
