"""Every lab has the template's anatomy, and every Predict asks before it tells.

The sections, in this order: learning objectives, predict, run (or measure, or
simulate), compare (a heading that starts with Compare or Check, or that sets a
measurement against something), exercise, explore, summary. Under each heading
that starts with "Predict", the first code cell only records the reader's guess
(``my_… = …`` lines) and a later code cell uses that guess, so the model's
answer is never printed in the cell that asks for it.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from book_helpers import ROOT

LABS = sorted(p for p in (ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
TEMPLATE = ROOT / "labs" / "_template.ipynb"

SECTIONS = {
    "objectives": lambda h: h.startswith("learning objectives"),
    "predict": lambda h: h.startswith("predict"),
    "run": lambda h: h.startswith(("run", "measure", "simulate")),
    "compare": lambda h: (
        h.startswith(("compare", "check"))
        or " against " in h
        or "then check" in h
        or "verdict" in h
    ),
    "exercise": lambda h: h.startswith("exercise"),
    "explore": lambda h: h.startswith("explore"),
    "summary": lambda h: h.startswith("summary"),
}
GUESS_LINE = re.compile(r"^my_\w+\s*=")


def _headings_and_cells(nb):
    """[(heading or None, cell)] in order; a heading is a '## ' line of Markdown."""
    items = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("## "):
                    items.append((line[3:].strip().lower(), None))
        else:
            items.append((None, cell))
    return items


def anatomy_problems(nb) -> list[str]:
    """What is missing or out of order in a lab notebook (empty: none)."""
    items = _headings_and_cells(nb)
    headings = [h for h, _ in items if h is not None]
    problems, first = [], {}
    for name, matches in SECTIONS.items():
        where = [i for i, h in enumerate(headings) if matches(h)]
        if not where:
            problems.append(f"no {name} section")
        else:
            first[name] = where[0]
    order = ["objectives", "predict", "run", "exercise", "explore", "summary"]
    present = [n for n in order if n in first]
    if [first[n] for n in present] != sorted(first[n] for n in present):
        problems.append(
            f"sections out of order: {present} at {[first[n] for n in present]}"
        )
    problems += _predict_problems(items)
    return problems


def _predict_problems(items) -> list[str]:
    problems = []
    for i, (heading, _) in enumerate(items):
        if heading is None or not heading.startswith("predict"):
            continue
        cells = [(j, c) for j, (h, c) in enumerate(items[i + 1 :], i + 1) if c]
        if not cells:
            problems.append(f"'{heading}': no code cell after it")
            continue
        j, guess = cells[0]
        lines = [
            ln.strip()
            for ln in guess.source.splitlines()
            if ln.strip() and not ln.strip().startswith("#")
        ]
        if not lines or not all(GUESS_LINE.match(ln) for ln in lines):
            problems.append(
                f"'{heading}': its first code cell must only record the reader's "
                f"guess (my_… = …), not compute or print: {guess.source[:80]!r}"
            )
            continue
        names = {GUESS_LINE.match(ln).group(0).rstrip("= ").strip() for ln in lines}
        later = " ".join(c.source for _, c in cells[1:])
        unused = sorted(n for n in names if not re.search(rf"\b{n}\b", later))
        if unused:
            problems.append(f"'{heading}': no later cell compares {unused}")
    return problems


@pytest.mark.parametrize("lab", [*LABS, TEMPLATE], ids=lambda p: p.stem)
def test_every_lab_has_the_templates_anatomy(lab: Path):
    assert anatomy_problems(nbformat.read(lab, as_version=4)) == []


def _nb(*cells):
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    return nbformat.v4.new_notebook(
        cells=[md(c[3:]) if c.startswith("md:") else code(c) for c in cells]
    )


GOOD = [
    "md:## Learning objectives",
    "md:## Predict",
    "my_guess_s = None",
    "answer_s = 2.0\nprint(answer_s, my_guess_s)",
    "md:## Run: it",
    "x = 1",
    "md:## Compare: it",
    "assert x",
    "md:## Exercise: it",
    "def f(): ...",
    "md:## Explore\n\n## Summary",
]


def test_the_anatomy_check_passes_a_well_formed_lab():
    assert anatomy_problems(_nb(*GOOD)) == []


def test_the_anatomy_check_fails_when_predict_prints_the_answer():
    bad = [*GOOD]
    bad[2] = "answer_s = 2.0\nprint(answer_s)\nmy_guess_s = None"
    assert any("only record" in p for p in anatomy_problems(_nb(*bad)))


def test_the_anatomy_check_fails_when_no_later_cell_uses_the_guess():
    bad = [*GOOD]
    bad[3] = "print(2.0)"
    assert any("no later cell compares" in p for p in anatomy_problems(_nb(*bad)))


def test_the_anatomy_check_fails_when_a_section_is_missing_or_misplaced():
    no_exercise = [c for c in GOOD if "Exercise" not in c]
    assert "no exercise section" in anatomy_problems(_nb(*no_exercise))
    misplaced = ["md:## Summary", *GOOD[:-1], "md:## Explore"]
    assert any("out of order" in p for p in anatomy_problems(_nb(*misplaced)))
