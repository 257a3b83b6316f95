"""The checks that decide the stragglers lab's verdicts, each able to fail.

Two kinds:

* **computed against computed**: the closed-form model against a simulation of
  many random draws (an independent computation), and the SimPy engine against
  the NumPy engine on the same draws. Deterministic for a seed: a miss is a
  wrong model, and raises ``AssertionError``.
* **measured against predicted**: a real run on this machine against the
  simulation of the same draws (or a formula). A busy machine makes ranks late,
  which no simulation models, so ``measure_until_decided`` tells the two causes
  of a miss apart. Each round, a real run records how late its latest rank
  reached the all-reduce beyond its drawn compute (``late_s``); that delay can
  make the real step longer than the simulated one by at most its own size. A
  miss that this delay explains is a busy machine: the check says so and
  measures again, at most ``TRIES`` times (``cl.core.busy.retry``). A miss it
  does not explain (too slow by more, or faster than predicted) is a wrong
  prediction and fails at once.

``REL_TOL`` is the bound a measured step may differ from its prediction on top
of the measured delay; the stragglers chapter says how it was chosen.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from clusterlab.core.busy import retry
from clusterlab.models.stragglers import expected_step_time
from clusterlab.stragglers import sim as S

#: Bound on |real / predicted - 1| beyond the measured delay; see the chapter.
REL_TOL = 0.10


#: Real runs before a busy machine's comparison is left undecided.
TRIES = 3


#: Bound on the model's straggler cost (step / mean - 1) against a simulation.
MODEL_REL_TOL = 0.05


def check_engines_agree(params, seed: int = 0, simulate=S.simulate):
    """SimPy and NumPy engines on the same draws: mean steps equal to 1e-9.

    Args:
        params: a ``StragglerParams``.
        seed: seed of the draws.
        simulate: the simulation (a test passes a wrong one).

    Returns:
        ``(simpy_s, numpy_s)``, mean seconds per step.

    Raises:
        AssertionError: if they differ.
    """
    simpy_s = S.mean_step_time(simulate(params, seed=seed, engine="simpy"))
    numpy_s = S.mean_step_time(simulate(params, seed=seed, engine="numpy"))
    if abs(simpy_s / numpy_s - 1) > 1e-9:
        raise AssertionError(
            f"the engines disagree on the same draws: SimPy {simpy_s:.6f} s, "
            f"NumPy {numpy_s:.6f} s per step"
        )
    return simpy_s, numpy_s


def check_model_against_simulation(
    params,
    seed: int = 0,
    rel_tol: float = MODEL_REL_TOL,
    model=expected_step_time,
    simulate=S.simulate,
):
    """The model's straggler cost against a NumPy simulation of many steps.

    Compares the cost, ``step / base_s - 1``, not the step, so that a small cost
    (0.3% jitter) is checked as strictly as a large one.

    Args:
        params: a ``StragglerParams`` (many steps: the simulation's mean is a
            sample mean).
        seed: seed of the simulation.
        rel_tol: allowed relative difference of the two costs.
        model, simulate: the model and the simulation (a test passes wrong ones).

    Returns:
        ``(model_s, sim_s)``, mean seconds per step.

    Raises:
        AssertionError: if the costs differ by more than ``rel_tol``.
    """
    model_s = float(model(**params.model_kwargs()))
    sim_s = S.mean_step_time(simulate(params, seed=seed, engine="numpy"))
    cost_model, cost_sim = model_s / params.base_s - 1, sim_s / params.base_s - 1
    if abs(cost_model - cost_sim) > rel_tol * max(abs(cost_sim), 1e-9):
        raise AssertionError(
            f"model and simulation disagree on {params.n_workers} workers "
            f"({params.jitter}, cv {params.cv}): the model's step is "
            f"{cost_model:+.2%} over the mean compute, the simulation's "
            f"{cost_sim:+.2%}, beyond the {rel_tol:.0%} allowed"
        )
    return model_s, sim_s


def check_jitter_for_ratio(
    n_workers: int,
    step_ratio: float,
    jitter: str,
    cv: float,
    seed: int = 0,
    n_steps: int = 1000,
    rel_tol: float = MODEL_REL_TOL,
    simulate=S.simulate,
) -> float:
    """Does jitter ``cv`` on every worker make steps ``step_ratio`` times longer?

    Simulates ``n_workers`` for ``n_steps`` with that jitter and compares the
    simulated cost (``step / mean - 1``) with ``step_ratio - 1``.

    Returns:
        The simulated step over the mean compute time.

    Raises:
        AssertionError: if the costs differ by more than ``rel_tol``.
    """
    p = S.StragglerParams(n_workers, n_steps, 1.0, jitter, cv)
    got = S.mean_step_time(simulate(p, seed=seed, engine="numpy"))
    if abs((got - 1) - (step_ratio - 1)) > rel_tol * (step_ratio - 1):
        raise AssertionError(
            f"{jitter} jitter of cv {cv:.3f} on {n_workers} workers makes steps "
            f"{got:.3f} times the mean in simulation, not {step_ratio:.3f}"
        )
    return got


def check_faster(table: pd.DataFrame, fast: str, slow: str, say=print) -> bool:
    """Was scenario ``fast`` faster than ``slow`` in a decided real run?

    Args:
        table: ``measure_until_decided``'s table, with rows ``fast`` and ``slow``.
        fast, slow: the two checks' names.
        say: where the plain-words report goes.

    Returns:
        True if decided and faster; False (said in words) if the machine left
        the run undecided.

    Raises:
        AssertionError: if the run was decided and ``fast`` was not faster.
    """
    rows = table.set_index("check")
    if set(rows.loc[[fast, slow], "verdict"]) != {"agrees"}:
        say(f"undecided whether {fast} is faster: the machine was too busy")
        return False
    if rows.at[fast, "real_s"] >= rows.at[slow, "real_s"]:
        raise AssertionError(
            f"{fast} took {rows.at[fast, 'real_s'] * 1e3:.2f} ms per step, "
            f"{slow} {rows.at[slow, 'real_s'] * 1e3:.2f} ms: not faster"
        )
    return True


def simulate_like(params, run: pd.DataFrame, seed: int = 0, simulate=S.simulate):
    """Simulate ``params`` on a real run's draws, with its measured all-reduce."""
    allreduce_s = float(run["allreduce_s"].mean())
    return simulate(replace(params, allreduce_s=allreduce_s), seed=seed)


def simulation_predictions(scenarios: dict, seed: int = 0, simulate=S.simulate):
    """A ``predict`` for ``measure_until_decided``: each scenario's simulation."""

    def predict(real: pd.DataFrame) -> dict:
        out = {}
        for name, p in scenarios.items():
            run = real[real["scenario"] == name]
            sim = simulate_like(p, run, seed, simulate)
            out[name] = (name, S.mean_step_time(sim))
        return out

    return predict


def judge(real_s: float, predicted_s: float, late_s: float, rel_tol=REL_TOL) -> str:
    """``"agrees"``, ``"busy"`` or ``"wrong"`` for one measured mean step.

    Args:
        real_s: measured seconds per step.
        predicted_s: predicted seconds per step.
        late_s: measured delay per step the prediction does not model, >= 0.
        rel_tol: the bound on ``real_s / predicted_s - 1`` without the delay.
    """
    excess = real_s / predicted_s - 1
    if abs(excess) <= rel_tol:
        return "agrees"
    if rel_tol < excess <= rel_tol + late_s / predicted_s:
        return "busy"
    return "wrong"


def _table(real: pd.DataFrame, predictions: dict, rel_tol: float) -> pd.DataFrame:
    rows = []
    for label, (scenario, predicted_s) in predictions.items():
        run = real[real["scenario"] == scenario]
        steps = run["steps"].sum()
        real_s = float(run["round_s"].sum() / steps)
        late_s = float(run["late_s"].sum() / steps)
        verdict = judge(real_s, predicted_s, late_s, rel_tol)
        rows.append((label, scenario, real_s, predicted_s, late_s, verdict))
    cols = ["check", "scenario", "real_s", "predicted_s", "late_s", "verdict"]
    table = pd.DataFrame(rows, columns=cols)
    return table.assign(excess=table["real_s"] / table["predicted_s"] - 1)


def _line(row) -> str:
    return (
        f"{row.check}: real {row.real_s * 1e3:.2f} ms, predicted "
        f"{row.predicted_s * 1e3:.2f} ms per step ({row.excess:+.1%}); "
        f"ranks late {row.late_s * 1e3:.2f} ms per step"
    )


def measure_until_decided(
    scenarios: dict,
    predict,
    *,
    seed: int = 0,
    rel_tol: float = REL_TOL,
    tries: int = TRIES,
    run=None,
    say=print,
    **run_kwargs,
):
    """Run ``scenarios`` for real and compare with ``predict``; re-measure if busy.

    Args:
        scenarios: name -> ``StragglerParams``, as ``run_straggler_scenarios``.
        predict: ``predict(real) -> {check: (scenario, predicted_s)}``.
        seed: seed of the draws.
        rel_tol: see ``judge``.
        tries: real runs at most, in [1, 10].
        run: the runner (default ``cl.stragglers.ranks.run_straggler_scenarios``).
        say: where the plain-words report goes.
        **run_kwargs: passed to the runner.

    Returns:
        ``(real, table)``: the last run's rounds and one row per check with
        ``real_s, predicted_s, late_s, excess, verdict``; a verdict ``"busy"``
        left after the last try means undecided (the machine stayed busy).

    Raises:
        AssertionError: if a check misses by more than the machine's delays
            explain: the prediction is wrong.
    """
    if run is None:
        from clusterlab.stragglers.ranks import run_straggler_scenarios as run

    def measure():
        real = run(scenarios, seed=seed, **run_kwargs)
        return real, _table(real, predict(real), rel_tol)

    def verdict(measured):
        table = measured[1]
        wrong = table[table["verdict"] == "wrong"]
        if len(wrong):
            row = next(wrong.itertuples())
            return "wrong", (
                f"{_line(row)}: a miss of {row.excess:+.1%} is beyond the "
                f"{rel_tol:.0%} bound plus what the ranks' lateness explains "
                f"({row.late_s / row.predicted_s:.1%}), so it is not the machine: "
                "the prediction is wrong"
            )
        busy = table[table["verdict"] == "busy"]
        if busy.empty:
            return "pass", f"every check agrees within {rel_tol:.0%}"
        row = next(busy.itertuples())
        return "busy", (
            f"{_line(row)}: {row.excess:+.1%} is more than the {rel_tol:.0%} bound, "
            "but the ranks reached the all-reduce late (woken late, or waiting for "
            "a core), which explains the difference and which the prediction does "
            "not model"
        )

    done = retry(
        measure,
        verdict,
        what="the straggler predictions against real runs",
        hint="the prediction is wrong",
        tries=tries,
        undecided="close other programs and run this cell again",
        say=say,
    )
    real, table = done.result
    if done.decided:
        for row in table.itertuples():
            say(f"agrees within {rel_tol:.0%}: {_line(row)}")
    return real, table


__all__ = [
    "REL_TOL",
    "TRIES",
    "check_engines_agree",
    "check_faster",
    "check_jitter_for_ratio",
    "check_model_against_simulation",
    "judge",
    "measure_until_decided",
    "simulate_like",
    "simulation_predictions",
]
