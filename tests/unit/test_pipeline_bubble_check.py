"""The measured-bubble check: it accepts the formula and rejects wrong models.

These tests feed the check measurement tables (simulated runs with known
message delays, or perturbed ones) instead of starting processes; the real
runs are in ``tests/distributed/test_pipeline.py``.
"""

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.models.pipeline import bubble_fraction, simulate_schedule
from clusterlab.pipeline import measure as pb

P, FWD, BWD = 4, 0.03, 0.06


def _run(m, hop_s):
    """A simulated run with every message ``hop_s`` late, as the worker stamps it."""
    tl = simulate_schedule(P, m, fwd_time=FWD, bwd_time=BWD, comm_time=hop_s)
    rows = []
    for s, g in tl.groupby("stage"):
        prev_end = 0.0
        for r in g.sort_values("start").itertuples():
            needs = (r.phase == "fwd" and s > 0) or (r.phase == "bwd" and s < P - 1)
            if needs:  # the worker waits in recv from its previous pass's end
                rows.append((s, 0, r.microbatch, r.phase, prev_end, r.start))
            prev_end = r.end
    waits = pd.DataFrame(rows, columns=tl.columns)
    return tl, waits


def _table(hop_s=0.002, ms=(1, 2, 4, 8), extra=0.0):
    rows = []
    for m in ms:
        tl, waits = _run(m, hop_s)
        hops = pb.hop_delays(tl, waits)
        rows.append(
            dict(
                microbatches=m,
                measured=cl.models.pipeline.simulated_bubble(tl) + extra,
                hop_delay_s=float(hops.max()),
                overrun_s=0.0,
                allowance=pb._allowance(P, m, "1f1b", FWD, BWD, float(hops.max())),
            )
        )
    return pd.DataFrame(rows)


def test_simulated_message_delays_raise_the_bubble_and_zero_delay_is_the_formula():
    for m in (1, 4, 8):
        clean = simulate_schedule(P, m, fwd_time=FWD, bwd_time=BWD, comm_time=0.0)
        late = simulate_schedule(P, m, fwd_time=FWD, bwd_time=BWD, comm_time=0.005)
        assert cl.models.pipeline.simulated_bubble(clean) == pytest.approx(
            bubble_fraction(P, m), abs=1e-12
        )
        assert cl.models.pipeline.simulated_bubble(late) > bubble_fraction(P, m)
    one = simulate_schedule(1, 4, comm_time=5.0)  # one stage sends nothing
    assert cl.models.pipeline.simulated_bubble(one) == 0.0
    with pytest.raises(ValueError, match="comm_time"):
        simulate_schedule(P, 4, comm_time=-1.0)


def test_hop_delays_and_rank_states_read_the_stamps():
    tl, waits = _run(8, 0.004)
    hops = pb.hop_delays(tl, waits)
    assert len(hops) > 0 and hops == pytest.approx(0.004, abs=1e-9)
    states = pb.rank_states(tl, waits)
    step = tl["end"].max()
    assert states["busy_s"].tolist() == pytest.approx([8 * (FWD + BWD)] * P)
    assert (states["idle_s"] + states["busy_s"]).tolist() == pytest.approx([step] * P)
    # Stage 0 never waits for an input; its idle time is all waiting for grads.
    assert states.loc[0, "recv_wait_s"] == pytest.approx(states.loc[0, "idle_s"])
    assert (states["other_idle_s"] >= 0).all()


def test_bubble_check_accepts_the_formula_within_the_measured_noise():
    verdict = pb.bubble_verdict(_table(), bubble_fraction, P)
    assert (verdict["verdict"] == "fits").all(), verdict


def test_bubble_check_fails_when_the_model_is_p_minus_1_over_m():
    verdict = pb.bubble_verdict(_table(), lambda p, m: (p - 1) / m, P)
    assert (verdict["verdict"] == "below").all()


def test_bubble_check_fails_when_the_model_has_no_bubble():
    verdict = pb.bubble_verdict(_table(), lambda p, m: 0.0, P)
    assert (verdict["verdict"] == "above").all()


def test_bubble_check_fails_when_the_measurement_has_idle_the_noise_does_not_explain():
    # A pipeline that lost 5 points more than its own message delays explain.
    verdict = pb.bubble_verdict(_table(extra=0.05), bubble_fraction, P)
    assert (verdict["verdict"] == "above").all()


def _fake_measurements(monkeypatch, tables):
    calls = []

    def fake(stages, **kw):
        calls.append(kw)
        return tables[min(len(calls), len(tables)) - 1].assign(schedule="1f1b")

    monkeypatch.setattr(pb, "measure_bubble", fake)
    return calls


def test_check_bubble_measures_again_on_a_busy_machine_and_says_so(monkeypatch, capsys):
    calls = _fake_measurements(monkeypatch, [_table(extra=0.05), _table()])
    df = pb.check_bubble(bubble_fraction, P)
    assert len(calls) == 2 and df["decided"].all()
    assert "may have been busy" in capsys.readouterr().out


def test_check_bubble_fails_when_the_model_has_no_bubble_after_bounded_tries(
    monkeypatch,
):
    calls = _fake_measurements(monkeypatch, [_table()])
    with pytest.raises(AssertionError, match="leaves out idle time"):
        pb.check_bubble(lambda p, m: 0.0, P, tries=3)
    assert len(calls) == 3


def test_check_bubble_fails_at_once_when_the_model_predicts_too_much_idle(
    monkeypatch,
):
    calls = _fake_measurements(monkeypatch, [_table()])
    with pytest.raises(AssertionError, match="noise only adds idle time"):
        pb.check_bubble(lambda p, m: (p - 1) / m, P)
    assert len(calls) == 1


def test_check_bubble_says_when_the_machine_is_too_busy_to_decide(monkeypatch, capsys):
    # Messages 30 ms late: the allowance is too wide to tell models apart.
    calls = _fake_measurements(monkeypatch, [_table(hop_s=0.03)])
    df = pb.check_bubble(bubble_fraction, P, tries=2)
    assert len(calls) == 1 and not df["decided"].any()
    assert "Not decided" in capsys.readouterr().out


def test_min_microbatches_check_accepts_the_solution_and_rejects_wrong_answers(
    capsys,
):
    import math

    assert cl.pipeline.check.min_microbatches(cl.pipeline.answer.min_microbatches)
    assert "\u2714" in capsys.readouterr().out

    def stub(stages, max_bubble):
        raise NotImplementedError

    assert cl.pipeline.check.min_microbatches(stub) is False
    assert "not attempted" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="ideal time"):
        cl.pipeline.check.min_microbatches(lambda p, x: max(1, math.ceil((p - 1) / x)))
    with pytest.raises(AssertionError, match="round m up"):
        cl.pipeline.check.min_microbatches(
            lambda p, x: max(1, int((p - 1) * (1 - x) / x))
        )
    with pytest.raises(AssertionError, match="an int"):
        cl.pipeline.check.min_microbatches(lambda p, x: "nine")
    assert cl.pipeline.answer.min_microbatches(4, 0.1) == 27
