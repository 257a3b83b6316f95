"""Self-check of the debugging lab's exercise: name the culprit of a hung job.

``hung_job_diagnosis(fn)`` calls ``fn(groups, timings)`` on hung four-rank jobs
whose answer is known and expects ``(rank, cause)`` back, ``cause`` one of
``CAUSES``. The jobs are built here, in the layout ``py-spy dump`` prints, one
per cause and culprit; the lab's own real job can be added with ``job=``.

``mystery_case`` draws the lab's hidden fault and culprit for one student, from
the student's name and the course's seed, so that students compare methods,
not answers. The autograder names the student (``STUDENT_ENV``) of each graded
notebook, so the job in a graded run is the one drawn for that student, and
``hung_job_diagnosis`` refuses another.
"""

from __future__ import annotations

import getpass
import hashlib
import os
from typing import NamedTuple

import numpy as np
import pandas as pd

from clusterlab.core.checks import not_attempted, passed
from clusterlab.debugging.stacks import group_stacks

#: What the exercise asks to tell apart.
CAUSES = ("data_loader", "skipped_collective", "mismatched_collective")


#: The injected fault of ``cl.debugging.ranks`` behind each cause.
FAULT_CAUSES = {
    "loader": "data_loader",
    "skip": "skipped_collective",
    "mismatch_op": "mismatched_collective",
}


#: Who the mystery is drawn for; the autograder sets it to the student's folder.
STUDENT_ENV = "CLUSTERLAB_STUDENT"
#: The course's seed (one per course or semester, set by the instructor).
COURSE_SEED_ENV = "CLUSTERLAB_COURSE_SEED"
#: The culprits a mystery may have: any rank of the four but rank 0.
MYSTERY_CULPRITS = (1, 2, 3)


class MysteryCase(NamedTuple):
    """The hidden fault drawn for one student."""

    student: str
    course_seed: str
    fault: str
    culprit: int


def mystery_case(student: str | None = None, course_seed=None) -> MysteryCase:
    """The fault and culprit of the lab's mystery job for one student.

    The draw is a SHA-256 hash of the course seed and the name (trimmed, case
    folded), so it is the same on every machine and in the autograder, and
    differs from student to student (9 cases: 3 faults, 3 culprits).

    Args:
        student: the student's name; ``$CLUSTERLAB_STUDENT`` wins when set (the
            autograder sets it), then this, then the login name.
        course_seed: the course's seed; ``$CLUSTERLAB_COURSE_SEED`` wins when
            set, then this, then ``"0"``.

    Returns:
        ``MysteryCase(student, course_seed, fault, culprit)``.
    """
    name = os.environ.get(STUDENT_ENV) or student or getpass.getuser()
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"student={name!r} must be a non-empty name")
    seed = os.environ.get(COURSE_SEED_ENV) or course_seed
    seed = "0" if seed is None else str(seed)
    key = f"{seed}\0{name.strip().casefold()}".encode()
    draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    cases = [(f, c) for f in sorted(FAULT_CAUSES) for c in MYSTERY_CULPRITS]
    fault, culprit = cases[draw % len(cases)]
    return MysteryCase(name.strip(), seed, fault, culprit)


_COLL = [
    ("_exception_logger.<locals>.wrapper", "torch/distributed/c10d_logger.py", 83),
    ("train_step", "train.py", 41),
    ("main", "train.py", 60),
]


_TOPS = {
    "normal": ("all_reduce", "torch/distributed/distributed_c10d.py", 3252),
    "loader": ("_wait_for_batch", "loader.py", 18),
    "skip": ("barrier", "torch/distributed/distributed_c10d.py", 4790),
    "mismatch_op": ("broadcast", "torch/distributed/distributed_c10d.py", 2790),
}


def _pyspy_text(pid: int, frames) -> str:
    lines = [
        f"Process {pid}: python train.py",
        "Python v3.11.7",
        "",
        f'Thread {pid} (idle): "MainThread"',
    ]
    lines += [f"    {f} ({p}:{n})" for f, p, n in frames]
    return "\n".join(lines) + "\n"


def synthetic_hung_job(fault: str, culprit: int, world_size: int = 4, steps: int = 3):
    """Dumps and timings of a hung job with a known culprit, built, not run.

    Args:
        fault: a key of ``FAULT_CAUSES``.
        culprit: the rank at fault, in [0, world_size).
        world_size: ranks, in [2, 64].
        steps: steps before the hang, in [2, 100].

    Returns:
        ``(groups, timings)`` as the exercise's function receives them.
    """
    if fault not in FAULT_CAUSES:
        raise ValueError(f"fault={fault!r} must be one of {sorted(FAULT_CAUSES)}")
    if not 2 <= world_size <= 64 or not 0 <= culprit < world_size:
        raise ValueError(f"culprit={culprit} must be in [0, world_size={world_size})")
    if not 2 <= steps <= 100:
        raise ValueError(f"steps={steps} must be in [2, 100]")
    dumps, rows = {}, []
    rng = np.random.default_rng(world_size * 1000 + culprit)
    for rank in range(world_size):
        odd = rank == culprit
        top = _TOPS[fault] if odd else _TOPS["normal"]
        frames = [top, *_COLL] if top[1].startswith("torch") else [top, *_COLL[1:]]
        if fault == "loader" and odd:
            frames = [top, ("load_batch", "loader.py", 30), *_COLL[1:]]
        dumps[rank] = _pyspy_text(1000 + rank, frames)
        done = steps - 1 + (1 if fault == "skip" and odd else 0)
        for step in range(steps + 1):
            finished = step < done
            rows.append(
                dict(
                    rank=rank,
                    step=step,
                    load_s=rng.uniform(0.01, 0.02)
                    * (3 if fault == "loader" and odd else 1)
                    if finished
                    else np.nan,
                    compute_s=rng.uniform(0.05, 0.06) if finished else np.nan,
                    comm_s=rng.uniform(0.001, 0.01) if finished else np.nan,
                )
            )
    return group_stacks(dumps), pd.DataFrame(rows)


def _cases():
    for i, fault in enumerate(FAULT_CAUSES):
        for culprit in (1 + i % 3, 3 - i % 2):
            yield fault, culprit, synthetic_hung_job(fault, culprit)


def hung_job_diagnosis(fn, job=None) -> bool:
    """Check ``fn(groups, timings) -> (rank, cause)`` on hung jobs with known answers.

    Args:
        fn: the reader's function.
        job: optionally the lab's real ``FaultyJob`` (with dumps and a fault of
            ``FAULT_CAUSES``), checked too.

    Returns:
        True when every answer is right; False while ``fn`` is a stub.

    Raises:
        AssertionError: with a hint, on the first wrong answer.
    """
    name = "hung_job_diagnosis"
    cases = list(_cases())
    if job is not None and os.environ.get(STUDENT_ENV):
        case = mystery_case()
        if (job.fault, job.culprit) != (case.fault, case.culprit):
            raise AssertionError(
                f"this job ({job.fault}, rank {job.culprit}) is not the mystery "
                f"drawn for {case.student!r}: run the lab's mystery_case() cell"
            )
    if job is not None:
        cases.append((job.fault, job.culprit, (group_stacks(job.dumps), job.timings)))
    for fault, culprit, (groups, timings) in cases:
        try:
            got = fn(groups.copy(), timings.copy())
        except NotImplementedError:
            return not_attempted(name)
        want = (culprit, FAULT_CAUSES[fault])
        if not isinstance(got, tuple | list) or len(got) != 2:
            raise AssertionError(
                f"return (rank, cause), e.g. (2, 'data_loader'); got {got!r}"
            )
        if int(got[0]) != culprit:
            raise AssertionError(
                f"rank {got[0]} is not the culprit: look for the rank whose stack "
                f"differs from the majority's (groups:\n{groups[['ranks', 'top']]})"
            )
        if got[1] != want[1]:
            raise AssertionError(
                f"rank {culprit} is right but the cause is {want[1]!r}, not {got[1]!r}:"
                " is its top frame a collective at all? If so, did it finish more "
                "steps than the others (the timings), or call another collective?"
            )
    return passed(name, f"{len(cases)} hung jobs diagnosed: culprit and cause")


__all__ = [
    "CAUSES",
    "COURSE_SEED_ENV",
    "FAULT_CAUSES",
    "STUDENT_ENV",
    "MysteryCase",
    "hung_job_diagnosis",
    "mystery_case",
    "synthetic_hung_job",
]
