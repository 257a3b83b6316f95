"""clusterlab: the lab kit of *GPU Clusters and Distributed Computing*.

Labs and chapters use it as ``import clusterlab as cl``::

    env = cl.setup(seed=0)                  # seeds, versions, SMOKE or FULL
    results = cl.dist.launch(worker, 2)     # a real process group, results per rank
    df = cl.perf.bench_collective("all_reduce", [2**10, 2**20], world_size=2)
"""

__version__ = "0.1.0"

import sys as _sys

# Altair imports jsonschema, which loads rfc3987-syntax for one optional format
# check ("iri") whenever it is installed (JupyterLab's dependencies install it);
# that module compiles a grammar at import, about 3 s in every kernel and every
# rank that imports the package. Nothing here validates that format, so the
# import is skipped unless something loaded it already (docs/decisions.md).
_sys.modules.setdefault("rfc3987_syntax", None)

from . import check, dist, models, perf, published, sim, solutions, ui, viz  # noqa: E402
from ._env import Env, is_smoke, setup, size  # noqa: E402

__all__ = [
    "Env",
    "check",
    "dist",
    "is_smoke",
    "models",
    "perf",
    "published",
    "sim",
    "setup",
    "size",
    "solutions",
    "ui",
    "viz",
]
