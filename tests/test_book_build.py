"""The book builds cleanly, and a build with a failing cell or a broken link fails."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

from book_helpers import ROOT, jupyter_book

pytestmark = pytest.mark.book


def test_the_book_builds_with_warnings_as_errors(built_site):
    for page in [
        "intro.html",
        "book/paradigm/properties.html",
        "labs/01_message_passing.html",
        "book/appendix/claims_ledger.html",
    ]:
        assert (built_site / page).exists(), page


def test_every_page_is_executed_and_no_output_is_an_error(built_site):
    lab = (built_site / "labs" / "01_message_passing.html").read_text()
    assert "cl-vis-" in lab, "the lab's charts were not rendered for the book"
    assert "Traceback (most recent call last)" not in lab
    # The exercise stub ran and its check said so, instead of failing the page.
    assert "not attempted: reduce_then_broadcast" in lab


def _tiny_book(tmp_path: Path, cell_source: str, extra_md: str = "") -> Path:
    """A one-page book with the repository's own build settings."""
    book = tmp_path / "tiny"
    book.mkdir()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] = "Tiny"
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    shutil.copytree(ROOT / "_ext", book / "_ext")
    shutil.copy(ROOT / "references.bib", book / "references.bib")
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: page\n"
    )
    (book / "intro.md").write_text(f"# Tiny\n\nA page.\n{extra_md}\n")
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Page"),
        nbformat.v4.new_code_cell(cell_source),
    ]
    nbformat.write(nb, book / "page.ipynb")
    return book


#: The three tiny books: (cell, extra Markdown) for a good page, a failing cell
#: and a broken reference. They build at once, in threads, each in its own folder.
TINY = {
    "good": ("print(1 + 1)", ""),
    "failing cell": ("raise RuntimeError('this cell must fail the build')", ""),
    "broken reference": ("print(1)", "See {doc}`no_such_page`."),
}


@pytest.fixture(scope="module")
def tiny_builds(tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    books = [
        _tiny_book(tmp_path_factory.mktemp("tiny"), cell, extra_md=extra)
        for cell, extra in TINY.values()
    ]

    def build(book):
        return jupyter_book(".", "-W", "-n", "--keep-going", cwd=book, timeout=300)

    with ThreadPoolExecutor(len(books)) as pool:
        return dict(zip(TINY, pool.map(build, books), strict=True))


def test_a_tiny_book_with_good_cells_builds(tiny_builds):
    result = tiny_builds["good"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_a_failing_cell_fails_the_build(tiny_builds):
    result = tiny_builds["failing cell"]
    assert result.returncode != 0
    assert "this cell must fail the build" in result.stdout + result.stderr


def test_a_broken_reference_fails_the_build(tiny_builds):
    result = tiny_builds["broken reference"]
    assert result.returncode != 0
    assert "no_such_page" in result.stdout + result.stderr


def test_config_keeps_the_strict_execution_settings():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["raise_on_error"] is True
    assert config["execute"]["execute_notebooks"] == "force"
    assert not config["execute"].get("allow_errors", False)
    assert json.dumps(config["sphinx"]["config"]["nb_ipywidgets_js"]) == "{}"
