"""Sphinx extension: let a test run reuse the labs that nbval has just executed.

The test command runs every lab cell by cell with nbval, then builds the book.
Executing each lab a second time for the build would repeat minutes of work, so
``labs/conftest.py`` stores each lab that nbval ran without a failure, outputs
included, in a jupyter-cache folder and names it in
``CLUSTERLAB_EXECUTION_CACHE``; ``make book`` fills such a folder the same way,
two labs at a time (``scripts/execute_labs.py``). When that variable is set,
this extension switches myst-nb to its ``cache`` mode on that folder: a
notebook whose code is unchanged takes its outputs from there, and any other
page (every chapter, and a lab that failed or was not run) is executed as usual.

Without the variable (a plain ``jupyter-book build``) nothing changes: every
page is executed afresh (``execute_notebooks: force`` in ``_config.yml``).
"""

from __future__ import annotations

import os

CACHE_ENV = "CLUSTERLAB_EXECUTION_CACHE"


def store(cache_dir: str, nb, path: str, seconds: float) -> None:
    """Store an executed lab, outputs included, where the build will look for it.

    Both writers use it: ``labs/conftest.py`` (nbval's run) and
    ``scripts/execute_labs.py`` (``make book``).

    Args:
        cache_dir: the jupyter-cache folder.
        nb: the lab as read from disk (``nbformat.NotebookNode``), with outputs.
        path: the lab's file, as the build names it.
        seconds: how long the lab ran, kept beside it.
    """
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    get_cache(cache_dir).cache_notebook_bundle(
        CacheBundleIn(nb, path, data={"execution_seconds": seconds}),
        check_validity=False,
        overwrite=True,
    )


def _config_inited(app, config) -> None:
    path = os.environ.get(CACHE_ENV)
    if not path:
        return
    if not os.path.isdir(path):
        raise ValueError(f"{CACHE_ENV}={path!r} is not a folder")
    config.nb_execution_mode = "cache"
    config.nb_execution_cache_path = path


def setup(app):
    # Before myst-nb reads its settings (at builder-inited).
    app.connect("config-inited", _config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
