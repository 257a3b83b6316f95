"""The experts lab's checks pass on right inputs and fail on wrong ones."""

import copy

import pandas as pd
import pytest
import torch

import clusterlab as cl
from clusterlab.experts import check as checks
from clusterlab.experts.layer import expert_slice, route
from clusterlab.experts.router import load_balancing_loss, train_router
from clusterlab.experts.workers import ep_reference, make_case

CASE = make_case([5, 0, 7], 6, 2, seed=2, unused_experts=(1,))


def _as_ranks(case):
    """What three correct ranks would return, cut from the one-process layer."""
    ref, start, out = ep_reference(case), 0, []
    for rank, t in enumerate(case["tokens_per_rank"]):
        rows = slice(start, start + t)
        experts = expert_slice(case["n_experts"], rank, len(case["tokens_per_rank"]))
        out.append(
            [
                {
                    "out": ref["out"][rows],
                    "grad_tokens": ref["grad_tokens"][rows],
                    "grad_logits": ref["grad_logits"][rows],
                    "grad_experts": [ref["grad_experts"][e] for e in experts],
                }
            ]
        )
        start += t
    return out


RANKS = _as_ranks(CASE)


def test_expert_layer_matches_one_process():
    table = checks.expert_layer_matches(RANKS, [CASE])
    assert table.loc[0, "grad_experts"] == 0


def test_expert_layer_fails_when_an_expert_gradient_is_off():
    results = copy.deepcopy(RANKS)
    results[2][0]["grad_experts"][0][0] = results[2][0]["grad_experts"][0][0] * 1.01
    with pytest.raises(AssertionError, match="grad_experts"):
        checks.expert_layer_matches(results, [CASE])


def test_expert_layer_fails_when_an_output_is_off():
    results = copy.deepcopy(RANKS)
    results[0][0]["out"] = results[0][0]["out"] + 1e-3
    with pytest.raises(AssertionError, match="out"):
        checks.expert_layer_matches(results, [CASE])


def test_alltoall_bytes_match_the_model():
    model = cl.models.moe.alltoall_bytes_per_rank
    sent = [model(t, 8, 2, 3, 4) for t in CASE["tokens_per_rank"]]
    table = checks.alltoall_bytes_match(sent, CASE)
    assert (table.rel == 0).all()


LARGE = make_case([256, 128, 256, 192], 8, 2, seed=4)  # the lab's last case


def test_alltoall_bytes_fails_when_the_model_counts_every_copy():
    model = cl.models.moe.alltoall_bytes_per_rank
    sent = [model(t, LARGE["hidden"], 2, 4, 4) for t in LARGE["tokens_per_rank"]]
    every_copy = lambda t, h, k, ep, b: t * h * k * b  # noqa: E731
    with pytest.raises(AssertionError, match="rank 0"):
        checks.alltoall_bytes_match(sent, LARGE, model=every_copy)


SWEEP = cl.experts.sim.busiest_expert_sweep(512, 2, (4, 16, 64), n_draws=40, seed=0)


def test_busiest_expert_matches_the_order_statistic():
    table = checks.busiest_expert_matches(SWEEP, 512, 2)
    assert (table.rel < 0.05).all()


def test_busiest_expert_fails_when_the_model_is_the_mean_load():
    def mean_only(tokens, n_experts, top_k):
        return {"max_load": tokens * top_k / n_experts}

    with pytest.raises(AssertionError, match="64 experts"):
        checks.busiest_expert_matches(SWEEP, 512, 2, model=mean_only)


WITH, WITHOUT = train_router(steps=15), train_router(steps=15, aux_weight=0)


def test_aux_loss_balances_the_router():
    got = checks.aux_loss_balances(WITH, WITHOUT)
    assert got["end"] < 0.5 * got["start"] and got["control_end"] == got["start"]


def test_aux_loss_fails_when_the_loss_is_off():
    with pytest.raises(AssertionError, match="not down"):
        checks.aux_loss_balances(WITHOUT, WITHOUT)


def test_aux_loss_fails_when_the_control_balances_too():
    with pytest.raises(AssertionError, match="without the loss"):
        checks.aux_loss_balances(WITH, WITH)


def test_balancing_loss_is_one_when_even_and_e_when_all_on_one():
    even = torch.zeros(8, 4)
    ids = torch.arange(8).remainder(4).reshape(8, 1)
    assert float(load_balancing_loss(even, ids)) == pytest.approx(1.0)
    sure = torch.full((8, 4), -1e9)
    sure[:, 0] = 0
    assert float(load_balancing_loss(sure, torch.zeros(8, 1, dtype=int))) == 4


def test_dropped_copies_solution_passes(capsys):
    assert cl.experts.check.dropped_copies(cl.experts.answer.dropped_copies) is True
    assert "\u2714 dropped_copies" in capsys.readouterr().out


def test_dropped_copies_stub_is_not_attempted(capsys):
    def stub(expert_ids, n_experts, capacity):
        raise NotImplementedError

    assert cl.experts.check.dropped_copies(stub) is False
    assert "not attempted" in capsys.readouterr().out


def test_dropped_copies_fails_when_underfull_experts_count_negative():
    def unclamped(expert_ids, n_experts, capacity):
        load = torch.bincount(expert_ids.reshape(-1), minlength=n_experts)
        return int((load - capacity).sum())

    with pytest.raises(AssertionError, match="max\\(0, load - capacity\\)"):
        cl.experts.check.dropped_copies(unclamped)


def test_charts_draw_their_tables_and_refuse_others():
    sweep = cl.models.moe.config_alltoall_sweep()
    spec = cl.experts.chart.ep_alltoall_chart(sweep).to_dict()
    assert {p["name"] for p in spec["params"]} == {"moe_model", "moe_tokens"}
    table = checks.busiest_expert_matches(SWEEP, 512, 2)
    cl.experts.chart.imbalance_chart(table).to_dict()
    cl.experts.chart.aux_loss_chart(pd.concat([WITH, WITHOUT])).to_dict()
    with pytest.raises(ValueError, match="layer_ms"):
        cl.experts.chart.ep_alltoall_chart(sweep.drop(columns="layer_ms"))


def test_widget_controls_redraw():
    pytest.importorskip("ipywidgets")
    box = cl.experts.widget.ep_alltoall_widget()
    menu, tokens, domain = box.children[0].children
    before = box.children[1].value
    domain.value = 72
    assert box.children[1].value != before
    menu.value = "Mixtral 8x7B"
    assert "EP 8" in box.children[1].value


def test_route_weights_sum_to_one():
    w, ids = route(torch.randn(5, 6), 2)
    assert torch.allclose(w.sum(1), torch.ones(5)) and ids.shape == (5, 2)


def test_alltoall_bytes_allow_routing_noise_and_no_more():
    # uniform within a few binomial deviations, not 15%
    case = LARGE
    model = cl.models.moe.alltoall_bytes_per_rank
    want = [model(t, case["hidden"], 2, 4, 4) for t in case["tokens_per_rank"]]
    copy = case["hidden"] * 4
    near = [w + 3 * copy for w in want]  # three copies more than uniform: routing
    assert len(checks.alltoall_bytes_match(near, case)) == 4
    own_share = [w * 4 / 3 for w in want]  # a model's slip: the rank's own share too
    with pytest.raises(AssertionError, match="standard deviations"):
        checks.alltoall_bytes_match(own_share, case)
    ten_percent = [w * 1.1 for w in want]  # passed the old flat 15% gate
    with pytest.raises(AssertionError, match="random routing allows"):
        checks.alltoall_bytes_match(ten_percent, case, sigmas=2.0)


def test_alltoall_bytes_counted_below_must_equal_the_plan():
    model = cl.models.moe.alltoall_bytes_per_rank
    sent = [model(t, 8, 2, 3, 4) for t in CASE["tokens_per_rank"]]
    assert len(checks.alltoall_bytes_match(sent, CASE, plan_bytes=sent)) == 3
    padded = [b + 32 for b in sent]  # the plan says less than the wire carried
    with pytest.raises(AssertionError, match="dispatch's plan"):
        checks.alltoall_bytes_match(sent, CASE, plan_bytes=padded)
    with pytest.raises(ValueError, match="sigmas"):
        checks.alltoall_bytes_match(sent, CASE, sigmas=0)


RANKS_SWEEP = cl.experts.sim.busiest_expert_sweep(
    1024, 2, (8, 32, 64), n_draws=40, seed=0, ep=8
)


def test_the_busiest_rank_sums_its_experts_and_the_model_agrees():
    table = checks.busiest_rank_matches(RANKS_SWEEP, 1024, 2)
    assert (table.rank_rel < 0.05).all()
    # a rank of 8 experts is nearer its mean than its busiest expert is
    row = table.set_index("n_experts").loc[64]
    assert row.rank_imbalance < row.imbalance - 0.2


def test_a_layer_priced_at_its_busiest_expert_fails_the_rank_check():
    moe = cl.models.moe

    def busiest_expert_pace(tokens, e, k, w):
        return {"max_load": moe.busiest_expert_load(tokens, e, k)["imbalance"]
                * tokens * k / w}  # fmt: skip

    with pytest.raises(AssertionError, match="busiest expert"):
        checks.busiest_rank_matches(RANKS_SWEEP, 1024, 2, model=busiest_expert_pace)
    with pytest.raises(ValueError, match="ep=W"):
        checks.busiest_rank_matches(SWEEP, 512, 2)
    with pytest.raises(ValueError, match="ep=3 must divide"):
        moe.busiest_rank_load(1024, 64, 2, 3)
    assert moe.busiest_rank_load(100, 8, 2, 1)["imbalance"] == 1.0
