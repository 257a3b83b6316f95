"""Checks of a fault-tolerant run's log, and the exercise's check.

The log is the table of ``cl.fault_tolerance.measure`` (one row per committed
step and group). Each check returns True with a tick, or raises
``AssertionError`` saying what the log shows instead; each can fail, and
``tests/unit/test_fault_tolerance.py`` feeds each a wrong log to prove it.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from clusterlab.core.chart_checks import check_columns
from clusterlab.core.checks import not_attempted, passed
from clusterlab.core.validate import check_float, check_int
from clusterlab.fault_tolerance import loopback


def _step_batches(log: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """One row per step with the samples it trained, or what is inconsistent.

    With a ``step_samples`` column (the trainer's log), every group that
    committed a step must report the same samples for it, and its own batch must
    be part of them; without one (a bare log), a step's samples are the union of
    its groups' batches.
    """
    if "step_samples" not in log.columns:
        return log, None
    for r in log.itertuples():
        if not set(r.samples) <= set(r.step_samples):
            return log, (
                f"group {r.replica_id} trained samples in step {r.step} that the "
                "step's commit does not include"
            )
    per_step = log.groupby("step")["step_samples"].agg(lambda v: {tuple(x) for x in v})
    split = per_step[per_step.map(len) > 1]
    if len(split):
        return log, (
            f"the groups that committed step {int(split.index[0])} disagree on the "
            "samples it trained"
        )
    rows = [
        dict(step=s, replica_id="all", samples=list(next(iter(v))))
        for s, v in per_step.items()
    ]
    return pd.DataFrame(rows, columns=["step", "replica_id", "samples"]), None


def _reuse_or_gap(log: pd.DataFrame) -> str | None:
    """What breaks exactly-once reading in ``log``, or None."""
    check_columns(log, ["step", "replica_id", "samples"])
    log, problem = _step_batches(log)
    if problem:
        return problem
    seen = Counter(s for batch in log["samples"] for s in batch)
    twice = sorted(s for s, n in seen.items() if n > 1)
    if twice:
        rows = log[log["samples"].map(lambda b: twice[0] in b)]
        where = ", ".join(f"step {r.step} on {r.replica_id}" for r in rows.itertuples())
        return (
            f"{len(twice)} samples were trained twice, e.g. sample {twice[0]} "
            f"({where}): a committed batch was read again"
        )
    missing = sorted(set(range(max(seen) + 1)) - set(seen)) if seen else []
    if missing:
        return (
            f"{len(missing)} samples were skipped, e.g. sample {missing[0]}: "
            "the batch of a step that did not commit was never trained"
        )
    return None


def exactly_once(log: pd.DataFrame) -> bool:
    """No sample in two committed steps, and none skipped (ids 0..n-1 all read).

    A step's samples are its ``step_samples`` where the log has them: a group
    whose peers committed a step it did not commit logs nothing for it, but its
    batch was trained in that step all the same.
    """
    problem = _reuse_or_gap(log)
    if problem:
        raise AssertionError(problem)
    n = len({s for b in _step_batches(log)[0]["samples"] for s in b})
    return passed("exactly_once", f"{n} samples, each in one committed batch")


def params_agree(log: pd.DataFrame) -> bool:
    """Every group that committed a step logged the same parameter hash for it."""
    check_columns(log, ["step", "replica_id", "params_sha256"])
    n = log.groupby("step")["params_sha256"].nunique()
    bad = n[n > 1]
    if len(bad):
        s = int(bad.index[0])
        hashes = log[log["step"] == s][["replica_id", "params_sha256"]]
        seen = ", ".join(f"{r}: {h[:12]}" for r, h in hashes.itertuples(index=False))
        raise AssertionError(
            f"{len(bad)} steps have groups whose parameters differ, first step {s} "
            f"({seen}): the groups no longer train one model"
        )
    return passed("params_agree", f"{len(n)} steps, one parameter hash each")


def every_step_committed(log: pd.DataFrame, steps: int) -> bool:
    """Steps 1..``steps`` were each committed by at least one group."""
    check_columns(log, ["step"])
    steps = check_int("steps", steps, 1)
    missing = sorted(set(range(1, steps + 1)) - set(log["step"]))
    if missing:
        raise AssertionError(
            f"{len(missing)} of steps 1..{steps} were committed by no group, "
            f"first {missing[0]}: the run has a gap"
        )
    return passed("every_step_committed", f"steps 1..{steps}, none missing")


def healed_after_kill(log: pd.DataFrame, killed: str, kill_step: int) -> bool:
    """The restarted group's first step came after the kill, healed from a peer."""
    check_columns(log, ["step", "replica_id", "healed_from", "time", "life"])
    back = log[(log["replica_id"] == str(killed)) & (log["life"] > 0)]
    if back.empty:
        raise AssertionError(f"group {killed} never committed a step after its restart")
    first = back.sort_values("time").iloc[0]
    if first["step"] <= kill_step:
        raise AssertionError(
            f"group {killed}'s first step after the restart is {first['step']}, not "
            f"after the kill at step {kill_step}: it started over instead of healing"
        )
    peers = set(log["replica_id"]) - {str(killed)}
    if first["healed_from"] not in peers:
        raise AssertionError(
            f"group {killed} rejoined at step {first['step']} with healed_from="
            f"{first['healed_from']!r}, not one of its live peers {sorted(peers)}"
        )
    return passed(
        "healed_after_kill",
        f"group {killed} rejoined at step {first['step']}, healed from group "
        f"{first['healed_from']}",
    )


def loopback_only(listeners: dict, nodes=()) -> bool:
    """Every listening address of every process is a loopback one, or one of
    ``nodes`` (the book's own emulated nodes' addresses, which exist only
    inside those nodes)."""
    if not isinstance(listeners, dict) or not listeners:
        raise ValueError(f"listeners={listeners!r} must map process names to addresses")
    own = {str(n) for n in nodes}
    allowed = lambda a: loopback.is_loopback(a) or a.rsplit(":", 1)[0] in own  # noqa: E731
    wide = {n: [a for a in addrs if not allowed(a)] for n, addrs in listeners.items()}
    wide = {n: a for n, a in wide.items() if a}
    if wide:
        where = "loopback" + (" or the emulated nodes" if own else "")
        raise AssertionError(f"listening beyond {where}: {wide}")
    count = sum(len(a) for a in listeners.values())
    where = "loopback" + (f" or the nodes' own addresses {sorted(own)}" if own else "")
    return passed(
        "loopback_only", f"{count} listeners of {len(listeners)} processes, all {where}"
    )


#: how much sooner than a timeout the survivors may go on (the timers' grain)
CUT_EARLY_S = 0.25
#: how much later than the collective timeout they may commit: a new quorum
#: (the lighthouse dropped the silent group a heartbeat after the cut) and a step
CUT_LATE_S = 1.0

COLUMNS_OF_A_CUT = ("timeout_s", "heartbeat_s", "cut_s", "stall_s", "back_s",
                    "restarts", "healed_from")  # fmt: skip


def cut_waits_for_the_timeout(table: pd.DataFrame) -> bool:
    """A cut link costs the survivors at most the collective timeout; its group
    heals in place.

    A cut is silent. Caught with the silent group in a collective, the
    survivors wait for that collective's timeout; falling between
    collectives, it leaves the group out of the next quorum once the
    lighthouse stops hearing it, a heartbeat timeout after the cut, as a
    crash does. So for each row (``partition.COLUMNS``) the survivors' next
    commit came between the heartbeat timeout and the collective timeout
    (less ``CUT_EARLY_S``, plus ``CUT_LATE_S``), and well before the heal: a
    model in which a cut is noticed at once, or one in which the survivors
    wait until the link is back, fails. The cut-off group was not restarted,
    healed from a live peer, and trained again within a timeout and
    ``CUT_LATE_S`` of the heal.
    """
    check_columns(table, list(COLUMNS_OF_A_CUT), "the cut table")
    if table.empty:
        raise ValueError("table has no row: measure a cut first")
    for row in table.itertuples():
        lo = min(row.heartbeat_s, row.timeout_s) - CUT_EARLY_S
        hi = min(row.timeout_s + CUT_LATE_S, row.cut_s - CUT_EARLY_S)
        if row.stall_s < lo:
            raise AssertionError(
                f"the survivors went on {row.stall_s:.2f} s after the cut, before "
                f"any timeout ({lo:.2f} s): a silent link cannot be noticed at once"
            )
        if row.stall_s > hi:
            raise AssertionError(
                f"the survivors' stall after the cut was {row.stall_s:.2f} s, past "
                f"{hi:.2f} s (the collective timeout {row.timeout_s:g} s, the heal "
                f"at {row.cut_s:.2f} s): a cut-off group must be left out of the "
                "quorum, not waited for"
            )
        if row.restarts:
            raise AssertionError(
                "the cut-off group was restarted: it should heal in place"
            )
        if row.healed_from is None or pd.isna(row.healed_from):
            raise AssertionError(
                "the cut-off group rejoined without healing from a peer"
            )
        if not 0 <= row.back_s <= row.timeout_s + CUT_LATE_S:
            raise AssertionError(
                f"the cut-off group trained again {row.back_s:.2f} s after the heal: "
                f"allowed 0 to {row.timeout_s + CUT_LATE_S:g} s"
            )
    stalls = ", ".join(f"{v:.2f}" for v in table["stall_s"])
    first = table.iloc[0]
    return passed(
        "cut_waits_for_the_timeout",
        f"stall {stalls} s after a {first['cut_s']:.1f} s cut: between the "
        f"heartbeat timeout ({first['heartbeat_s']:g} s) and the collective "
        f"timeout ({first['timeout_s']:g} s); healed in place from a live peer",
    )


# ------------------------------------------------------------------ the race
def goodput_matches_replay(measured: float, predicted: dict, what: str) -> bool:
    """A run's measured goodput lies in its replay's band (``cl.fault_tolerance.race``).

    Args:
        measured: the run's goodput, in [0, 1].
        predicted: ``{"goodput", "low", "high"}`` from ``race.predict_restart``
            or ``race.predict_per_step``.
        what: the run's name, for the message.
    """
    measured = check_float("measured", measured, 0.0, 1.0)
    missing = {"goodput", "low", "high"} - set(predicted)
    if missing:
        raise ValueError(f"predicted={predicted!r} lacks {sorted(missing)}")
    g, lo, hi = (float(predicted[k]) for k in ("goodput", "low", "high"))
    if not lo <= measured <= hi:
        side = "more" if measured > hi else "less"
        raise AssertionError(
            f"{what}: measured goodput {measured:.3f} is outside the replay's band "
            f"[{lo:.3f}, {hi:.3f}] (replay {g:.3f}): the run kept {side} work than "
            "the model allows, so the model leaves out a cost or counts one twice"
        )
    return passed(
        "goodput_matches_replay",
        f"{what}: measured {measured:.3f}, replay {g:.3f} in [{lo:.3f}, {hi:.3f}]",
    )


def per_step_keeps_more(per_step: float, restart: float) -> bool:
    """Under the same failures per-step recovery kept more work than restarts."""
    per_step = check_float("per_step", per_step, 0.0, 1.0)
    restart = check_float("restart", restart, 0.0, 1.0)
    if per_step <= restart:
        raise AssertionError(
            f"per-step recovery kept {per_step:.3f} of the work and "
            f"checkpoint-restart {restart:.3f}: per-step recovery should keep more, "
            "since only one group stops while the others go on"
        )
    return passed(
        "per_step_keeps_more",
        f"per-step {per_step:.3f} against checkpoint-restart {restart:.3f}",
    )


# -------------------------------------------------------------------- the exercise
#: A run's history for the exercise: (quorum size, committed?) per attempted step.
HISTORY = [(3, True), (3, True), (3, False), (2, True), (2, True), (3, True),
           (3, False), (3, True), (2, True), (3, True)]  # fmt: skip


def replay(fn, history=HISTORY, batch: int = 2) -> pd.DataFrame:
    """The committed batches ``fn`` picks over ``history``, as a run's log.

    ``fn(step, quorum_rank, quorum_size, batches_committed, batch)`` gives one
    group's sample ids; ``step`` is the number of steps committed so far.
    """
    rows, step, committed = [], 0, 0
    for size, ok in history:
        batches = [list(fn(step, r, size, committed, batch)) for r in range(size)]
        if ok:
            step += 1
            committed += size
            rows += [dict(step=step, replica_id=str(r), samples=b)
                     for r, b in enumerate(batches)]  # fmt: skip
    return pd.DataFrame(rows, columns=["step", "replica_id", "samples"])


def samples_for(fn) -> bool:
    """Check ``fn(step, quorum_rank, quorum_size, batches_committed, batch)``.

    Over a history in which the quorum shrinks and grows and some steps do not
    commit, every sample must be read exactly once, in order.
    """
    name = "samples_for"
    if not callable(fn):
        raise ValueError(f"fn={fn!r} must be your function {name}")
    try:
        log = replay(fn)
    except NotImplementedError:
        return not_attempted(name)
    sizes = [len(b) for b in log["samples"]]
    if any(n != 2 for n in sizes):
        raise AssertionError(f"{name} gave batches of {sorted(set(sizes))} samples, "
                             "not batch = 2")  # fmt: skip
    problem = _reuse_or_gap(log)
    if problem:
        hint = (
            "when the quorum changes size, step × quorum_size no longer counts the "
            "batches read: start from batches_committed"
        )
        raise AssertionError(f"{name}: {problem}. Hint: {hint}.")
    return passed(name, f"{len(log)} committed batches, every sample read once")


#: A spike's damage: the run that trained through it must sit at least twice as
#: high as the clean run after it (it sits 5 to 10 times higher), and the run
#: that skipped the batch within 5% of it (it misses one batch of training).
DAMAGE_MIN, SKIP_TOLERANCE = 2.0, 0.05


def spike_triage(spiked, clean, skipped, found, bad_step: int) -> str:
    """Detect, skip, compare: the triage of a loss spike, judged.

    The detector's first flag must be the bad step (later flags may be the
    damage that follows it); training through it must leave the loss at least
    twice the clean run's over the next 20 steps; skipping that one batch must
    bring it within 5% of the clean run.

    Returns:
        A sentence saying what held. Raises ``AssertionError`` otherwise.
    """
    from clusterlab.fault_tolerance.spikes import damage

    if not list(found) or list(found)[0] != bad_step:
        raise AssertionError(
            f"the detector flagged steps {list(found)[:8]}, not first the bad batch's "
            f"step {bad_step}: compare each loss with the recent past, not a "
            "fixed line"
        )
    hurt = damage(spiked, clean, bad_step)
    healed = damage(skipped, clean, bad_step)
    if hurt < DAMAGE_MIN:
        raise AssertionError(
            f"training through the spike left the loss only {hurt:.2f} times the "
            "clean run's: was the bad batch in?"
        )
    if abs(healed - 1) > SKIP_TOLERANCE:
        raise AssertionError(f"skipping the batch left the loss {healed - 1:+.1%} off")
    return (
        f"spike found first at step {bad_step}; training through it left the loss "
        f"{hurt:.1f} times the clean run's over 20 steps, skipping it "
        f"{healed - 1:+.1%} off"
    )


__all__ = [
    "spike_triage",
    "cut_waits_for_the_timeout",
    "every_step_committed",
    "exactly_once",
    "goodput_matches_replay",
    "healed_after_kill",
    "loopback_only",
    "params_agree",
    "per_step_keeps_more",
    "replay",
    "samples_for",
]
