"""The course kit: student and instructor editions of the labs, and the grader.

``python -m clusterlab.course`` writes the editions;
``python -m clusterlab.course.grade`` grades.

- ``__main__``: ``python -m clusterlab.course``: the student and instructor editions of
  the labs.
- ``editions``: The course kit: a student edition and an instructor edition of every
  lab.
- ``grade``: The course's autograder: run each submitted lab and collect its checks'
  results.
- ``grade_kernel``: Run one submitted notebook in a fresh kernel, cell by cell, for the
  autograder.
- ``grade_procs``: Stopping everything a graded notebook started, and nothing else.
- ``grade_report``: The autograder's verdicts and reports: one row per student, lab and
  check.
"""

from clusterlab.core.lazy import submodules

__getattr__, __dir__ = submodules(__name__, __path__)
