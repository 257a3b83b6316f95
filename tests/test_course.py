"""The course kit: the student edition holds no answer, the instructor edition all.

``make course`` runs ``python -m clusterlab.course``; these tests run it too, on
every lab, and read both editions back.
"""

import ast
import re
import subprocess
import sys

import nbformat
import pytest

from book_helpers import ROOT
from clusterlab.course import editions as course

LABS = sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
TEMPLATE = ROOT / "labs" / "_template.ipynb"
# Found independently of the tool under test: a folded block whose summary
# says Answer, as the labs write them.
ANSWER = re.compile(r"<details>\s*<summary>\s*Answer.*?</details>", re.S | re.I)


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("course")
    result = subprocess.run(
        [sys.executable, "-m", "clusterlab.course", "--labs", "labs", "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def _read(path):
    return nbformat.read(path, as_version=4)


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _lines(text, min_chars=12):
    """Lines of code or prose, comments dropped, long enough to be telling."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return {line for line in lines if len(line) >= min_chars}


def _solution_lines() -> dict[str, set[str]]:
    """The body lines of every reference solution in ``clusterlab``."""
    found = {}
    for path in sorted((ROOT / "src" / "clusterlab" / "solutions").glob("*.py")):
        source = path.read_text()
        for fn in ast.parse(source).body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            body = fn.body[1:] if ast.get_docstring(fn) else fn.body
            text = "\n".join(ast.get_source_segment(source, s) for s in body)
            found[fn.name] = _lines(text)
    return found


def test_both_editions_of_every_lab_are_written(kit):
    for edition in ("student", "instructor"):
        names = sorted(p.name for p in (kit / edition).glob("*.ipynb"))
        assert names == [p.name for p in LABS], edition


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_the_student_edition_holds_no_answer(kit, lab):
    original, student = _read(lab), _read(kit / "student" / lab.name)
    text = "\n".join(c.source for c in student.cells)
    allowed = set().union(*(_lines(c.source) for c in _code(original)))
    for name, lines in _solution_lines().items():
        leaked = (lines - allowed) & _lines(text)
        assert not leaked, f"{name}'s reference code is in the student edition"
    blocks = [b for c in original.cells for b in ANSWER.findall(c.source)]
    for block in blocks:
        leaked = (_lines(block, 20) - allowed) & _lines(text, 20)
        assert not leaked, f"folded answer text left: {sorted(leaked)[:2]}"
    assert not ANSWER.search(text)
    assert "<details" not in text or "Answer" not in text


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_the_student_edition_keeps_setup_checks_and_stubs(kit, lab):
    original, student = _read(lab), _read(kit / "student" / lab.name)
    setup = _code(_read(TEMPLATE))[0].source
    assert _code(student)[0].source == setup  # still opens and installs on Colab
    assert [c.source for c in _code(student)] == [c.source for c in _code(original)]
    calls = [n for c in _code(student) for n in course.check_calls(c.source)]
    assert calls == [n for c in _code(original) for n in course.check_calls(c.source)]
    assert all(not c.outputs and c.execution_count is None for c in _code(student))
    headings = [
        ln for c in original.cells for ln in c.source.splitlines() if ln.startswith("#")
    ]
    kept = [
        ln for c in student.cells for ln in c.source.splitlines() if ln.startswith("#")
    ]
    assert kept == headings  # only the answers went


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_the_instructor_edition_fills_every_exercise(kit, lab):
    original, teacher = _read(lab), _read(kit / "instructor" / lab.name)
    assert teacher.cells[0].source == course.INSTRUCTOR_NOTE
    assert not [n for c in _code(teacher) for n in course.stub_names(c.source)]
    calls = [n for c in _code(teacher) for n in course.check_calls(c.source)]
    assert calls == [n for c in _code(original) for n in course.check_calls(c.source)]
    for before, after in zip(_code(original), _code(teacher), strict=True):
        if course.stub_names(before.source):
            assert "solution" in after.metadata.get("tags", []), before.source[:60]
        else:
            assert after.source == before.source
    text = "\n".join(c.source for c in teacher.cells)
    assert "<details>" not in text or not ANSWER.search(text)  # all opened
    # The round trip: a student edition made from it has no answer either.
    again = course.student_edition(teacher)
    assert not ANSWER.search("\n".join(c.source for c in again.cells))
    assert not [
        c
        for c in _code(again)
        if "solution" in c.metadata.get("tags", []) and not course.stub_names(c.source)
    ]


def test_the_student_edition_tells_ai_assistants_not_to_solve_the_exercises(kit):
    policy = (kit / "student" / course.AGENTS_FILE).read_text()
    assert policy == course.STUDENT_AGENTS
    lowered = " ".join(policy.lower().split())
    for says in ("explain", "ask questions back", "book's chapter", "do not"):
        assert says in lowered, says
    assert "write, complete or correct the code of an exercise" in lowered
    assert not (kit / "instructor" / course.AGENTS_FILE).exists()


def test_a_stub_class_is_an_exercise_in_both_editions():
    nb = nbformat.v4.new_notebook()
    stub = (
        "class Wrapper:\n"
        "    def __init__(self, x):\n"
        "        raise NotImplementedError\n\n"
        "    def value(self):\n"
        "        return 1\n\n\n"
        "cl.topic.check.Wrapper(Wrapper)"
    )
    answer = (
        "<details>\n<summary>Answer</summary>\n\n```python\n"
        "class Wrapper:\n"
        "    def __init__(self, x):\n"
        "        self.x = x\n\n"
        "    def value(self):\n"
        "        return self.x\n"
        "```\n</details>"
    )
    nb.cells = [nbformat.v4.new_code_cell(stub), nbformat.v4.new_markdown_cell(answer)]
    assert course.stub_names(stub) == ["Wrapper"]
    teacher = course.instructor_edition(nb)
    filled = teacher.cells[1].source
    assert "self.x = x" in filled and filled.endswith("cl.topic.check.Wrapper(Wrapper)")
    assert course.stub_names(filled) == []
    again = _code(course.student_edition(teacher))[0].source
    assert course.stub_names(again) == ["Wrapper"] and "self.x" not in again


def test_the_template_works_too():
    template = _read(TEMPLATE)
    student = course.student_edition(template)
    assert not ANSWER.search("\n".join(c.source for c in student.cells))
    assert "## Explore" in "\n".join(c.source for c in student.cells)
    teacher = course.instructor_edition(template)  # no reference answer: stub kept
    assert course.stub_names(_code(teacher)[-1].source) == ["exercise"]


def test_solution_markers_and_tags_are_honoured():
    nb = nbformat.v4.new_notebook()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    tagged = code(
        'def f(x):\n    """Twice x."""\n    y = 2 * x\n    return y\n\n\n'
        "cl.topic.check.f(f)"
    )
    tagged.metadata["tags"] = ["solution"]
    answer = md("The answer is 42.")
    answer.metadata["tags"] = ["answer"]
    nb.cells = [
        code(
            "def g(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION"
        ),
        tagged,
        answer,
        md("Before.\n<!-- BEGIN ANSWER -->\nSecret: 42.\n<!-- END ANSWER -->\nAfter."),
        md("<details><summary><b>Solution</b></summary>\n\n`x = 1`\n</details>"),
        md("<details><summary>Hint</summary>\n\nTry x = 1.\n</details>"),
    ]
    student = course.student_edition(nb)
    sources = [c.source for c in student.cells]
    assert sources[0] == "def g(x):\n    raise NotImplementedError"
    assert sources[1].startswith('def f(x):\n    """Twice x."""\n    raise NotImpl')
    assert sources[1].endswith("cl.topic.check.f(f)")
    assert sources[2] == "Before.\n\nAfter."
    assert sources[3].startswith("<details><summary>Hint")  # a hint is no answer
    assert len(sources) == 4


def test_answer_blocks_handle_nesting():
    text = (
        "A\n<details><summary>Answer</summary>\n<details><summary>More</summary>"
        "x</details>\ny\n</details>\nB"
    )
    (span,) = course.answer_blocks(text)
    assert text[: span[0]] == "A\n" and text[span[1] :] == "\nB"
