"""Each injected fault is found by the tool the debugging lab teaches.

Real gloo jobs with one fault each, a 2 s timeout, every rank stopped at the
end: the timeout reports the hang, stack dumps (py-spy, else faulthandler)
single out the culprit where its fault says, DETAIL names the mismatch, and the
per-rank timings of a real loop flag the slow rank.
"""

import pytest

from clusterlab.debugging import evidence as C
from clusterlab.debugging.faults import FaultyJob, run_faulty_job
from clusterlab.debugging.timings import run_step_timings

pytestmark = pytest.mark.dist
TIMEOUT_S = 2.0


def test_a_rank_stuck_in_its_loader_is_found_by_its_stack(no_leftover_processes):
    job = run_faulty_job("loader", 3, culprit=2, timeout_s=TIMEOUT_S, dump=True)
    C.check_timeout_detected(job, TIMEOUT_S)
    groups = C.check_fault_found(job)
    assert groups["top"].tolist() == ["all_reduce", "load_batch"]


def test_the_faulthandler_fallback_finds_the_rank_that_skipped(no_leftover_processes):
    job = run_faulty_job(
        "skip", 3, culprit=1, timeout_s=TIMEOUT_S, dump=True, method="faulthandler"
    )
    assert job.dump_method == "faulthandler"
    C.check_fault_found(job)  # rank 1 waits in the barrier, the others in all_reduce


def test_detail_names_the_mismatched_op_at_once(no_leftover_processes):
    job = run_faulty_job("mismatch_op", 2, timeout_s=TIMEOUT_S, debug="DETAIL")
    C.check_detail_names_mismatch(job, "Op type")
    # an error at the collective, not the timeout: no rank says it timed out
    # (the launch's wall time is no witness: on a busy machine starting two
    # ranks took 2.4 s, longer than the timeout, with the mismatch found at once)
    assert not any("timed out" in e.lower() for e in job.rank_errors.values())
    import torch.distributed as dist

    assert dist.get_debug_level() == dist.DebugLevel.OFF  # restored


def test_the_deadlocked_pair_waits_in_recv(no_leftover_processes):
    job = run_faulty_job("deadlock", 3, culprit=1, timeout_s=TIMEOUT_S, dump=True)
    C.check_fault_found(job)


def test_step_timings_flag_the_slow_rank(no_leftover_processes):
    timings = run_step_timings(3, slow_rank=1, slow_factor=2.5, steps=6, base_s=0.02)
    C.check_slow_rank_found(timings, 1)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="fault"):
        run_faulty_job("gremlins")
    with pytest.raises(ValueError, match="culprit"):
        run_faulty_job("loader", 2, culprit=2)
    with pytest.raises(ValueError, match="timeout_s"):
        run_faulty_job("loader", 2, timeout_s=1.0, dump=True)


def test_a_job_that_ends_ends_the_wait_for_dumps(no_leftover_processes):
    job = run_faulty_job("none", 2, timeout_s=TIMEOUT_S, dump=True)
    assert job.ok and job.elapsed_s < TIMEOUT_S + 1  # no wait for a hang


def test_the_fault_check_fails_when_no_dumps_were_taken():
    job = FaultyJob("loader", 1, 2, False, "", [], {}, 1.0, note="py-spy refused")
    with pytest.raises(AssertionError, match="no stack dumps"):
        C.check_fault_found(job)
