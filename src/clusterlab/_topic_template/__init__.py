"""A topic's folder, to copy: every role stubbed around one small example.

Copy this folder to ``src/clusterlab/<topic>/``, rename the example (a sum
over ranks) to your topic's idea, delete the roles your lab does not need,
add ``<topic>`` to ``clusterlab.TOPICS`` in table-of-contents order, and move
``test_template.py`` to ``tests/unit/test_<topic>.py`` (``docs/architecture.md``
says what each role may import).

- ``sim``: a simulation: frozen parameters and a seed in, a DataFrame out.
- ``ranks``: code that runs on the ranks of a process group.
- ``measure``: runs the ranks and returns what they did as a table.
- ``chart``: a DataFrame in, an Altair chart out.
- ``diagram``: a picture from data rows or a table the caller made.
- ``widget``: controls wired to a model or a simulation, with a static twin.
- ``check``: the exercise's self-check (and any check that decides a claim).
- ``answer``: the exercise's reference solution.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role, e.g. {"stacks": "measure"}.
ROLES: dict[str, str] = {}

__getattr__, __dir__ = submodules(__name__, __path__)
