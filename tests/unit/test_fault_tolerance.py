"""The fault-tolerance topic: its log checks fail on wrong logs, the loopback
wrapper rewrites binds, the goodput model and its Vega twin agree, and the
exercise's check keeps its triad."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from check_helpers import check_triad
from clusterlab.fault_tolerance import answer, chart, check, diagram, loopback
from clusterlab.models import fault_tolerance as ft
from clusterlab.models.checkpointing import goodput, job_mtbf, young_daly_interval

# Three groups; group 1 dies in step 3 (retried by 0 and 2) and heals in step 4.
HISTORY = [  # step, [(group, quorum rank or None when healing)], participants
    (1, [("0", 0), ("1", 1), ("2", 2)], 3),
    (2, [("0", 0), ("1", 1), ("2", 2)], 3),
    (3, [("0", 0), ("2", 1)], 2),
    (4, [("0", 0), ("1", None), ("2", 1)], 2),
    (5, [("0", 0), ("1", 1), ("2", 2)], 3),
]


def good_log() -> pd.DataFrame:
    """A run's log as the trainer writes it (batch of 2 samples)."""
    rows, pos = [], 0
    for step, groups, w in HISTORY:
        for g, rank in groups:
            first = None if rank is None else (pos + rank) * 2
            rows.append(
                dict(
                    step=step, replica_id=g, participants=w,
                    samples=[] if rank is None else [first, first + 1],
                    params_sha256=f"h{step}",
                    healed_from="0" if rank is None else None,
                    time=step + 0.01 * int(g), life=int(g == "1" and step >= 4),
                )
            )  # fmt: skip
        pos += w
    return pd.DataFrame(rows)


def test_the_checks_pass_a_good_log():
    log = good_log()
    assert check.exactly_once(log)
    assert check.params_agree(log)
    assert check.every_step_committed(log, 5)
    assert check.healed_after_kill(log, "1", kill_step=2)


def test_exactly_once_fails_on_a_duplicated_and_on_a_skipped_sample():
    log = good_log()
    dup = log.copy()
    dup.at[3, "samples"] = list(dup.at[0, "samples"])
    with pytest.raises(AssertionError, match="trained twice"):
        check.exactly_once(dup)
    gap = log.drop(index=4)
    with pytest.raises(AssertionError, match="skipped"):
        check.exactly_once(gap)


def test_params_agree_fails_on_differing_hashes():
    log = good_log()
    log.at[1, "params_sha256"] = "other"
    with pytest.raises(AssertionError, match="parameters differ, first step 1"):
        check.params_agree(log)


def test_every_step_committed_fails_on_a_gap():
    log = good_log()
    with pytest.raises(AssertionError, match="first 3"):
        check.every_step_committed(log[log["step"] != 3], 5)
    with pytest.raises(AssertionError, match="first 6"):
        check.every_step_committed(log, 6)
    with pytest.raises(ValueError, match="steps=0"):
        check.every_step_committed(log, 0)


def test_healed_after_kill_fails_on_a_restart_from_scratch_or_no_heal():
    log = good_log()
    restarted = log[(log["replica_id"] == "1") & (log["life"] == 1)].index[0]
    scratch = log.copy()
    scratch.at[restarted, "step"] = 1
    with pytest.raises(AssertionError, match="started over"):
        check.healed_after_kill(scratch, "1", kill_step=2)
    unhealed = log.copy()
    unhealed.at[restarted, "healed_from"] = None
    with pytest.raises(AssertionError, match="not one of its live peers"):
        check.healed_after_kill(unhealed, "1", kill_step=2)
    with pytest.raises(AssertionError, match="never committed"):
        check.healed_after_kill(log[log["life"] == 0], "1", kill_step=2)


def test_loopback_only_fails_on_a_wildcard_listener():
    assert check.loopback_only({"a": ["127.0.0.1:5", "[::1]:6"], "b": []})
    with pytest.raises(AssertionError, match="beyond loopback"):
        check.loopback_only({"a": ["127.0.0.1:5"], "b": ["0.0.0.0:29510"]})
    with pytest.raises(AssertionError, match="beyond loopback"):
        check.loopback_only({"a": ["[::]:29510"]})
    with pytest.raises(ValueError, match="listeners"):
        check.loopback_only({})


def test_the_manager_server_bind_is_rewritten_to_loopback():
    calls = []
    module = types.SimpleNamespace(ManagerServer=lambda **kw: calls.append(kw) or kw)
    loopback.loopback_manager_server(module)
    loopback.loopback_manager_server(module)  # twice: still one rewrite
    module.ManagerServer(replica_id="r", bind="[::]:1234")
    assert calls == [{"replica_id": "r", "bind": "127.0.0.1:1234"}]
    assert loopback.rewrite_bind("0.0.0.0:0") == "127.0.0.1:0"
    with pytest.raises(ValueError, match="bind='nohost'"):
        loopback.rewrite_bind("nohost")
    with pytest.raises(ValueError, match="allowed 0 to 65535"):
        loopback.rewrite_bind("[::]:70000")


def test_loopback_env_keeps_gloo_and_the_store_on_lo():
    env = loopback.loopback_env({})
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["GLOO_SOCKET_IFNAME"] == "lo"
    assert loopback.is_loopback("127.0.0.1:1") and loopback.is_loopback("[::1]:2")
    assert not loopback.is_loopback("0.0.0.0:1") and not loopback.is_loopback("[::]:2")


def test_the_per_step_model_and_its_bounds():
    m = 10_000.0
    assert ft.per_step_goodput(m, 10.0, 300.0, 10) == pytest.approx(1 - 39 / m)
    assert ft.per_step_goodput(m, 1e6, 0.0, 2) == 0.0
    for bad, kw in [("mtbf_s", dict(mtbf_s=0.0)), ("n_groups", dict(n_groups=1)),
                    ("recovery_s", dict(recovery_s=-1.0))]:  # fmt: skip
        args = dict(mtbf_s=m, recovery_s=1.0, rejoin_s=1.0, n_groups=4) | kw
        with pytest.raises(ValueError, match=bad):
            ft.per_step_goodput(**args)
    # More groups lose less while one group is replaced.
    g = [ft.per_step_goodput(m, 10.0, 300.0, n) for n in (2, 4, 8, 16)]
    assert g == sorted(g)


def test_per_step_recovery_beats_checkpoint_restart_as_jobs_grow():
    t = ft.goodput_table(
        np.arange(3, 16), gpu_mtbf_s=50_000 * 3600.0, checkpoint_cost_s=60.0,
        restart_s=300.0, recovery_s=10.0, n_groups=8,
    )  # fmt: skip
    wide = t.pivot(index="gpus", columns="method", values="goodput")
    gap = wide["per-step recovery"] - wide["checkpoint-restart"]
    assert (gap > 0).all() and gap.is_monotonic_increasing


@pytest.mark.parametrize(
    "mtbf_h, ckpt_s, restart_s, recovery_s, groups",
    [(50_000, 60, 300, 10, 8), (5_000, 600, 1800, 120, 2), (200_000, 5, 30, 1, 64)],
)
def test_the_vega_twin_computes_the_python_model(
    mtbf_h, ckpt_s, restart_s, recovery_s, groups
):
    pytest.importorskip("vl_convert")
    from test_vega_twins import calculates, vega_eval

    spec = chart.goodput_explorer().to_dict()
    calcs = [c for c in calculates(spec) if c["as"] != "method"]
    params = dict(gpu_mtbf_h=mtbf_h, ckpt_s=ckpt_s, restart_s=restart_s,
                  recovery_s=recovery_s, n_groups=groups)  # fmt: skip
    rows = [{"log2_gpus": k} for k in range(3, 16)]
    got = vega_eval(calcs, rows, params)
    want = ft.goodput_table(
        range(3, 16), gpu_mtbf_s=mtbf_h * 3600.0, checkpoint_cost_s=ckpt_s,
        restart_s=restart_s, recovery_s=recovery_s, n_groups=groups,
    ).pivot(index="log2_gpus", columns="method", values="goodput")  # fmt: skip
    np.testing.assert_allclose(
        got["checkpoint_restart"], want["checkpoint-restart"], rtol=1e-9
    )
    np.testing.assert_allclose(
        got["per_step"], want["per-step recovery"], rtol=1e-9, atol=1e-12
    )
    # A wrong twin (the restart paid by the whole job) fails the same comparison.
    wrong = [dict(c) for c in calcs]
    for c in wrong:
        if c["as"] == "per_step":
            c["calculate"] = chart.per_step_expr(
                "datum.m", "recovery_s", "restart_s", "1"
            )
    bad = vega_eval(wrong, rows, params)["per_step"]
    assert not np.allclose(bad, want["per-step recovery"], rtol=1e-6)


def test_the_charts_and_diagram_draw():
    log = good_log()
    assert chart.committed_steps_chart(log, 2.5, 3.0).to_dict()
    t = ft.goodput_table([3, 4], gpu_mtbf_s=1e8, checkpoint_cost_s=60.0,
                         restart_s=300.0, recovery_s=10.0, n_groups=8)  # fmt: skip
    assert chart.goodput_chart(t).to_dict()
    spec = chart.goodput_explorer().to_dict()
    names = {p["name"] for p in spec["params"]}
    assert {c.name for c in chart.EXPLORER_CONTROLS} <= names
    assert diagram.quorum_diagram(3, 1, 5).to_dict()
    with pytest.raises(ValueError, match="killed"):
        diagram.quorum_diagram(3, 3, 5)
    with pytest.raises(ValueError, match="lacks the column"):
        chart.goodput_chart(t.drop(columns="goodput"))


def test_the_exercise_check_keeps_its_triad(capsys):
    def wrong(step, quorum_rank, quorum_size, batches_committed, batch):
        first = (step * quorum_size + quorum_rank) * batch
        return list(range(first, first + batch))

    check_triad(
        check.samples_for,
        answer.samples_for,
        wrong,
        "start from batches_committed",
        capsys,
    )


def test_young_is_what_the_checkpoint_curve_uses():
    m = job_mtbf(50_000 * 3600.0, 1024)
    want = goodput(young_daly_interval(60.0, m), 60.0, m, 300.0)
    assert ft.checkpoint_restart_goodput(m, 60.0, 300.0) == pytest.approx(want)


def trainer_log() -> pd.DataFrame:
    """The good log with ``step_samples``: group 1 heals in step 4 and trains
    nothing, so its slot is queued and trained in step 5."""
    from clusterlab.fault_tolerance.train import advance, assign_batches

    rows, data = [], {"next": 0, "pending": []}
    for step, groups, _ in HISTORY:
        w = len(groups)
        slots = assign_batches(data, w)
        ordered = sorted(groups)
        trained = [r is not None for _, r in ordered]
        ranks = {g: i for i, (g, _) in enumerate(ordered)}
        everyone = sorted(s for b, t in zip(slots, trained, strict=True) if t
                          for s in (2 * b, 2 * b + 1))  # fmt: skip
        for g, r in groups:
            b = slots[ranks[g]]
            own = [] if r is None else [2 * b, 2 * b + 1]
            rows.append(
                dict(step=step, replica_id=g, step_samples=everyone, samples=own)
            )
        data = advance(data, w, trained)
    return pd.DataFrame(rows)


def test_exactly_once_reads_the_steps_samples_of_a_trainers_log():
    log = trainer_log()
    assert check.exactly_once(log)
    # A step a group did not commit is still in its peers' step_samples.
    assert check.exactly_once(log[~((log["step"] == 2) & (log["replica_id"] == "1"))])
    split = log.copy()
    split.at[0, "step_samples"] = [0, 1]
    with pytest.raises(AssertionError, match="disagree on the samples"):
        check.exactly_once(split)
    stray = log.copy()
    stray.at[0, "samples"] = [999]
    with pytest.raises(AssertionError, match="does not include"):
        check.exactly_once(stray)
    again = log.copy()
    last = again["step"] == again["step"].max()
    again.loc[last, "step_samples"] = again.loc[last, "step_samples"].map(
        lambda s: [*s, 0]
    )
    with pytest.raises(AssertionError, match="trained twice"):
        check.exactly_once(again)


def test_the_data_position_queues_a_healing_groups_batch():
    from clusterlab.fault_tolerance.train import advance, assign_batches

    data = {"next": 6, "pending": []}
    assert assign_batches(data, 3) == [6, 7, 8]
    data = advance(data, 3, [True, False, True])
    assert data == {"next": 9, "pending": [7]}
    assert assign_batches(data, 2) == [7, 9]
    assert advance(data, 2, [True, True]) == {"next": 10, "pending": []}
    with pytest.raises(ValueError, match="trained has 1 entries"):
        advance(data, 2, [True])
    with pytest.raises(ValueError, match="quorum_size"):
        assign_batches(data, 0)


def test_every_batch_is_trained_once_over_random_histories():
    from clusterlab.fault_tolerance.train import advance, assign_batches

    rng = np.random.default_rng(0)
    for _ in range(200):
        data, seen = {"next": 0, "pending": []}, []
        for _ in range(int(rng.integers(1, 30))):
            w = int(rng.integers(1, 6))
            slots = assign_batches(data, w)
            trained = list(rng.random(w) > 0.2)
            seen += [b for b, t in zip(slots, trained, strict=True) if t]
            data = advance(data, w, trained)
        assert len(seen) == len(set(seen))
        assert sorted(seen + data["pending"]) == list(range(data["next"]))
