"""JupyterLab on loopback, driven by headless Chromium: helpers for the lab tests.

``JupyterLab`` starts a server on 127.0.0.1 (a free port, a random token, its own
settings, in a folder of copies of the labs) and stops it, its kernels and every
process they started. ``Notebook`` opens one lab in a browser page, runs all its
cells and finds, moves and watches the controls of its widgets. Nothing here
leaves the machine: the server is told not to fetch news or updates, and the
tests route every request that is not for the server to an abort.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import psutil

from book_helpers import ROOT

INSTALL_HINT = (
    "the JupyterLab test needs Chromium: on Debian or Ubuntu run "
    "'sudo apt-get install chromium', or set CHROMIUM_PATH to a Chrome/Chromium binary"
)
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Every process the server starts (kernels, their ranks) inherits this variable.
MARKER_ENV = "CLUSTERLAB_JUPYTERLAB_TEST"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: Settings the server's front end starts with: every cell rendered (no
#: windowing), widget state saved with the notebook, no news and no update check.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyter-widgets/jupyterlab-manager/plugin": {"saveState": True},
    "@jupyterlab/apputils-extension/notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """A JupyterLab server on loopback, serving copies of some labs.

    Args:
        labs: lab names (``23_economics``) to copy into the server's folder.
        workdir: an empty folder for the copies, settings and the server's log.
    """

    def __init__(self, labs, workdir: Path):
        self.workdir = Path(workdir)
        self.root = self.workdir / "labs"
        self.root.mkdir(parents=True)
        for lab in labs:
            shutil.copy(ROOT / "labs" / f"{lab}.ipynb", self.root)
        self.token = secrets.token_hex(24)
        self.marker = secrets.token_hex(8)
        self.port = None
        self.proc = None
        self.log_path = self.workdir / "jupyterlab.log"
        self._seen: dict[int, psutil.Process] = {}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def url(self, lab: str) -> str:
        return f"{self.base}lab/tree/{lab}.ipynb?token={self.token}"

    def _env(self) -> dict:
        home = self.workdir / "home"
        settings = home / "lab-settings"
        for plugin, values in LAB_SETTINGS.items():
            path = settings / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        bin_dir = str(Path(sys.executable).parent)
        return dict(
            os.environ,
            PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_DATA_DIR=str(home / "data"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
            IPYTHONDIR=str(home / "ipython"),
            CLUSTERLAB_SMOKE=os.environ.get("CLUSTERLAB_SMOKE", "1"),
            PYTHONUNBUFFERED="1",
            **{MARKER_ENV: self.marker},
        )

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the server and wait until its API answers (retrying a taken port)."""
        for _attempt in range(3):
            self.port = free_port()
            cmd = [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={self.port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ]
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                cmd.append("--allow-root")
            log = self.log_path.open("ab")
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.root,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            if self._wait_ready(timeout_s):
                return
            self.stop()
        raise RuntimeError(f"JupyterLab did not start:\n{self.log_tail()}")

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                self.api("GET", "api/status", timeout_s=5)
                return True
            except OSError:
                time.sleep(0.5)
        return False

    def api(self, method: str, path: str, timeout_s: float = 30.0):
        """Call the server's REST API; return the decoded JSON (or None)."""
        req = urllib.request.Request(
            self.base + path,
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n_chars: int = 4000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-n_chars:]

    def processes(self) -> list[psutil.Process]:
        """Every live process carrying this server's marker (kernels, ranks...)."""
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(MARKER_ENV) == self.marker:
                    found.append(proc)
            except (psutil.Error, OSError):
                continue
        for proc in found:
            self._seen.setdefault(proc.pid, proc)
        return found

    def stop(self, grace_s: float = 20.0) -> list[str]:
        """Stop the kernels, the server and anything they started.

        Kernels are shut down through the API, then the server's process
        group gets SIGTERM. Whatever is still running ``grace_s`` later (or
        carries the marker, wherever it was reparented) is killed.

        Returns:
            A description of each process that had to be killed.
        """
        if self.proc is None:
            return []
        self.processes()
        if self.proc.poll() is None:
            try:
                for kernel in self.api("GET", "api/kernels", timeout_s=10) or []:
                    self.api("DELETE", f"api/kernels/{kernel['id']}", timeout_s=30)
            except OSError:
                pass
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 5
        left = self.processes()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.processes()
        killed = []
        for proc in [*left, *self._group_members()]:
            try:
                killed.append(f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}")
                proc.kill()
            except psutil.Error:
                continue
        psutil.wait_procs(left, timeout=5)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
        return killed

    def _group_members(self) -> list[psutil.Process]:
        members = []
        for proc in psutil.process_iter():
            try:
                if os.getpgid(proc.pid) == self.proc.pid and proc.is_running():
                    members.append(proc)
            except (psutil.Error, OSError):
                continue
        return members


@dataclass
class Control:
    """One control of a widget view, found by its kind and position."""

    kind: str
    selector: str
    index: int
    label: str

    def __str__(self) -> str:
        return f"{self.kind} {self.label!r}"


#: How each kind of ipywidgets control is found inside a widget view.
CONTROL_SELECTORS = {
    "slider": ".widget-slider",
    "dropdown": ".widget-dropdown select",
    "toggle buttons": ".widget-toggle-buttons",
    "radio buttons": ".widget-radio-box",
    "checkbox": ".widget-checkbox input[type=checkbox]",
    "toggle button": "button.widget-toggle-button:not(.widget-toggle-buttons *)",
    "button": "button.widget-button",
}

_JS_PANEL = "const panel = window.jupyterapp.shell.currentWidget;"

#: The state of the open notebook's kernel and how many cells wait to run.
_JS_STATE = (
    "() => {"
    + _JS_PANEL
    + """
    if (!panel || !panel.sessionContext) return {status: 'none', queued: 0};
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    const prompts = [...panel.node.querySelectorAll('.jp-InputPrompt')];
    return {
        status: kernel ? kernel.status : 'none',
        queued: prompts.filter(p => p.textContent.includes('*')).length,
    };
}"""
)

#: Errors the notebook shows: error outputs, tracebacks, widgets that failed.
_JS_PROBLEMS = (
    "() => {"
    + _JS_PANEL
    + """
    const found = [];
    panel.content.widgets.forEach((cell, i) => {
        if (cell.model.type !== 'code') return;
        if (cell.model.executionCount === null) found.push(`cell ${i} did not run`);
        for (const o of cell.model.outputs.toJSON()) {
            const text = Array.isArray(o.text) ? o.text.join('') : String(o.text || '');
            if (o.output_type === 'error') {
                found.push(`cell ${i}: ${o.ename}: ${o.evalue}`);
            } else if (o.name === 'stderr' && /Traceback|Error/.test(text)) {
                found.push(`cell ${i} stderr: ${text.slice(0, 400)}`);
            }
        }
    });
    const sel = '[data-mime-type="application/vnd.jupyter.stderr"]';
    for (const el of panel.node.querySelectorAll(sel)) {
        if (/Traceback/.test(el.textContent)) {
            found.push(`traceback: ${el.textContent.slice(0, 400)}`);
        }
    }
    const text = panel.node.textContent;
    for (const bad of ['Error displaying widget', 'needs Vega', 'Chart failed']) {
        if (text.includes(bad)) found.push(`the notebook shows "${bad}"`);
    }
    return found;
}"""
)

#: Top-level widget views that rendered (in cell outputs, not in an Output widget).
_JS_VIEWS = (
    "() => {"
    + _JS_PANEL
    + """
    return [...panel.node.querySelectorAll('.jp-OutputArea-output')].filter(el =>
        el.querySelector(':scope > .jupyter-widgets')
        && !el.parentElement.closest('.widget-output'));
}"""
)

#: How many widget views the cells' outputs ask for.
_JS_VIEWS_WANTED = (
    "() => {"
    + _JS_PANEL
    + """
    let n = 0;
    panel.content.widgets.forEach(cell => {
        if (cell.model.type !== 'code') return;
        for (const o of cell.model.outputs.toJSON()) {
            if (o.data && o.data['application/vnd.jupyter.widget-view+json']) n += 1;
        }
    });
    return n;
}"""
)

#: Whether every chart in ``root`` is drawn and no widget in it is still loading.
_JS_DRAWN = """root => {
    const charts = [...root.querySelectorAll('.jp-RenderedVegaCommon5')];
    return charts.every(c => c.querySelector('svg, canvas'))
        && !root.textContent.includes('Loading widget');
}"""

#: What a widget view shows: its charts (SVG with Vega's counters taken out) and
#: the text of its HTML and Output widgets, but not its controls' own readouts.
_JS_SIGNATURE = """view => {
    const svg = [...view.querySelectorAll('.jp-RenderedVegaCommon5')].map(c => {
        const s = c.querySelector('svg');
        return s ? s.innerHTML.replace(/(id|clip-path)="[^"]*"/g, '') : 'pending';
    });
    const text = [...view.querySelectorAll(
        '.widget-html-content, .widget-htmlmath-content,'
        + ' .widget-output .jp-RenderedText, .widget-output .jp-RenderedHTMLCommon,'
        + ' .widget-output .jp-RenderedMarkdown'
    )].map(e => e.innerText);
    return JSON.stringify({svg, text});
}"""

#: The charts of a widget view alone, for timing their redraw.
_JS_CHART_SIGNATURE = """view => JSON.stringify(
    [...view.querySelectorAll('.jp-RenderedVegaCommon5')].map(c => {
        const s = c.querySelector('svg');
        return s ? s.innerHTML.replace(/(id|clip-path)="[^"]*"/g, '') : 'pending';
    }))"""

_JS_CONTROLS = """(view, selectors) => {
    const found = [];
    for (const [kind, sel] of Object.entries(selectors)) {
        view.querySelectorAll(sel).forEach((el, index) => {
            const box = el.closest('.widget-inline-hbox, .widget-box') || el;
            const label = box.querySelector('.widget-label');
            const names = [label && label.textContent,
                el.closest('label') && el.closest('label').textContent,
                box.textContent, el.getAttribute('title')];
            const text = names.map(t => (t || '').replace(/\u200b/g, '').trim())
                .find(t => t) || '';
            found.push({kind, selector: sel, index, label: text.slice(0, 60)});
        });
    }
    return found;
}"""


class Notebook:
    """One lab open in a JupyterLab browser page.

    Args:
        page: a Playwright page whose context already routes the network.
        lab: the ``JupyterLab`` server.
        name: the lab's name, e.g. ``23_economics``.
    """

    def __init__(self, page, lab: JupyterLab, name: str):
        self.page, self.lab, self.name = page, lab, name

    @property
    def path(self) -> str:
        return f"{self.name}.ipynb"

    def open(self, timeout_s: float = 180.0) -> None:
        """Open the lab (loading JupyterLab first if needed); wait for its kernel."""
        if not self.page.evaluate("() => !!window.jupyterapp"):
            self.page.goto(f"{self.lab.base}lab?token={self.lab.token}")
            self.page.wait_for_function(
                "() => window.jupyterapp", timeout=timeout_s * 1000
            )
            self.page.evaluate("() => window.jupyterapp.restored")
        self.page.evaluate(
            "async path => {"
            " await window.jupyterapp.commands.execute('docmanager:open', {path}); }",
            self.path,
        )
        self.page.wait_for_function(
            "path => { const w = window.jupyterapp.shell.currentWidget;"
            " return w && w.context && w.context.path === path && w.sessionContext; }",
            arg=self.path,
            timeout=timeout_s * 1000,
        )
        self.page.evaluate(
            "async () => {" + _JS_PANEL + "await panel.context.ready;"
            " await panel.sessionContext.ready; }"
        )
        self.wait_idle(timeout_s)

    def close(self) -> None:
        """Shut the lab's kernel down and close its tab without asking."""
        self.page.evaluate(
            "async path => { const w = window.jupyterapp.shell.currentWidget;"
            " if (!w || !w.context || w.context.path !== path) return;"
            " await w.sessionContext.shutdown(); w.dispose(); }",
            self.path,
        )

    def state(self) -> dict:
        return self.page.evaluate(_JS_STATE)

    def wait_idle(self, timeout_s: float, settle_s: float = 0.6) -> None:
        """Wait until the kernel is idle with no cell queued, for ``settle_s``."""
        deadline = time.monotonic() + timeout_s
        calm_since = None
        while time.monotonic() < deadline:
            state = self.state()
            if state["status"] == "idle" and state["queued"] == 0:
                calm_since = calm_since or time.monotonic()
                if time.monotonic() - calm_since >= settle_s:
                    return
            else:
                calm_since = None
            if state["status"] == "dead":
                raise AssertionError(f"{self.name}: the kernel is {state['status']}")
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: still busy after {timeout_s:.0f} s")

    def run_all(self, timeout_s: float = 300.0) -> float:
        """Run All (the menu's command); return the seconds until idle."""
        start = time.monotonic()
        # Not awaited: the command's promise ends with the last cell, and a hung
        # kernel must fail this test by its timeout, not hang the browser call.
        self.page.evaluate(
            "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
        )
        time.sleep(1.0)
        self.wait_idle(timeout_s, settle_s=1.5)
        return time.monotonic() - start

    def problems(self) -> list[str]:
        return self.page.evaluate(_JS_PROBLEMS)

    def wait_drawn(self, root=None, timeout_s: float = 30.0) -> None:
        """Wait until every chart and widget view under ``root`` has rendered."""
        root = root or self.page.locator(".jp-NotebookPanel").first
        root.evaluate(
            "(root, ms) => new Promise((ok, fail) => {"
            f" const done = {_JS_DRAWN};"
            " const t0 = Date.now();"
            " (function poll() { if (done(root)) return ok(true);"
            "   if (Date.now() - t0 > ms) return fail(new Error('not drawn'));"
            "   setTimeout(poll, 100); })(); })",
            timeout_s * 1000,
        )

    def widget_views(self):
        """The top-level widget views, as Playwright element handles."""
        handle = self.page.evaluate_handle(_JS_VIEWS)
        props = handle.get_properties()
        return [p.as_element() for p in props.values() if p.as_element()]

    def views_wanted(self) -> int:
        return self.page.evaluate(_JS_VIEWS_WANTED)

    def chart_count(self, view=None) -> int:
        root = view or self.page.locator(".jp-NotebookPanel").first
        return root.evaluate(
            "r => r.querySelectorAll('.jp-RenderedVegaCommon5 svg,"
            " .jp-RenderedVegaCommon5 canvas').length"
        )

    def signature(self, view) -> str:
        return view.evaluate(_JS_SIGNATURE)

    def controls(self, view) -> list[Control]:
        return [Control(**c) for c in view.evaluate(_JS_CONTROLS, CONTROL_SELECTORS)]

    def move(self, view, control: Control, far: bool = False) -> bool:
        """Move ``control`` one step (``far``: to its farther end, or the last option).

        Returns:
            False if the control is disabled (nothing was done), else True.
        """
        found = view.query_selector_all(control.selector)
        if control.index >= len(found):
            return False
        el = found[control.index]
        if el.evaluate(
            "e => !!(e.disabled || e.closest('.mod-disabled')"
            " || e.querySelector('[disabled]'))"
        ):
            return False
        el.scroll_into_view_if_needed()
        if control.kind == "slider":
            handle = el.query_selector(".noUi-handle")
            low, now, top = (
                float(handle.get_attribute(f"aria-value{k}"))
                for k in ("min", "now", "max")
            )
            if far:  # to the end farther away
                key = "Home" if now - low > top - now else "End"
            else:
                key = "ArrowRight" if now < top else "ArrowLeft"
            handle.focus()
            handle.press(key)
        elif control.kind == "dropdown":
            n, chosen = el.evaluate("s => [s.options.length, s.selectedIndex]")
            step = n - 1 if far else 1
            el.select_option(index=(chosen + max(step, 1)) % n)
        elif control.kind in ("toggle buttons", "radio buttons"):
            sel = "button" if control.kind == "toggle buttons" else "input"
            options = el.query_selector_all(sel)
            idle = [
                o
                for o in options
                if not o.evaluate(
                    "o => o.classList.contains('mod-active') || o.checked"
                )
            ]
            (idle[-1] if far else idle[0]).click()
        else:  # checkbox, toggle button, button
            el.click()
        return True

    def time_update(self, view, control: Control, timeout_s: float = 30.0) -> float:
        """Seconds from moving ``control`` to its view's chart being redrawn."""
        before = view.evaluate(_JS_CHART_SIGNATURE)
        start = time.perf_counter()
        self.move(view, control)
        view.evaluate(
            "(view, [before, ms]) => new Promise((ok, fail) => {"
            f" const sig = {_JS_CHART_SIGNATURE}; const drawn = {_JS_DRAWN};"
            " const t0 = Date.now();"
            " (function poll() {"
            "   if (drawn(view) && sig(view) !== before) return ok(true);"
            "   if (Date.now() - t0 > ms) return fail(new Error('no redraw'));"
            "   requestAnimationFrame(poll); })(); })",
            [before, timeout_s * 1000],
        )
        elapsed = time.perf_counter() - start
        self.wait_idle(timeout_s)
        return elapsed

    def save(self, timeout_s: float = 30.0) -> dict:
        """Save the notebook from JupyterLab; return the saved file's JSON."""
        self.page.evaluate(
            "async () => {" + _JS_PANEL + "await panel.context.save(); }"
        )
        deadline = time.monotonic() + timeout_s
        while self.page.evaluate(
            "() => {" + _JS_PANEL + "return panel.context.model.dirty; }"
        ):
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: not saved")
            time.sleep(0.2)
        return json.loads((self.lab.root / f"{self.name}.ipynb").read_text())
