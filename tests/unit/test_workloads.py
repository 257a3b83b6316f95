"""The workload kernels: measured traits, the verdicts they give, and wrong inputs."""

from dataclasses import replace

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.decide.check import SOURCE_TABLE
from clusterlab.models.decide import measured_workloads, recommend, reference_hardware
from clusterlab.roofline.workloads import (
    WORKLOAD_KERNELS,
    run_kernel,
    traits_from_phases,
)

HW = reference_hardware()


@pytest.fixture(scope="module")
def traits():
    return cl.roofline.workloads.measure_traits()


def test_every_kernel_times_its_phases_and_counts_its_work(traits):
    assert list(traits["workload"]) == list(WORKLOAD_KERNELS) == list(SOURCE_TABLE)
    phases = traits[["io_s", "dense_s", "stream_s", "branchy_s"]].sum(axis=1)
    assert ((phases - traits["time_s"]).abs() < 1e-9).all()
    assert (traits["bytes"] > 0).all() and (traits["time_s"] > 0).all()
    for col in ("io_fraction", "dense_fraction", "branch_fraction"):
        assert traits[col].between(0, 1).all(), col


def test_dense_kernels_measure_dense_and_record_kernels_branchy(traits):
    t = traits.set_index("workload")
    for name in ("LLM training (70B)", "batch inference (70B)"):
        assert t.loc[name, "dense_fraction"] > 0.5 and t.loc[name, "intensity"] > 1
        assert not t.loc[name, "branching"]
    for name in ("web serving", "key-value store (Redis)", "web crawler"):
        assert t.loc[name, "dense_fraction"] == 0 and t.loc[name, "intensity"] < 1
        assert t.loc[name, "branching"]
    assert t.loc["key-value store (Redis)", "messages"] > 0  # replication sends


def test_the_measured_traits_give_the_tables_answers(traits):
    table = cl.decide.check.verdicts_match_table(
        traits, HW, cl.roofline.workloads.measure_traits
    )
    assert set(table["workload"]) == set(SOURCE_TABLE)


def _mutated(traits, name, **values):
    t = traits.copy()
    for col, v in values.items():
        t.loc[t["workload"] == name, col] = v
    return t


def test_the_verdicts_fail_when_a_branchy_kernel_is_measured_dense(traits):
    wrong = _mutated(
        traits,
        "web crawler",
        dense_fraction=1.0,
        io_fraction=0.0,
        branch_fraction=0.0,
        branching=False,
        intensity=100.0,
    )
    assert recommend(measured_workloads(wrong)["web crawler"], HW)["choice"] != (
        "distributed CPU"
    )
    with pytest.raises(AssertionError, match="web crawler: measured"):
        cl.decide.check.verdicts_match_table(wrong, HW)
    calls = []  # a wrong kernel stays wrong however often it is measured
    with pytest.raises(AssertionError, match="web crawler"):
        cl.decide.check.verdicts_match_table(
            wrong, HW, lambda: calls.append(1) or wrong
        )
    assert len(calls) == 2


def test_the_verdicts_fail_when_the_pipelines_cpu_work_is_skipped(traits):
    wrong = _mutated(
        traits, "preprocessing + training", io_fraction=0.0, branch_fraction=0.0
    )
    with pytest.raises(AssertionError, match="preprocessing \\+ training"):
        cl.decide.check.verdicts_match_table(wrong, HW)


def test_the_verdicts_fail_when_training_is_measured_io_bound(traits):
    wrong = _mutated(traits, "LLM training (70B)", io_fraction=0.6)
    with pytest.raises(AssertionError, match="LLM training"):
        cl.decide.check.verdicts_match_table(wrong, HW)


def test_consistency_adds_nothing_to_the_measured_kv_store(traits):
    ws = measured_workloads(traits)
    assert cl.decide.check.consistency_flag_decides(ws, HW) == {}


def test_the_consistency_check_fails_when_the_kv_store_is_measured_dense(traits):
    wrong = _mutated(
        traits,
        "key-value store (Redis)",
        dense_fraction=1.0,
        io_fraction=0.0,
        branch_fraction=0.0,
        branching=False,
        intensity=100.0,
    )
    ws = measured_workloads(wrong)
    kv = "key-value store (Redis)"
    ws[kv] = replace(ws[kv], latency_bound=False)  # only consistency says CPU
    flips = cl.decide.check.consistency_flag_decides(ws, HW)
    assert flips == {"key-value store (Redis)": ("both", "GPU cluster")}


def test_traits_from_hand_made_phases():
    run = {"time_s": 4.0, "io_s": 1.0, "dense_s": 1.0, "stream_s": 1.0}
    t = traits_from_phases({**run, "branchy_s": 1.0, "flop": 8.0, "bytes": 2.0})
    assert t["io_fraction"] == 0.25 and t["dense_fraction"] == pytest.approx(1 / 3)
    assert t["branch_fraction"] == 0.5 and t["branching"] and t["intensity"] == 4.0
    with pytest.raises(ValueError, match="time_s"):
        traits_from_phases({**run, "time_s": 0.0, "branchy_s": 0.0})


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="name="):
        run_kernel("nope")
    with pytest.raises(ValueError, match="records"):
        run_kernel("web serving", records=0)
    with pytest.raises(ValueError, match="lacks the columns"):
        measured_workloads(pd.DataFrame({"workload": ["web serving"]}))
    with pytest.raises(ValueError, match="traits="):
        cl.decide.check.verdicts_match_table(42, HW)
