"""Reference solutions to the labs' exercises, used by the tests of ``cl.check``.

Readers: try the exercise first; each answer is also folded in its lab. Each
topic's solutions live in their own module; every name in a module's
``__all__`` is reachable as ``cl.solutions.<name>``.
"""

from .._lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
