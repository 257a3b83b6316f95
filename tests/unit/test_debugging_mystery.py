"""The debugging lab's mystery is drawn per student, and graded against that draw."""

import pandas as pd
import pytest

from clusterlab.course import grade
from clusterlab.debugging import check
from clusterlab.debugging.check import (
    COURSE_SEED_ENV,
    FAULT_CAUSES,
    STUDENT_ENV,
    hung_job_diagnosis,
    mystery_case,
    synthetic_hung_job,
)

NAMES = [f"student{i:02d}" for i in range(40)]


@pytest.fixture(autouse=True)
def _no_course_env(monkeypatch):
    monkeypatch.delenv(STUDENT_ENV, raising=False)
    monkeypatch.delenv(COURSE_SEED_ENV, raising=False)


def test_students_get_different_mysteries_and_each_the_same_one_every_time():
    cases = {n: mystery_case(n, course_seed="fall") for n in NAMES}
    drawn = {(c.fault, c.culprit) for c in cases.values()}
    assert len(drawn) == 9  # every fault and culprit is drawn for someone
    assert {f for f, _ in drawn} == set(FAULT_CAUSES)
    assert mystery_case(" Student07 ", "fall")[2:] == cases["student07"][2:]
    # a fixed value: the draw must not change with Python's hash seed or platform
    assert mystery_case("ada", "fall")[2:] == ("skip", 1)


def test_the_course_seed_changes_the_draws():
    a = [mystery_case(n, course_seed="fall")[2:] for n in NAMES]
    b = [mystery_case(n, course_seed="spring")[2:] for n in NAMES]
    assert a != b


def test_the_autograders_name_and_seed_win(monkeypatch):
    monkeypatch.setenv(STUDENT_ENV, "grace")
    monkeypatch.setenv(COURSE_SEED_ENV, "fall")
    assert mystery_case("someone else", course_seed=1) == mystery_case("grace", "fall")
    assert mystery_case().student == "grace"


def test_a_blank_name_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="student="):
        mystery_case("   ")


class _Job:
    def __init__(self, fault, culprit):
        self.fault, self.culprit = fault, culprit
        groups, self.timings = synthetic_hung_job(fault, culprit)
        self.dumps = {}
        self._groups = groups


def _answer(groups, timings):
    from clusterlab.debugging.answer import diagnose_hung_job

    return diagnose_hung_job(groups, timings)


def test_a_graded_run_refuses_a_job_that_is_not_the_students(monkeypatch):
    monkeypatch.setenv(STUDENT_ENV, "grace")
    case = mystery_case()
    other = next(
        (f, c)
        for f in sorted(FAULT_CAUSES)
        for c in check.MYSTERY_CULPRITS
        if (f, c) != (case.fault, case.culprit)
    )
    real = check.group_stacks  # the built jobs below carry their groups already
    monkeypatch.setattr(
        check, "group_stacks", lambda d: d if isinstance(d, pd.DataFrame) else real(d)
    )
    job = _Job(*other)
    job.dumps = job._groups
    with pytest.raises(AssertionError, match="not the mystery drawn for 'grace'"):
        hung_job_diagnosis(_answer, job=job)
    mine = _Job(case.fault, case.culprit)
    mine.dumps = mine._groups
    assert hung_job_diagnosis(_answer, job=mine)


def test_the_grader_and_the_lab_name_the_student_alike():
    assert grade.STUDENT_ENV == STUDENT_ENV
