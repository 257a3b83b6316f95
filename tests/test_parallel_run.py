"""``make test``'s split between xdist workers keeps the book's chain together.

The labs, the book build and the site tests must share one worker (``conftest.py``
at the top of the repository): a test that used the built book from another
worker would build the whole book a second time, executing every lab again.
"""

from book_helpers import ROOT


def _split(request):
    split = request.config.pluginmanager.get_plugin(str(ROOT / "conftest.py"))
    assert split is not None, "the top-level conftest.py was not loaded"
    return split


def test_every_test_of_the_built_book_runs_with_the_labs(request):
    split = _split(request)
    elsewhere = [
        item.nodeid
        for item in request.session.items
        if "built_site" in getattr(item, "fixturenames", ())
        and split.scope_of(item.nodeid) != split.BOOK_GROUP
    ]
    assert elsewhere == [], (
        f"these tests use the built book but are not in BOOK_TEST_FILES: {elsewhere}"
    )


def test_labs_and_book_files_are_one_unit_and_other_files_their_own(request):
    split = _split(request)
    book = split.BOOK_GROUP
    assert split.scope_of("labs/01_message_passing.ipynb::Cell 3") == book
    assert split.scope_of("tests/test_site.py::test_x[intro.html]") == book
    assert split.scope_of("tests/test_book_build.py::test_a") == book
    assert split.scope_of("tests/unit/test_planner.py::test_a") == (
        "tests/unit/test_planner.py"
    )
    assert split.scope_of("tests/distributed/test_launcher.py::test_b[2]") == (
        "tests/distributed/test_launcher.py"
    )
