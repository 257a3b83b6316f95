"""Contracts between the labs, the table of contents, the ledger and the config."""

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from book_helpers import ROOT

LABS = sorted(p for p in (ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))
TEMPLATE = ROOT / "labs" / "_template.ipynb"
#: The claim IDs of the source material (CLAIMS.md); the ledger must hold each.
CLAIM_IDS = (
    "F1 F2 F3 P1 P2 P3 P4 H1 H2 H3 H4 H5 H6 H7 H8 W1 W2 W3 W4 W5 W6 "
    "L1 L2 L3 L4 S1 S2 S3 S4 S5 S6 D1 D2 D3 D4 E1 E2 E3 E4 E5"
).split()


def _config():
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def _toc_files(node):
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for value in node.values():
            yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def _code_cells(path: Path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_there_is_at_least_one_lab():
    assert LABS, "labs/ holds no NN_slug.ipynb"


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_every_lab_is_in_the_table_of_contents(lab):
    toc = set(_toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text())))
    assert f"labs/{lab.stem}" in toc


def test_the_template_is_not_in_the_table_of_contents():
    toc = set(_toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text())))
    assert "labs/_template" not in toc


@pytest.mark.parametrize("nb", [*LABS, TEMPLATE], ids=lambda p: p.stem)
def test_notebooks_are_committed_without_outputs(nb):
    for cell in _code_cells(nb):
        assert not cell.outputs and cell.execution_count is None, cell.source[:60]


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_the_setup_cell_is_identical_in_every_lab(lab):
    assert _code_cells(lab)[0].source == _code_cells(TEMPLATE)[0].source


def test_the_setup_cell_installs_from_the_configured_repository():
    repo = _config()["repository"]
    setup = _code_cells(TEMPLATE)[0].source
    assert f"git+{repo['url']}@{repo['branch']}" in setup


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_every_lab_has_a_colab_link_built_from_the_config(lab):
    repo = _config()["repository"]
    colab = _config()["launch_buttons"]["colab_url"]
    owner_repo = repo["url"].removeprefix("https://github.com/")
    path = "/".join(
        p for p in (repo.get("path_to_book", "").strip("/"), f"labs/{lab.name}") if p
    )
    url = f"{colab}/github/{owner_repo}/blob/{repo['branch']}/{path}"
    title = nbformat.read(lab, as_version=4).cells[0]
    assert title.cell_type == "markdown" and url in title.source


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.stem)
def test_labs_keep_the_style_budget(lab):
    cells = _code_cells(lab)
    assert len(cells) <= 25, f"{len(cells)} code cells (at most 25)"
    for cell in cells:  # blank lines do not count
        lines = [line for line in cell.source.splitlines() if line.strip()]
        assert len(lines) <= 15, f"{len(lines)} lines (at most 15): {cell.source[:80]}"


def test_every_claim_id_is_in_the_ledger():
    ledger = (ROOT / "book" / "appendix" / "claims_ledger.md").read_text()
    rows = set(re.findall(r"^\| *([A-Z]\d) *\|", ledger, flags=re.M))
    missing = [c for c in CLAIM_IDS if c not in rows]
    assert not missing, f"claims without a ledger row: {missing}"


def test_the_claim_list_matches_the_source_material_when_it_is_beside_the_repo():
    claims = ROOT.parent / "shared" / "CLAIMS.md"
    if not claims.exists():
        pytest.skip("CLAIMS.md is not beside this checkout")
    ids = re.findall(r"^- \*\*([A-Z]\d)\*\*", claims.read_text(), flags=re.M)
    assert sorted(ids) == sorted(CLAIM_IDS)


def _ledger_rows():
    ledger = (ROOT / "book" / "appendix" / "claims_ledger.md").read_text()
    rows = {}
    for line in ledger.splitlines():
        m = re.match(r"^\| *([A-Z]\d) *\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [cell.strip() for cell in m.group(2).split(" | ")]
    return rows


@pytest.mark.parametrize("claim", CLAIM_IDS)
def test_every_claim_has_a_verdict_a_section_and_a_check(claim):
    cells = _ledger_rows().get(claim)
    assert cells and len(cells) == 4, (
        f"{claim}: expected claim | where | check | verdict"
    )
    _, where, check, verdict = cells
    assert re.match(r"^\*(holds|holds only if|does not hold, because)\b", verdict), (
        f"{claim}: the verdict must start with *holds*, *holds only if* or "
        f"*does not hold, because*: {verdict[:80]!r}"
    )
    assert "not yet" not in verdict.lower(), f"{claim} is not decided yet"
    assert "{doc}" in where or "{ref}" in where, f"{claim}: no link to its section"
    assert "{doc}" in check or "{ref}" in check, f"{claim}: no link to what checks it"


def lab_numbers_in_toc_order(toc) -> list[int]:
    """The number of each lab, in the order the table of contents lists them."""
    return [
        int(f.split("/")[1][:2])
        for f in _toc_files(toc)
        if f.startswith("labs/") and f.split("/")[1][:2].isdigit()
    ]


def numbering_problems(numbers: list[int]) -> list[str]:
    """Where lab numbers do not run 1, 2, 3, ... in table-of-contents order."""
    return [
        f"position {i}: Lab {n:02d} where Lab {i:02d} belongs"
        for i, n in enumerate(numbers, start=1)
        if n != i
    ]


def test_lab_numbers_run_consecutively_in_table_of_contents_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbers = lab_numbers_in_toc_order(toc)
    assert numbers, "the table of contents lists no lab"
    assert numbering_problems(numbers) == []


def test_the_numbering_check_fails_when_a_lab_is_out_of_order_or_missing():
    assert numbering_problems([1, 2, 4, 3]) == [
        "position 3: Lab 04 where Lab 03 belongs",
        "position 4: Lab 03 where Lab 04 belongs",
    ]
    assert numbering_problems([1, 2, 4]) == ["position 3: Lab 04 where Lab 03 belongs"]
    assert numbering_problems([1, 2, 3]) == []


DIAGRAM_CALL = re.compile(r"\bcl\.[a-z_]+\.diagram\.[a-z_]+\(")


def diagram_before_formula_problem(text: str) -> str | None:
    """Why a chapter's first diagram does not come before its first formula, or None.

    A diagram is a code cell that calls a topic's ``diagram`` file
    (``cl.<topic>.diagram.<name>``); a formula is ``$`` in
    the Markdown outside code (fenced blocks and inline code are skipped).
    """
    in_fence, first_diagram, first_formula = None, None, None
    for i, line in enumerate(text.splitlines()):
        fence = re.match(r"^(`{3,}|~{3,})", line)
        if fence:
            mark = fence.group(1)
            in_fence = (
                None if in_fence and mark.startswith(in_fence) else in_fence or mark
            )
            continue
        if in_fence:
            if DIAGRAM_CALL.search(line) and first_diagram is None:
                first_diagram = i
            continue
        if "$" in re.sub(r"`[^`]*`", "", line) and first_formula is None:
            first_formula = i
    if first_diagram is None:
        return "no diagram"
    if first_formula is not None and first_formula < first_diagram:
        return f"a formula on line {first_formula + 1} before the first diagram"
    return None


CHAPTERS = [
    f
    for f in _toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
    if f.startswith("book/") and "/appendix/" not in f
]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_chapter_has_a_diagram_before_its_first_formula(chapter):
    text = (ROOT / f"{chapter}.md").read_text(encoding="utf-8")
    assert diagram_before_formula_problem(text) is None


def test_the_diagram_check_fails_when_a_formula_comes_first_or_no_diagram():
    cell = "```{code-cell} ipython3\ncl.ring.diagram.ring_allreduce_diagram()\n```\n"
    assert diagram_before_formula_problem("Text $a+b$.\n" + cell)
    assert diagram_before_formula_problem("Text, no picture.\n") == "no diagram"
    assert diagram_before_formula_problem("`$HOME` is code.\n" + cell + "$x$\n") is None
