"""Exercise check: how many network ports a node needs (the interconnects lab)."""

from __future__ import annotations

from clusterlab.core.checks import not_attempted, passed

#: (n_params, tokens_per_gpu, network, max_share): answers 1 to 8 and None.
_CASES = [
    (7e9, 32768, "NDR400 InfiniBand", 0.10),
    (7e9, 65536, "100GbE RoCE", 0.10),
    (70e9, 16384, "NDR400 InfiniBand", 0.10),
    (7e9, 131072, "100GbE TCP", 0.10),
    (1e9, 65536, "NDR400 InfiniBand", 0.10),
    (7e9, 8192, "NDR400 InfiniBand", 0.10),
    (7e9, 8192, "NDR400 InfiniBand", 0.30),
]


def _share(n_params, tokens, network, ports):
    from clusterlab.models import interconnects as ic

    compute = ic.compute_time(n_params, tokens, ic.h100_peak_flops(), ic.default_mfu())
    comm = ic.cluster_allreduce_time(2 * n_params, network, 16, 8, ports)
    step = ic.step_time(compute, comm)
    return (step - compute) / step


def _expected(n_params, tokens, network, max_share):
    for ports in range(1, 9):
        if _share(n_params, tokens, network, ports) <= max_share:
            return ports
    return None


def _hint(got, want, case) -> str:
    n_params, tokens, network, max_share = case
    if want is None:
        share = _share(n_params, tokens, network, 8)
        return (
            f"even 8 ports leave {share:.0%} of the step exposed, above "
            f"{max_share:.0%}: return None when no count in 1..8 is enough"
        )
    if got is None or not isinstance(got, int) or not 1 <= got <= 8:
        return f"return a whole number of ports in 1..8 (here {want} is enough)"
    share = _share(n_params, tokens, network, got)
    if share > max_share:
        return (
            f"with {got} ports the exposed share is {share:.1%}, above "
            f"{max_share:.0%}: the share is (step - compute) / step, with no overlap"
        )
    return (
        f"{want} ports already keep it at {_share(n_params, tokens, network, want):.1%}"
        ": return the fewest that are enough"
    )


def ports_needed(fn) -> bool:
    """Check the exercise: ``fn(n_params, tokens_per_gpu, network, max_share)``."""
    name = "ports_needed"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    for case in _CASES:
        try:
            got = fn(*case)
        except NotImplementedError:
            return not_attempted(name)
        want = _expected(*case)
        if got != want:
            n_params, tokens, network, max_share = case
            raise AssertionError(
                f"{name}({n_params:.0e}, {tokens}, {network!r}, {max_share}) "
                f"returned {got!r}; expected {want!r}. Hint: {_hint(got, want, case)}."
            )
    return passed(name, f"the fewest ports agree in {len(_CASES)} cases")


def h4_is_a_range(table) -> dict:
    """Decide claim H4 for the 70B recipe over its unknowns (``h4_sensitivity``).

    The model must respond to both unknowns: within a curve, hiding more of
    the tensor-parallel all-reduces raises the end-to-end MFU, and at equal
    overlap the faster curve gives the higher MFU; and at least one pair of
    assumptions must land within 10% of the published MFU (a model that
    leaves out a cost, or counts one twice, misses it everywhere). What is
    returned says which assumptions make the step communication-bound.

    Args:
        table: ``cl.models.recipe_comm.h4_sensitivity``'s table.

    Returns:
        ``{"comm_bound": [(curve, overlap), ...], "near_published": [...]}``.
    """
    from clusterlab.core.chart_checks import check_columns

    need = ["curve", "tp_overlap", "tp_busbw_GBps", "mfu", "near_published",
            "comm_bound"]  # fmt: skip
    check_columns(table, need, "the H4 table")
    if table.empty:
        raise ValueError("the H4 table has no row")
    for curve, rows in table.groupby("curve", sort=False):
        mfu = rows.sort_values("tp_overlap")["mfu"].to_numpy()
        if len(mfu) > 1 and not (mfu[1:] > mfu[:-1]).all():
            raise AssertionError(
                f"on {curve} the MFU does not rise as more tensor-parallel traffic "
                "hides: the model ignores the overlap"
            )
    for hide, rows in table.groupby("tp_overlap"):
        ranked = rows.sort_values("tp_busbw_GBps")["mfu"].to_numpy()
        if len(ranked) > 1 and not (ranked[1:] >= ranked[:-1]).all():
            raise AssertionError(
                f"at overlap {hide:g} a faster curve gave a lower MFU: the model "
                "ignores the curve"
            )
    near = [(r.curve, r.tp_overlap) for r in table.itertuples() if r.near_published]
    if not near:
        raise AssertionError(
            f"no curve and overlap brings the model within 10% of the published MFU "
            f"(it ranges {table.mfu.min():.0%} to {table.mfu.max():.0%}): the model "
            "leaves out a cost or counts one twice"
        )
    bound = [(r.curve, r.tp_overlap) for r in table.itertuples() if r.comm_bound]
    passed(
        "h4_is_a_range",
        f"{len(near)} of {len(table)} assumptions explain the published MFU; "
        f"{len(bound)} make the step communication-bound",
    )
    return {"comm_bound": bound, "near_published": near}


__all__ = ["h4_is_a_range", "ports_needed"]
