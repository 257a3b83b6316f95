"""Diagrams drawn from data: servers, networks, collectives, clocks, schedules.

Each picture is a ``*_diagram`` function that returns an Altair chart (the
book's one chart library, so diagrams share its theme and draw offline like
every chart), built from a ``*_spec`` (boxes and links) or a table of bars that
the unit tests read. Rates, sizes and counts on the labels come from
``cl.published`` or from a model. Steppable pictures carry a slider that the
browser runs, so that they step in a static page too.
"""

from ..._lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
