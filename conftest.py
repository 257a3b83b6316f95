"""How ``make test`` shares the run between pytest-xdist workers.

``make test`` runs one worker per core with ``--dist loadfile``: each test file
goes to one worker whole, so that its module fixtures (a JupyterLab server, a
graded class) start once. Here that mode gets three more rules:

* the labs, the book build and the chart-size test of the built book are one
  unit, run in that order by one worker, because the build takes the labs'
  outputs from that worker's nbval run (``labs/conftest.py``); that unit is
  handed out first, since it is the longest;
* the site tests (a browser on each built page) are split into
  ``SITE_PARTS`` units, handed out last: whichever worker is free then takes a
  part and reads the book the first worker published (``tests/conftest.py``),
  so the browser's work is shared once the labs are done;
* every other file is its own unit, handed out in between.

Without xdist nothing here applies.
"""

from __future__ import annotations

import random
import socket
import zlib
from collections import OrderedDict

import pytest

#: The unit of work of the labs and of the tests that build the book.
BOOK_GROUP = "labs and the book built from them"

#: The test files whose tests build the book (``built_site``) with the labs; a
#: contract test fails when a test elsewhere uses it.
BOOK_TEST_FILES = (
    "tests/test_book_build.py",
    "tests/test_page_chart_sizes.py",
)

#: The tests that read the built book in a browser (``site_of_the_run``).
SITE_FILE = "tests/test_site.py"

#: Units the site tests are split into.
SITE_PARTS = 3


def site_part(nodeid: str) -> str:
    """The unit of a site test: one of ``SITE_PARTS``, fixed by its id."""
    k = zlib.crc32(nodeid.encode()) % SITE_PARTS + 1
    return f"site tests, part {k} of {SITE_PARTS}"


def scope_of(nodeid: str) -> str:
    """The unit of work of a test: its file, ``BOOK_GROUP`` or a site part."""
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb") or path in BOOK_TEST_FILES:
        return BOOK_GROUP
    if path == SITE_FILE:
        return site_part(nodeid)
    return path


def hand_out_order(scope: str) -> int:
    """0 for the book's unit (first), 2 for the site parts (last), 1 otherwise."""
    if scope == BOOK_GROUP:
        return 0
    return 2 if scope.startswith("site tests, part ") else 1


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndTheBook(LoadFileScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            # The queue is complete (largest unit first) before the first unit
            # goes out; a stable sort keeps that order within each rank.
            if not self._ordered:
                self._ordered = True
                order = sorted(self.workqueue, key=hand_out_order)
                self.workqueue = OrderedDict((k, self.workqueue[k]) for k in order)
            super()._assign_work_unit(node)

    return FilesAndTheBook(config, log)


def _ports_below_the_ephemeral_range():
    """Kernels started by the tests get ports below the system's ephemeral range.

    jupyter_client picks a kernel's five ports by binding port 0 and letting go,
    and the kernel binds them a second or two later, once Python has started.
    Port 0 hands out ports of the ephemeral range, the same range every outgoing
    connection takes its local port from, and the test run opens many (gloo
    meshes, torchft's quorums, torchrun's restarts). Twice in one day a kernel
    died with ``ZMQError: Address already in use`` because a connection had
    taken its port in that window. Ports just below the range are never handed
    out implicitly; each is still checked free and kept once per run.
    """
    from jupyter_client.connect import LocalPortCache

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top, bottom = max(low, 2048), max(1024, low - 12000)

    def find_available_port(self, ip: str) -> int:
        for _ in range(200):
            port = random.randrange(bottom, top)
            if port in self.currently_used_ports:
                continue
            with socket.socket() as probe:
                try:
                    probe.bind((ip, port))
                except OSError:
                    continue
            self.currently_used_ports.add(port)
            return port
        return original(self, ip)  # a crowded range: the library's own choice

    original = LocalPortCache.find_available_port
    LocalPortCache.find_available_port = find_available_port


try:
    _ports_below_the_ephemeral_range()
except ImportError:  # jupyter_client is in requirements.txt; without it no kernels
    pass
