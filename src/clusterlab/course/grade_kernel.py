"""Run one submitted notebook in a fresh kernel, cell by cell, for the autograder.

The autograder (``clusterlab.course.grade``) starts this file as a script, in a new
session of its own, and kills that session and everything under it when the
notebook's time limit runs out. So that a killed run still says how far it got,
this runner appends one JSON line per event to ``EVENTS`` (``start`` and ``done``
of each code cell, with the error's name and message) and saves the notebook,
with the outputs so far, to ``EXECUTED`` after every cell. A cell that raises does
not stop the run: later exercises are still checked.

It imports only the Jupyter libraries, not ``clusterlab``, so that it starts fast;
the kernel is this same Python interpreter, whatever kernel the notebook names::

    python -P grade_kernel.py NOTEBOOK EXECUTED EVENTS WORKDIR
"""

from __future__ import annotations

import json
import sys
import time
from queue import Empty

import nbformat
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from traitlets import Type, default

#: What the graded notebooks run on: this interpreter's ipykernel.
KERNEL_ARGV = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]


#: Seconds between looks at a channel while waiting without a deadline.
POLL_S = 0.5


class PollingChannel(AsyncZMQSocketChannel):
    """A channel that, asked to wait, looks again every ``POLL_S`` until its deadline.

    One long wait on the shell channel could miss the wake-up of an execute
    reply that had already arrived while many widget messages came in on IOPub
    (seen with a widget redrawn in a loop, and with widgets whose controls are
    moved from code): the cell then ended only at its time limit, or never
    (jupyter/nbclient#312). Short waits in a loop see the reply within
    ``POLL_S``.
    """

    async def get_msg(self, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = POLL_S
            if deadline is not None:
                step = max(0.0, min(POLL_S, deadline - time.monotonic()))
            try:
                return await super().get_msg(step)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise


class PollingClient(AsyncKernelClient):
    """An async kernel client whose shell and IOPub channels poll."""

    shell_channel_class = Type(PollingChannel)
    iopub_channel_class = Type(PollingChannel)


class ThisPythonKernel(AsyncKernelManager):
    """A kernel manager that ignores the notebook's kernelspec (Colab's, say)."""

    @default("client_factory")
    def _polling_client(self):
        return PollingClient

    @property
    def kernel_spec(self) -> KernelSpec:
        return KernelSpec(
            argv=KERNEL_ARGV, display_name="Python 3", language="python", env={}
        )


def _event(path: str, **fields) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({**fields, "time_s": time.time()}) + "\n")


def _error_of(cell) -> dict:
    """The first error output of an executed cell, as ``{ename, evalue}``."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return {
                "ename": output.get("ename", ""),
                "evalue": output.get("evalue", ""),
            }
    return {}


def run(notebook: str, executed: str, events: str, workdir: str) -> int:
    """Execute ``notebook`` top to bottom; return 0, or 1 if the kernel died.

    Args:
        notebook: the submitted ``.ipynb``.
        executed: where the notebook with its outputs is saved after each cell.
        events: the JSON-lines file of cell events.
        workdir: the kernel's working directory.
    """
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(
        nb,
        timeout=None,  # the autograder enforces the notebook's time limit
        allow_errors=True,
        kernel_manager_class=ThisPythonKernel,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": workdir}},
    )
    _event(events, event="kernel", status="starting")
    with client.setup_kernel():
        _event(events, event="kernel", status="ready")
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            _event(events, event="start", cell=index)
            try:
                client.execute_cell(cell, index)
            except DeadKernelError as err:
                _event(events, event="died", cell=index, evalue=str(err))
                nbformat.write(nb, executed)
                return 1
            error = _error_of(cell)
            status = "error" if error else "ok"
            _event(events, event="done", cell=index, status=status, **error)
            nbformat.write(nb, executed)
    _event(events, event="finished")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(run(*sys.argv[1:]))
