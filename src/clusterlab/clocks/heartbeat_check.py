"""Measure the two heartbeat detectors under skew, and decide what they showed.

``measure_heartbeats`` runs ``run_heartbeats`` once per skew (rank 1's clock
ahead of rank 0's by that much) and, when the machine was so busy that a
heartbeat really arrived later than the timeout, says so and measures again, a
bounded number of times (``cl.core.busy.retry``), then goes on with the last
run. ``check_heartbeat_detectors`` then raises ``AssertionError`` unless the
runs show what the clocks predict:

* a wall-clock detector whose clock leads the peer's by more than the margin
  (``timeout_s - interval_s``) suspects the live peer while its heartbeats
  are on time: once per heartbeat, as the model says, when none was late;
* with no lead (the control), or a lagging clock, it does not;
* the monotonic detector never suspects a live peer whose heartbeats are on
  time, whatever the skew;
* both detectors suspect a peer that has really gone silent, and the monotonic
  one no sooner than a timeout after the peer's last heartbeat.

A suspicion raised while a heartbeat really was late belongs to the machine,
not to the clocks, and is counted apart (``late_suspicions``), so a busy
machine cannot fail a correct detector while a wrong one still fails.
"""

from __future__ import annotations

import pandas as pd

from clusterlab.clocks.heartbeats import LATE_TOLERANCE_S, run_heartbeats
from clusterlab.core.busy import retry
from clusterlab.core.validate import check_float, check_int

_NEEDED = [
    "observer",
    "peer",
    "detector",
    "lead_s",
    "heartbeats",
    "false_suspicions",
    "clock_suspicions",
    "worst_true_age_s",
    "detected",
    "detect_after_s",
    "skew_s",
    "interval_s",
    "timeout_s",
    "margin_s",
]


def late_heartbeats(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows during which a heartbeat really was late: the machine was busy.

    Args:
        runs: rows of ``run_heartbeats``.

    Returns:
        Those whose freshest heartbeat got older than the timeout (less
        ``LATE_TOLERANCE_S``) on the machine's shared clock.
    """
    late = runs["worst_true_age_s"] > runs["timeout_s"] - LATE_TOLERANCE_S
    return runs[late]


def measure_heartbeats(
    skews_s=(0.0, 17e-3), *, tries: int = 3, say=print, **kwargs
) -> pd.DataFrame:
    """Run the heartbeats once per skew; on a busy machine, say so and run again.

    Args:
        skews_s: rank 1's clock minus rank 0's, one run each, in [0, 10] s.
        tries: runs at most per skew, in [1, 10].
        say: where the plain-words notes go (``print``).
        **kwargs: passed to ``run_heartbeats`` (``interval_s``, ``timeout_s``...).

    Returns:
        The runs' rows (``run_heartbeats``) with ``tries``, the runs it took.
    """
    check_int("tries", tries, 1, 10)
    frames = []
    for skew_s in skews_s:
        check_float("skews_s", skew_s, 0.0, 10.0)

        def measure(attempt, skew_s=skew_s):
            return run_heartbeats((0.0, skew_s), **kwargs).assign(tries=attempt)

        def judge(runs, skew_s=skew_s):
            late = late_heartbeats(runs)
            if late.empty:
                return "pass", f"skew {skew_s * 1e3:g} ms: every heartbeat on time"
            worst = late.loc[late["worst_true_age_s"].idxmax()]
            return "busy", (
                f"skew {skew_s * 1e3:g} ms: rank {worst.observer} heard nothing "
                f"from rank {worst.peer} for {worst.worst_true_age_s * 1e3:.0f} ms "
                f"while it was sending, past the {worst.timeout_s * 1e3:g} ms timeout"
            )

        done = retry(
            measure,
            judge,
            what="heartbeats on time",
            hint="a heartbeat late on every try is the machine's doing",
            tries=tries,
            numbered=True,
            undecided="the suspicions that late heartbeats caused are counted "
            "apart (late_suspicions), so the check below still decides on the "
            "clocks' share",
            say=say,
        )
        frames.append(done.result)
    return pd.concat(frames, ignore_index=True)


def check_heartbeat_detectors(runs: pd.DataFrame) -> None:
    """Raise ``AssertionError`` unless the runs show skew fooling only the wall clock.

    Args:
        runs: ``measure_heartbeats``' output with at least one run whose largest
            lead exceeds the margin and one control run with no skew.
    """
    missing = [c for c in _NEEDED if c not in getattr(runs, "columns", [])]
    if missing:
        raise ValueError(f"runs lacks the columns {missing}")
    margin = runs["margin_s"]
    if not (runs["lead_s"] > margin).any() or not (runs["skew_s"] == 0).any():
        raise AssertionError(
            "the runs need a control with no skew and a skew beyond the "
            f"{margin.max() * 1e3:g} ms margin: got skews "
            f"{sorted(set(runs['skew_s'].round(4)))} s"
        )
    for row in runs.itertuples():
        where = (
            f"{row.detector} detector on rank {row.observer}, peer {row.peer}, "
            f"its clock {row.lead_s * 1e3:+.0f} ms from the peer's"
        )
        if row.heartbeats < 3:
            raise AssertionError(f"{where}: only {row.heartbeats} heartbeats came")
        if not row.detected:
            raise AssertionError(f"{where}: never suspected a peer that fell silent")
        wall = row.detector == "wall clock"
        clean = row.worst_true_age_s <= row.timeout_s - LATE_TOLERANCE_S
        fooled = wall and row.lead_s > row.margin_s
        if fooled and row.clock_suspicions == 0:
            raise AssertionError(
                f"{where}: no suspicion, yet a lead beyond the "
                f"{row.margin_s * 1e3:g} ms margin should make every heartbeat "
                "look late. Did the skew reach the clock the detector reads?"
            )
        # Just before each heartbeat arrives the last one looks at least
        # interval + lead > timeout old: one suspicion per gap, and one more if
        # the last heartbeat's turn came before the silence.
        want = (row.heartbeats - 1, row.heartbeats)
        if fooled and clean and not want[0] <= row.clock_suspicions <= want[1]:
            raise AssertionError(
                f"{where}: {row.clock_suspicions} suspicions in "
                f"{row.heartbeats} heartbeats, all on time; the model says one "
                "per heartbeat"
            )
        if (not wall or row.lead_s <= 0) and row.clock_suspicions > 0:
            raise AssertionError(
                f"{where}: {row.clock_suspicions} suspicions of a live peer whose "
                "heartbeats were on time. "
                + (
                    "A monotonic detector must not read the sender's clock."
                    if not wall
                    else "With no lead, only late heartbeats may look late."
                )
            )
        if not wall and row.detect_after_s < row.timeout_s - LATE_TOLERANCE_S:
            raise AssertionError(
                f"{where}: suspected the silent peer {row.detect_after_s * 1e3:.1f}"
                " ms after its last heartbeat, sooner than the timeout"
            )


__all__ = ["check_heartbeat_detectors", "late_heartbeats", "measure_heartbeats"]
