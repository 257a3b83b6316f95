"""The checks that decide the debugging lab's verdicts, each able to fail.

Each takes what a tool showed and what was injected, and raises
``AssertionError`` when the tool did not find it: the wrong rank, the wrong
cause, no mismatch named, no slow rank singled out, no overlap seen.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.debugging.stacks import group_stacks, odd_ranks
from clusterlab.debugging.timings import slow_ranks, straggler_verdict

#: Where the culprit's stack stops, for each fault the lab injects.
EXPECTED_TOP = {
    "skip": "barrier",
    "mismatch_op": "broadcast",
    "loader": "load_batch",
    "deadlock": "recv",
}


def check_fault_found(job) -> pd.DataFrame:
    """The grouped dumps single out the culprit, stopped where its fault says.

    For a deadlock the two ranks of the pair stand together in ``recv``, in a
    group of their own.

    Returns:
        The groups (``group_stacks``).
    """
    if not job.dumps:
        raise AssertionError(f"no stack dumps were taken ({job.note or job.error})")
    groups = group_stacks(job.dumps)
    want = EXPECTED_TOP[job.fault]
    if job.fault == "deadlock":
        pair = {job.culprit, (job.culprit - 1) % job.world_size}
        rows = groups[groups["top"] == want]
        if len(rows) != 1 or set(rows["ranks"].iloc[0]) != pair:
            raise AssertionError(f"ranks {sorted(pair)} should wait in recv:\n{groups}")
        return groups
    odd = odd_ranks(groups)
    if odd != [job.culprit]:
        raise AssertionError(
            f"the odd rank(s) {odd} are not the culprit {job.culprit}:\n{groups}"
        )
    top = groups[groups["ranks"].map(lambda r: job.culprit in r)]["top"].iloc[0]
    if top != want:
        raise AssertionError(f"the culprit waits in {top!r}, expected {want!r}")
    return groups


def check_timeout_detected(job, timeout_s: float, grace_s: float = 10.0) -> None:
    """The hang ended as a failure, by the group's timeout, within a bound."""
    if job.ok:
        raise AssertionError("the faulty job finished: nothing detected the fault")
    if "timed out" not in job.error.lower():
        raise AssertionError(f"the job failed, but not by a timeout: {job.error}")
    if job.elapsed_s > timeout_s + grace_s:
        raise AssertionError(
            f"the hang lasted {job.elapsed_s:.1f} s, beyond the {timeout_s} s "
            f"timeout plus {grace_s} s"
        )


def check_detail_names_mismatch(job, aspect: str) -> None:
    """Every rank's error says "Detected mismatch" and names ``aspect``.

    Args:
        job: a ``FaultyJob`` run with ``debug="DETAIL"``.
        aspect: what differs, as torch writes it: ``"Op type"`` or
            ``"Tensor shapes"``.
    """
    errors = job.rank_errors
    if len(errors) != job.world_size:
        raise AssertionError(f"only ranks {sorted(errors)} reported an error")
    for rank, text in errors.items():
        if "Detected mismatch between collectives" not in text or aspect not in text:
            raise AssertionError(f"rank {rank} did not name the {aspect}: {text[:300]}")


def check_slow_rank_found(timings: pd.DataFrame, slow_rank) -> dict:
    """The timings single out ``slow_rank`` (or none), and the step shows it.

    With a slow rank the measured step must exceed what jitter alone explains
    (the straggler model without it); without one, no rank is flagged.

    Returns:
        ``straggler_verdict(timings)``.
    """
    verdict = straggler_verdict(timings)
    want = [] if slow_rank is None else [slow_rank]
    if slow_ranks(timings) != want:
        raise AssertionError(f"flagged {verdict['slow_ranks']}, expected {want}")
    if want and verdict["measured_step_s"] <= verdict["jitter_only_s"]:
        raise AssertionError(
            f"the step ({verdict['measured_step_s'] * 1e3:.1f} ms) is no longer than"
            f" jitter alone explains ({verdict['jitter_only_s'] * 1e3:.1f} ms)"
        )
    return verdict


def check_overlap_shown(small: pd.DataFrame, big: pd.DataFrame) -> None:
    """Small buckets communicate during the backward pass; one big bucket after it.

    Args:
        small, big: ``step_events`` of one rank with small buckets and with one
            bucket holding every gradient.
    """
    for name, ev, early in (("small buckets", small, True), ("one bucket", big, False)):
        comm = ev[ev["lane"] == "communication"]
        back = ev[(ev["lane"] == "compute") & ~ev["name"].str.endswith(".forward")]
        if comm.empty or back.empty:
            raise AssertionError(f"{name}: the trace has no communication or backward")
        starts_early = comm["start_s"].min() < back["end_s"].max()
        if starts_early != early:
            when = "before" if early else "after"
            raise AssertionError(
                f"{name}: the first all-reduce should start {when} the backward pass "
                f"ends (it started at {comm['start_s'].min() * 1e3:.2f} ms, backward "
                f"ended at {back['end_s'].max() * 1e3:.2f} ms)"
            )


__all__ = [
    "EXPECTED_TOP",
    "check_detail_names_mismatch",
    "check_fault_found",
    "check_overlap_shown",
    "check_slow_rank_found",
    "check_timeout_detected",
]
