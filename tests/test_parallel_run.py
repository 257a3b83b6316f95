"""``make test``'s split between xdist workers keeps the book's chain together.

The labs and the book build must share one worker (``conftest.py`` at the top of
the repository): a build in another worker would execute every lab again. The
site tests only read the built book: they are split into parts handed out last,
and a worker that takes one waits for the book the labs' worker published
(``tests/conftest.py``) instead of building its own.
"""

import collections

import pytest

from book_helpers import ROOT


def _plugin(request, path):
    plugin = request.config.pluginmanager.get_plugin(str(path))
    assert plugin is not None, f"{path} was not loaded"
    return plugin


def _split(request):
    return _plugin(request, ROOT / "conftest.py")


def test_every_test_that_builds_the_book_runs_with_the_labs(request):
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


def test_the_site_tests_only_read_the_published_book(request):
    split = _split(request)
    readers = [
        item.nodeid
        for item in request.session.items
        if "site_of_the_run" in getattr(item, "fixturenames", ())
    ]
    parts = {split.scope_of(n) for n in readers}
    assert all(p.startswith("site tests, part ") for p in parts), parts
    # the same list of files that build it, in both conftests
    building = _plugin(request, ROOT / "tests" / "conftest.py").BUILDING_FILES
    assert tuple(building) == tuple(split.BOOK_TEST_FILES)


def test_labs_and_book_files_are_one_unit_and_other_files_their_own(request):
    split = _split(request)
    book = split.BOOK_GROUP
    assert split.scope_of("labs/01_message_passing.ipynb::Cell 3") == book
    assert split.scope_of("tests/test_book_build.py::test_a") == book
    assert split.scope_of("tests/test_site.py::test_x[intro.html]").startswith(
        "site tests, part "
    )
    assert split.scope_of("tests/unit/test_planner.py::test_a") == (
        "tests/unit/test_planner.py"
    )
    assert split.scope_of("tests/distributed/test_launcher.py::test_b[2]") == (
        "tests/distributed/test_launcher.py"
    )


def test_the_book_goes_out_first_and_the_site_parts_last(request):
    split = _split(request)
    queue = ["tests/unit/a.py", split.site_part("x"), split.BOOK_GROUP, "tests/b.py"]
    order = sorted(queue, key=split.hand_out_order)
    assert order[0] == split.BOOK_GROUP and order[-1] == split.site_part("x")
    assert order[1:3] == ["tests/unit/a.py", "tests/b.py"]  # stable in between


def test_the_site_tests_fill_every_part(request):
    split = _split(request)
    ids = [f"tests/test_site.py::test_page[labs/{n:02d}_x.html]" for n in range(48)]
    sizes = collections.Counter(split.site_part(i) for i in ids)
    assert len(sizes) == split.SITE_PARTS
    assert min(sizes.values()) >= 48 // split.SITE_PARTS // 2, sizes


def test_a_published_build_is_read_back_and_a_failed_one_fails(request, tmp_path):
    site = _plugin(request, ROOT / "tests" / "conftest.py")
    done = tmp_path / "built-book.done"
    site._publish(done, f"ok\n{tmp_path / 'html'}")
    assert site._published(done) == tmp_path / "html"
    assert not done.with_suffix(".part").exists()
    site._publish(done, "failed\nthe book build failed: Lab 03, Cell 4")
    with pytest.raises(pytest.fail.Exception, match="Lab 03, Cell 4"):
        site._published(done)


def test_only_a_run_that_builds_the_book_makes_its_readers_wait(request):
    site = _plugin(request, ROOT / "tests" / "conftest.py")
    Item = collections.namedtuple("Item", "nodeid fixturenames")
    Session = collections.namedtuple("Session", "items")
    build = Item("tests/test_book_build.py::test_a", ("built_site",))
    page = Item("tests/test_site.py::test_p[intro.html]", ("site_of_the_run",))
    assert site._a_building_test_runs(Session([build, page]))
    assert not site._a_building_test_runs(Session([page]))
