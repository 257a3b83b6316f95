"""How often date-stamped rendezvous ids split a launch: a closed form.

A launch line that names the job ``training_job_$(date +%Y%m%d_%H%M%S)`` runs
``date`` on every node; the nodes meet only if every reading falls in the same
second. ``cl.clocks.rendezvous`` runs that launch for real on two agents; this
module says how likely the split is for ``n`` nodes whose readings spread over
a window (start-up jitter plus clock skew).
"""

from __future__ import annotations

from clusterlab.core.validate import check_float, check_int


def split_probability(spread_s: float, n_nodes: int = 128) -> float:
    """Chance that date-stamped ids of ``n_nodes`` do not all agree.

    The nodes read their clocks at independent instants spread uniformly over a
    window of ``spread_s`` (start-up jitter plus clock skew), at a random phase
    within the second. The ids disagree when a second boundary falls between
    the first and the last reading, which happens with probability equal to the
    expected range of the readings: ``spread_s * (n - 1) / (n + 1)``.

    Args:
        spread_s: width of the window, seconds, in [0, 1].
        n_nodes: nodes, in [2, 100000].

    Returns:
        The probability, in [0, 1].
    """
    spread_s = check_float("spread_s", spread_s, 0.0, 1.0)
    n = check_int("n_nodes", n_nodes, 2, 100_000)
    return spread_s * (n - 1) / (n + 1)


__all__ = ["split_probability"]
