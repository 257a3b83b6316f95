"""The labs' live widgets in a real JupyterLab, in headless Chromium, offline.

A JupyterLab server runs on 127.0.0.1 (a free port, a random token) over copies
of a few labs; the repository's notebooks are not touched. For each lab the
browser runs all cells, then checks that no output holds an error, that every
widget rendered and every chart drew (with every request that is not for the
server aborted and recorded), that the Tab key alone reaches every control of
each widget, and moves each control of each widget (sliders,
dropdowns, toggle and radio buttons, checkboxes, buttons: found by kind, not by
name) until the chart or text it drives changes. The saved notebook's chart
outputs must each stay under 50 KB. One widget's update time, from the key
press to the redrawn chart, is measured 20 times. The server, its kernels and
every rank they started are stopped at the end, and the test fails if any
process is left.

``CLUSTERLAB_JUPYTERLAB_LABS="02_clocks 15_planner"`` (or ``all``) picks the labs.
Needs Debian's ``chromium`` (or ``CHROMIUM_PATH``): without a browser the test
skips and says how to install one, except under CI, where it fails.
"""

from __future__ import annotations

import json
import os
import statistics

import psutil
import pytest

from book_helpers import ROOT, chromium_path, measure_outputs
from jupyterlab_helpers import BROWSER_ARGS, INSTALL_HINT, JupyterLab, Notebook

pytestmark = pytest.mark.site

#: Two short labs whose widgets hold every kind of slider (float, integer,
#: logarithmic, selection), dropdowns and a checkbox; the other kinds the labs
#: use (toggle buttons, a button, a number box) are moved in a kernel by
#: tests/test_widget_controls.py.
DEFAULT_LABS = ("05_ring_allreduce", "16_stragglers", "24_decide")
TIMED_LAB = "16_stragglers"
TIMED_UPDATES = 20
CHART_LIMIT_BYTES = 50_000
RUN_TIMEOUT_S = 300


def _labs() -> list[str]:
    chosen = os.environ.get("CLUSTERLAB_JUPYTERLAB_LABS", "").split()
    if chosen == ["all"]:
        return sorted(p.stem for p in (ROOT / "labs").glob("[0-9]*.ipynb"))
    return chosen or list(DEFAULT_LABS)


LABS = _labs()


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"no browser under CI: {INSTALL_HINT}")
        pytest.skip(INSTALL_HINT)
    from playwright.sync_api import sync_playwright

    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=BROWSER_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in children_before and p.is_running()
    ]
    for p in left:
        p.kill()
    assert not left, f"browser processes left running: {[p.pid for p in left]}"


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    lab = JupyterLab(LABS, tmp_path_factory.mktemp("jupyterlab"))
    try:
        lab.start()
        yield lab
    finally:
        killed = lab.stop()
        assert not killed, f"processes that did not stop and were killed: {killed}"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """Figures the tests measure, written to jupyterlab_report.json at the end."""
    figures = {}
    yield figures
    path = tmp_path_factory.getbasetemp() / "jupyterlab_report.json"
    path.write_text(json.dumps(figures, indent=1))
    print(f"\nJupyterLab figures in {path}:\n{json.dumps(figures, indent=1)}")


class Visit:
    """A fresh browser context that lets only the server's own requests through."""

    def __init__(self, browser, base: str):
        self.context = browser.new_context(viewport={"width": 1280, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(60_000)
        self.blocked, self.errors = [], []

        def route(r):
            url = r.request.url
            if url.startswith(base) or url.startswith(("data:", "blob:")):
                r.continue_()
            else:
                self.blocked.append(url)
                r.abort()

        self.context.route("**/*", route)
        self.page.on(
            "console", lambda m: m.type == "error" and self.errors.append(m.text)
        )
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))


@pytest.fixture(scope="module")
def visit(browser, jupyterlab):
    """One JupyterLab page for all the labs (it loads once, in about 20 s)."""
    v = Visit(browser, jupyterlab.base)
    yield v
    v.context.close()


def _move_and_watch(nb: Notebook, view, control, far: bool = False) -> bool:
    """Move ``control``; whether what its widget shows changed once it settled."""
    before = nb.signature(view)
    if not nb.move(view, control, far=far):
        return False
    nb.wait_idle(RUN_TIMEOUT_S)
    nb.wait_drawn(view)
    return nb.signature(view) != before


def _exercise(nb: Notebook, view) -> list[str]:
    """Move every control of ``view``; the ones that never changed anything.

    A control may act only once another has moved (a slow-down factor with no
    slow worker yet), so the controls that changed nothing on the first pass
    are moved again, further, after all the others.
    """
    controls = nb.controls(view)
    assert controls, f"{nb.name}: a widget with no control"
    first = [c for c in controls if not _move_and_watch(nb, view, c)]
    return [str(c) for c in first if not _move_and_watch(nb, view, c, far=True)]


def _time_updates(nb: Notebook, view) -> dict:
    """Seconds from key press to redrawn chart, for the first slider that redraws."""
    sliders = [c for c in nb.controls(view) if c.kind == "slider"]
    for slider in sliders:
        try:
            nb.time_update(view, slider, timeout_s=15)
        except Exception:  # this slider changes text only: try the next one
            continue
        times = [nb.time_update(view, slider) for _ in range(TIMED_UPDATES)]
        return {
            "control": str(slider),
            "updates": len(times),
            "median_s": round(statistics.median(times), 3),
            "worst_s": round(max(times), 3),
        }
    raise AssertionError(f"{nb.name}: no slider of the widget redraws its chart")


@pytest.mark.parametrize("name", LABS)
def test_the_lab_runs_and_every_widget_control_redraws(visit, jupyterlab, report, name):
    errors_before, blocked_before = len(visit.errors), len(visit.blocked)
    nb = Notebook(visit.page, jupyterlab, name)
    try:
        nb.open()
        figures = _run_and_exercise(nb)
        saved = nb.save()
    finally:
        nb.close()
    sizes = measure_outputs().chart_outputs(_as_notebook(saved))
    figures["chart_output_bytes"] = [s["bytes"] for s in sizes]
    report[name] = figures
    too_big = [s for s in sizes if s["bytes"] > CHART_LIMIT_BYTES]
    assert too_big == [], f"{name}: chart outputs over {CHART_LIMIT_BYTES} B"
    blocked = visit.blocked[blocked_before:]
    assert blocked == [], f"{name}: requests that left the machine: {blocked}"
    errors = visit.errors[errors_before:]
    assert errors == [], f"{name}: console errors: {errors}"


def _run_and_exercise(nb: Notebook) -> dict:
    """Run All, check what it shows, move every control; the figures measured."""
    run_s = nb.run_all(RUN_TIMEOUT_S)
    assert nb.problems() == [], f"{nb.name}: {nb.problems()}"
    nb.wait_drawn()
    views = nb.widget_views()
    assert views, f"{nb.name}: no widget"
    assert len(views) == nb.views_wanted(), f"{nb.name}: a widget did not render"
    assert nb.chart_count() >= 1, f"{nb.name}: no chart drawn"
    figures = {"run_all_s": round(run_s, 1), "widgets": len(views)}
    for i, view in enumerate(views):
        unreached = _unreached_by_tab(nb, view)
        assert unreached == [], f"{nb.name}, widget {i}: Tab never reaches {unreached}"
        stuck = _exercise(nb, view)
        assert stuck == [], f"{nb.name}, widget {i}: these controls changed nothing"
        figures[f"widget {i} controls"] = [str(c) for c in nb.controls(view)]
    if nb.name == TIMED_LAB:
        figures["update"] = _time_updates(nb, views[0])
    assert nb.problems() == [], f"{nb.name} after the controls: {nb.problems()}"
    return figures


def _unreached_by_tab(nb: Notebook, view) -> list[str]:
    """The controls of ``view`` that the Tab key never focuses.

    The keyboard starts on the view's first focusable element and presses Tab
    (three times per control, and a few more) without the mouse; each
    control must hold the focus at some press (WCAG 2.1.1, Keyboard).
    """
    controls = nb.controls(view)
    elements = [view.query_selector_all(c.selector)[c.index] for c in controls]
    first = "input, select, button, textarea, [tabindex]:not([tabindex='-1'])"
    assert view.evaluate(
        "(v, sel) => { const e = v.querySelector(sel); if (e) e.focus(); return !!e; }",
        first,
    ), f"{nb.name}: nothing in the widget can take the focus"
    reached = set()
    for _ in range(3 * len(controls) + 5):
        for i, el in enumerate(elements):
            if el.evaluate("e => e.contains(document.activeElement)"):
                reached.add(i)
        nb.page.keyboard.press("Tab")
    disabled = (
        "e => !!(e.disabled || e.closest('.mod-disabled')"
        " || e.querySelector('[disabled]'))"
    )
    return [
        str(c)
        for i, (c, el) in enumerate(zip(controls, elements, strict=True))
        if i not in reached and not el.evaluate(disabled)
    ]


def _as_notebook(saved: dict):
    import nbformat

    return nbformat.from_dict(saved)


def test_stopping_jupyterlab_stops_every_kernel_and_rank(jupyterlab):
    """Runs last: the server and whatever it started must all end."""
    started = jupyterlab.processes()
    killed = jupyterlab.stop()
    assert killed == [], f"left running after the server stopped: {killed}"
    left = [p.pid for p in started if p.is_running() and p.status() != "zombie"]
    assert left == [], f"processes still running: {left}"


def test_the_tab_check_catches_a_control_the_keyboard_cannot_reach(browser):
    """The keyboard probe itself, on a page with two checkboxes: both reached,
    then one taken out of the tab order (``tabindex=-1``) and reported."""
    from types import SimpleNamespace

    from jupyterlab_helpers import Control

    context = browser.new_context()
    try:
        page = context.new_page()
        box = '<div class="widget-checkbox"><input type="checkbox"{}></div>'
        for extra, expected in (("", []), (' tabindex="-1"', ["checkbox 'b'"])):
            page.set_content(f'<div id="v">{box.format("")}{box.format(extra)}</div>')
            sel = ".widget-checkbox input[type=checkbox]"
            controls = [
                Control("checkbox", sel, 0, "a"),
                Control("checkbox", sel, 1, "b"),
            ]
            nb = SimpleNamespace(
                name="fake", page=page, controls=lambda v, c=controls: c
            )
            assert _unreached_by_tab(nb, page.query_selector("#v")) == expected
    finally:
        context.close()
