"""Self-checks for the labs' exercises: ``cl.check.<exercise>(your_function)``.

Each check takes the reader's function and

* prints ``not attempted`` while it still raises ``NotImplementedError``;
* prints a tick and what was checked when it is right;
* raises ``AssertionError`` with a hint when it is wrong.

A check never hangs: distributed answers run under ``cl.dist.launch`` with a
short timeout (``CHECK_TIMEOUT_S``), so a deadlock becomes a hint, not a frozen
notebook. Each topic's checks live in their own module (``messages`` for
message passing, and so on); every name in a module's ``__all__`` is reachable as
``cl.check.<name>``.
"""

from .._lazy import lazy_attributes
from ._common import TICK

CHECK_TIMEOUT_S = 10.0

__getattr__, __dir__ = lazy_attributes(__name__, __path__)
__all__ = ["CHECK_TIMEOUT_S", "TICK"]
