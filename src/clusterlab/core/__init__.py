"""What every topic stands on; it imports no topic.

Reached as ``cl.core.<file>.<name>``; each file loads on first use.

- ``alpha_beta``: Fitting the alpha–beta model to measured message times.
- ``backend``: Choosing the communication backend: NCCL on GPUs, gloo on CPUs, one code
  path.
- ``bench``: Benchmarking collectives the way nccl-tests does, on whatever backend is
  here.
- ``best_of``: The fastest of several benchmark passes: noise on a shared machine only
  adds time.
- ``busy``: One bounded retry for timing checks, and a busy machine said in words.
- ``chart_checks``: The input check every chart builder makes: a DataFrame with the
  columns it draws.
- ``checks``: What every self-check shares: the verdict lines, the time limit, and the
  record.
- ``controls``: One spec per explorer control: it builds the live slider and the
  page's slider.
- ``diagram``: The two pictures every diagram is made of: boxes with links, and lanes.
- ``env``: The lab environment: sizes (SMOKE or FULL), seeds, and what this machine has.
- ``launcher``: Start a real process group from a notebook and bring each rank's result
  back.
- ``lazy``: Packages whose files load on first use: ``cl.ring.ranks`` imports that file.
- ``published``: Published numbers for hardware the reader may not own, with their
  sources.
- ``rank_main``: What runs inside each rank of a ``launch``: quiet it, join the group,
  report.
- ``show``: Widgets that show live in a kernel and as a static chart in the book.
- ``supervisor``: The launcher's side of a ``launch``: watch every rank, stop and
  report.
- ``theme``: One look for every chart, and charts that draw offline wherever they are
  shown.
- ``torchrun``: Running a module under ``torchrun``, the launcher real clusters use,
  from Python.
- ``units``: Units of time, in seconds, defined once for the whole package.
- ``validate``: Argument checks shared by the whole package.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
