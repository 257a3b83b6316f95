"""Debugging tools without a process group: stack grouping, rules, checks, charts."""

import math

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.debugging import evidence as C
from clusterlab.debugging.answer import diagnose_hung_job
from clusterlab.debugging.check import (
    FAULT_CAUSES,
    hung_job_diagnosis,
    synthetic_hung_job,
)
from clusterlab.debugging.faults import FaultyJob
from clusterlab.debugging.profile import hidden_fraction, step_events
from clusterlab.debugging.stacks import (
    format_current_frames,
    group_stacks,
    odd_ranks,
    parse_stack,
)
from clusterlab.debugging.timings import outliers, simulated_step_timings, slow_ranks

PYSPY = """Process 16151: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 16151 (idle): "Thread-1 (<lambda>)"
    all_reduce (torch/distributed/distributed_c10d.py:3252)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)
    w (dbg.py:10)
    _rank_main (clusterlab/core/rank_main.py:69)
    BaseProcess.run (multiprocessing/process.py:108)
"""
FAULTHANDLER = """Current thread 0x00007fc062bff6c0 (most recent call first):
  File "/v/torch/distributed/distributed_c10d.py", line 3250 in all_reduce
  File "/v/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/tmp/dbg.py", line 10 in w
  File "/src/clusterlab/core/rank_main.py", line 69 in _rank_main
  File "/usr/lib/python3.11/multiprocessing/process.py", line 108 in run
"""
LOADER = PYSPY.replace(
    "all_reduce (torch/distributed/distributed_c10d.py:3252)\n"
    "    _exception_logger.<locals>.wrapper (torch/distributed/"
    "c10d_logger.py:83)",
    "load_batch (dbg.py:4)",
)


def test_py_spy_and_faulthandler_dumps_parse_alike_and_group_together():
    a, b = parse_stack(PYSPY), parse_stack(FAULTHANDLER)
    assert [f["func"] for f in a] == ["all_reduce", "wrapper", "w"]
    assert [(f["func"], f["file"]) for f in a] == [(f["func"], f["file"]) for f in b]
    groups = group_stacks({0: PYSPY, 1: FAULTHANDLER, 2: LOADER, 3: PYSPY})
    assert groups["ranks"].tolist() == [(0, 1, 3), (2,)]
    assert groups["top"].tolist() == ["all_reduce", "load_batch"]
    assert odd_ranks(groups) == [2]


def test_odd_ranks_is_empty_without_a_majority():
    assert odd_ranks(group_stacks({0: PYSPY, 1: PYSPY})) == []
    assert odd_ranks(group_stacks({0: PYSPY, 1: LOADER})) == []


def test_the_pure_python_dump_parses_too():
    frames = parse_stack(format_current_frames())
    assert frames and frames[0]["func"] == "format_current_frames"


def test_bad_dumps_raise_value_errors():
    with pytest.raises(ValueError, match="dumps"):
        group_stacks({})
    with pytest.raises(ValueError, match="text"):
        parse_stack(None)


def test_outlier_rule_flags_only_beyond_the_ratio():
    assert outliers({0: 1.0, 1: 1.1, 2: 1.6, 3: 0.9}, higher_is_worse=True) == [2]
    assert outliers({0: 10.0, 1: 9.0, 2: 5.0, 3: 11.0}, higher_is_worse=False) == [2]
    assert outliers({0: 1.0, 1: 1.4}, higher_is_worse=True) == []
    with pytest.raises(ValueError, match="ratio"):
        outliers({0: 1.0}, higher_is_worse=True, ratio=1.0)
    with pytest.raises(ValueError, match="values"):
        outliers({0: -1.0}, higher_is_worse=True)


def test_slow_rank_check_passes_on_a_slow_rank_and_on_none():
    slow = simulated_step_timings(16, slow_rank=5, slow_factor=2.0, cv=0.1)
    assert C.check_slow_rank_found(slow, 5)["slow_ranks"] == [5]
    calm = simulated_step_timings(16, slow_rank=None, cv=0.1)
    assert C.check_slow_rank_found(calm, None)["slow_ranks"] == []


def test_slow_rank_check_fails_when_the_wrong_rank_or_no_slowdown():
    slow = simulated_step_timings(16, slow_rank=5, slow_factor=2.0, cv=0.1)
    with pytest.raises(AssertionError, match="expected"):
        C.check_slow_rank_found(slow, 4)
    mild = simulated_step_timings(16, slow_rank=5, slow_factor=1.1, cv=0.1)
    with pytest.raises(AssertionError, match="expected"):
        C.check_slow_rank_found(mild, 5)
    assert slow_ranks(mild) == []


def _job(fault, culprit, dumps, world_size=4, **kw):
    return FaultyJob(fault, culprit, world_size, False, "", [], {}, 1.0, dumps, **kw)


def test_fault_found_check_fails_when_the_culprit_or_the_place_is_wrong():
    dumps = {0: PYSPY, 1: PYSPY, 2: LOADER, 3: PYSPY}
    assert len(C.check_fault_found(_job("loader", 2, dumps))) == 2
    with pytest.raises(AssertionError, match="not the culprit"):
        C.check_fault_found(_job("loader", 1, dumps))
    with pytest.raises(AssertionError, match="expected 'barrier'"):
        C.check_fault_found(_job("skip", 2, dumps))
    with pytest.raises(AssertionError, match="no stack dumps"):
        C.check_fault_found(_job("loader", 2, {}))


def test_detail_check_fails_when_no_mismatch_is_named():
    named = {
        r: "Detected mismatch between collectives ... Op type: A vs B" for r in (0, 1)
    }
    C.check_detail_names_mismatch(
        FaultyJob("mismatch_op", 1, 2, False, "", [], named, 1.0), "Op type"
    )
    timeout = {r: "Timed out waiting 2000ms for recv" for r in (0, 1)}
    with pytest.raises(AssertionError, match="did not name"):
        C.check_detail_names_mismatch(
            FaultyJob("mismatch_op", 1, 2, False, "", [], timeout, 1.0), "Op type"
        )


def test_timeout_check_fails_when_the_job_finished_or_crashed():
    hung = FaultyJob("loader", 1, 2, False, "x: Timed out waiting 2000ms", [], {}, 3.0)
    C.check_timeout_detected(hung, 2.0)
    with pytest.raises(AssertionError, match="finished"):
        C.check_timeout_detected(FaultyJob("none", 1, 2, True, "", [], {}, 1.0), 2.0)
    with pytest.raises(AssertionError, match="not by a timeout"):
        C.check_timeout_detected(
            FaultyJob("mismatch_shape", 1, 2, False, "died", [], {}, 1.0), 2.0
        )


def _events(comm_start_ms):
    raw = [
        ("DistributedDataParallel.forward", 0, 10_000),
        ("autograd::engine::evaluate_function: AddmmBackward0", 10_000, 20_000),
        (
            "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
            20_000,
            21_000,
        ),
        ("autograd::engine::evaluate_function: AddmmBackward0", 21_000, 30_000),
        ("gloo:all_reduce", comm_start_ms * 1000, comm_start_ms * 1000 + 4_000),
        ("aten::mm", 1_000, 2_000),
    ]
    return step_events(raw, rank=0)


def test_hidden_fraction_and_the_overlap_check():
    early, late = _events(22), _events(31)
    assert early["lane"].tolist().count("compute") == 3  # AccumulateGrad left out
    assert math.isclose(hidden_fraction(early), 1.0)
    assert hidden_fraction(late) == 0.0
    C.check_overlap_shown(early, late)


def test_overlap_check_fails_when_small_buckets_wait_for_the_end():
    with pytest.raises(AssertionError, match="small buckets"):
        C.check_overlap_shown(_events(31), _events(31))
    with pytest.raises(AssertionError, match="one bucket"):
        C.check_overlap_shown(_events(22), _events(22))


def test_exercise_check_passes_the_solution_and_fails_wrong_answers(capsys):
    assert hung_job_diagnosis(diagnose_hung_job)
    assert "hung jobs diagnosed" in capsys.readouterr().out

    def stub(groups, timings):
        raise NotImplementedError

    assert hung_job_diagnosis(stub) is False

    def always_loader(groups, timings):
        return odd_ranks(groups)[0], "data_loader"

    with pytest.raises(AssertionError, match="cause"):
        hung_job_diagnosis(always_loader)

    def rank_zero(groups, timings):
        return 0, "data_loader"

    with pytest.raises(AssertionError, match="not the culprit"):
        hung_job_diagnosis(rank_zero)


def test_synthetic_jobs_have_their_culprit_as_the_odd_rank():
    for fault in FAULT_CAUSES:
        groups, timings = synthetic_hung_job(fault, 2)
        assert odd_ranks(groups) == [2]
        assert set(timings.columns) >= {"rank", "step", "comm_s"}
    with pytest.raises(ValueError, match="fault"):
        synthetic_hung_job("gremlins", 1)


def test_charts_draw_and_reject_bad_frames():
    timings = simulated_step_timings(8, slow_rank=2, slow_factor=2.0, steps=5)
    spec = cl.debugging.chart.step_times_chart(timings, [2], 0.15).to_dict()
    assert "layer" in spec
    ev = _events(22)
    assert cl.debugging.chart.step_timeline_chart(ev).to_dict()["mark"]["type"] == "bar"
    two = pd.concat([ev.assign(setting="a"), ev.assign(setting="b")])
    assert "facet" in cl.debugging.chart.step_timeline_chart(two).to_dict()
    groups = group_stacks({0: PYSPY, 1: LOADER, 2: PYSPY})
    assert (
        cl.debugging.chart.stack_groups_chart(groups).to_dict()["mark"]["type"] == "bar"
    )
    with pytest.raises(ValueError, match="lacks"):
        cl.debugging.chart.step_times_chart(pd.DataFrame({"rank": [0]}))


def test_widget_view_names_the_slow_rank():
    chart, text = cl.debugging.widget.slow_rank_view(
        dict(world_size=12, slow_factor=2.0, cv=0.1, ratio=1.5, steps=10)
    )
    assert "flags [4]" in text and chart.to_dict()


def test_a_py_spy_dump_comes_back_without_terminal_colours(tmp_path):
    """py-spy colours its dump even into a pipe (yellow pids, green names, which
    a light page cannot show legibly): the dump the lab prints has no colour codes."""
    from clusterlab.debugging import faults

    fake = tmp_path / "py-spy"
    fake.write_text(
        "#!/bin/sh\n"
        "printf 'Thread \\033[1;33m27079\\033[0m (idle)\\n"
        "    \\033[32mload_batch\\033[0m (ranks.py:12)\\n'\n"
    )
    fake.chmod(0o755)
    text, why = faults._py_spy_dump(str(fake), 1)
    assert why == ""
    assert "\x1b" not in text
    assert text.splitlines() == ["Thread 27079 (idle)", "    load_batch (ranks.py:12)"]
