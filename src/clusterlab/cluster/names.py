"""The emulated cluster's names and marks, and the removal of its own leftovers.

Everything a cluster makes carries its id: its network namespaces are named
``clusterlab-<id>-<part>`` (the links, bridges and nftables tables live inside
them and go with them), every process it starts has ``CLUSTERLAB_CLUSTER=<id>``
in its environment, and its owner is recorded in ``/run/clusterlab-cluster/<id>``
(the driver's pid and its start time). A cluster whose owner no longer runs is a
leftover, for example after its driver was SIGKILLed: :func:`remove_leftovers`,
which every new cluster calls first, kills its processes and removes its
namespaces. It touches nothing without the book's prefix or mark, and never a
live cluster of another driver.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

PREFIX = "clusterlab-"
MARK = "CLUSTERLAB_CLUSTER"
OWNERS = Path("/run/clusterlab-cluster")
NETNS_DIR = Path("/var/run/netns")


def new_id() -> str:
    """A fresh cluster id: eight hex digits."""
    return secrets.token_hex(4)


def netns_name(cluster_id: str, part: str) -> str:
    """The namespace of one part of a cluster: ``node0``, ``fabric``."""
    return f"{PREFIX}{cluster_id}-{part}"


def id_of(netns: str) -> str | None:
    """The cluster id in a namespace's name, or None if it is not the book's."""
    if not netns.startswith(PREFIX):
        return None
    rest = netns[len(PREFIX) :]
    cid, sep, _ = rest.partition("-")
    ok = sep and len(cid) == 8 and all(c in "0123456789abcdef" for c in cid)
    return cid if ok else None


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, after the command name


def claim(cluster_id: str) -> None:
    """Record this process as the owner of ``cluster_id``."""
    OWNERS.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    (OWNERS / cluster_id).write_text(f"{pid} {_start_time(pid)}\n")


def release(cluster_id: str) -> None:
    """Forget the owner of ``cluster_id`` (after its teardown)."""
    (OWNERS / cluster_id).unlink(missing_ok=True)


def owner_alive(cluster_id: str) -> bool:
    """Whether the process that made ``cluster_id`` still runs."""
    try:
        pid_s, start = (OWNERS / cluster_id).read_text().split()
    except (OSError, ValueError):
        return False
    return _start_time(int(pid_s)) == start


def book_namespaces() -> list[str]:
    """Every network namespace named by the book, live or left over."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(n for n in os.listdir(NETNS_DIR) if id_of(n))


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def book_processes(cluster_ids) -> list[int]:
    """Pids that carry the mark of one of ``cluster_ids`` or run in their nodes."""
    ids = set(cluster_ids)
    inodes = {
        _inode(str(NETNS_DIR / n)) for n in book_namespaces() if id_of(n) in ids
    } - {None}
    marks = {f"{MARK}={cid}".encode() for cid in ids}
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            env = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
        except OSError:
            env = set()
        if env & marks or _inode(f"/proc/{pid}/ns/net") in inodes:
            found.append(pid)
    return sorted(found)


def kill_processes(cluster_ids, timeout_s: float = 5.0) -> list[int]:
    """SIGKILL the processes of ``cluster_ids`` and wait until they are gone."""
    pids = book_processes(cluster_ids)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and book_processes(cluster_ids):
        time.sleep(0.05)
    return pids


def remove_namespace(name: str) -> None:
    """Remove one of the book's namespaces (and with it its links and tables)."""
    if id_of(name) is None:
        raise ValueError(f"name={name!r} is not one of the book's namespaces")
    from pyroute2 import netns

    try:
        netns.remove(name)
    except OSError:
        # A namespace file whose mount is already gone: remove the name only.
        (NETNS_DIR / name).unlink(missing_ok=True)


def marked_ids() -> set[str]:
    """The cluster ids found in the mark of any running process."""
    key = f"{MARK}=".encode()
    ids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        ids |= {v[len(key) :].decode() for v in env if v.startswith(key)}
    return {cid for cid in ids if id_of(f"{PREFIX}{cid}-x")}


def leftovers() -> list[str]:
    """Ids of clusters whose owner has gone but whose parts are still here."""
    ids = {id_of(n) for n in book_namespaces()} | marked_ids()
    if OWNERS.is_dir():
        ids |= {p.name for p in OWNERS.iterdir() if id_of(f"{PREFIX}{p.name}-x")}
    return sorted(cid for cid in ids if cid and not owner_alive(cid))


def remove(cluster_id: str) -> None:
    """Tear down one cluster: its processes, then its namespaces, then its record."""
    kill_processes([cluster_id])
    for name in book_namespaces():
        if id_of(name) == cluster_id:
            remove_namespace(name)
    release(cluster_id)


def remove_leftovers() -> list[str]:
    """Remove every cluster whose owner has gone; return their ids."""
    gone = leftovers()
    for cid in gone:
        remove(cid)
    return gone
