"""An etcd server on loopback, for torchrun's etcd rendezvous, started and stopped.

etcd is a key-value store replicated with Raft; Kubernetes keeps all its state
in it, and ``torchrun --rdzv-backend etcd`` (torch's ``etcd-v2`` backend and
the ``python-etcd`` client) meets its agents there instead of in a store that
one agent hosts. ``EtcdServer`` starts one etcd member (Debian's
``etcd-server`` package puts ``etcd`` on PATH) with the v2 API enabled, on two
free ports of 127.0.0.1 and a data directory of its own, and kills it (and
removes the directory) when its ``with`` block ends::

    from clusterlab.control_plane.etcd import EtcdServer, etcd_missing
    if etcd_missing():
        print(etcd_missing())                  # why, and how to install it
    else:
        with EtcdServer() as etcd:
            print(etcd.endpoint, etcd.version())

``meet_through_etcd`` runs torch's etcd rendezvous handler for two agents in
this process and reads back the state it left in etcd.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request

import pandas as pd

from clusterlab.clocks.rendezvous import _free_ports
from clusterlab.core.child import child_env
from clusterlab.core.torchrun import kill_session
from clusterlab.core.validate import check_float, check_int

INSTALL = "apt-get install -y etcd-server; pip install python-etcd"


def etcd_missing() -> str:
    """Why torchrun's etcd rendezvous cannot run here, or ``""`` if it can."""
    why = []
    if shutil.which("etcd") is None:
        why.append("no `etcd` on PATH")
    try:
        import etcd  # noqa: F401  (the python-etcd client torch's backend uses)
    except ImportError:
        why.append("no `python-etcd` client")
    if not why:
        return ""
    return f"skipping the etcd part: {' and '.join(why)} (install: {INSTALL})"


class EtcdServer:
    """One etcd member on 127.0.0.1 with the v2 API, for the ``with`` block.

    Args:
        start_timeout_s: seconds to wait for it to answer, (0, 120].
    """

    def __init__(self, start_timeout_s: float = 20.0):
        self.start_timeout_s = check_float(
            "start_timeout_s", start_timeout_s, 0.0, 120.0, low_inclusive=False
        )
        self.proc: subprocess.Popen | None = None
        self._dir: tempfile.TemporaryDirectory | None = None
        self.client_port = self.peer_port = 0

    @property
    def endpoint(self) -> str:
        """``host:port`` of the client API, for ``--rdzv-endpoint``."""
        return f"127.0.0.1:{self.client_port}"

    def __enter__(self) -> EtcdServer:
        exe = shutil.which("etcd")
        if exe is None:
            raise RuntimeError(etcd_missing() or "no etcd on PATH")
        self._dir = tempfile.TemporaryDirectory(prefix="etcd-")
        self.client_port, self.peer_port = _free_ports(2)
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [
            exe, "--name=n0", f"--data-dir={self._dir.name}/data",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=n0={peer}", "--enable-v2", "--log-level=error",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + self.start_timeout_s
            while True:
                try:
                    self.version()
                    return self
                except OSError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"etcd did not answer on {self.endpoint} within "
                            f"{self.start_timeout_s} s (exit code {self.proc.poll()})"
                        ) from None
                    time.sleep(0.1)
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill the server and remove its data directory."""
        if self.proc is not None:
            kill_session(self.proc)
            self.proc.wait()
            self.proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def _get(self, path: str) -> dict:
        url = f"http://{self.endpoint}{path}"
        with urllib.request.urlopen(url, timeout=2.0) as answer:
            return json.loads(answer.read())

    def version(self) -> str:
        """The server's version, e.g. ``"3.4.23"``."""
        return self._get("/version")["etcdserver"]

    def get_v2(self, key: str) -> dict:
        """A key (or directory) read with etcd's v2 HTTP API, as JSON."""
        return self._get(f"/v2/keys/{key.lstrip('/')}?recursive=true")


def _state_key(run_id: str) -> str:
    return f"torchelastic/p2p/run_{run_id}/rdzv/active_version"


def _wait_for_participants(server, run_id: str, n: int, timeout_s: float) -> None:
    """Block until etcd's rendezvous state lists ``n`` participants."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = json.loads(server.get_v2(_state_key(run_id))["node"]["value"])
            if len(state.get("participants", [])) >= n:
                return
        except (OSError, KeyError, ValueError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"no {n} participant(s) in etcd within {timeout_s} s")


def meet_through_etcd(
    server, n_nodes: int = 2, timeout_s: float = 30.0, between_joins=None
):
    """Run torch's etcd rendezvous for ``n_nodes`` agents (threads) in this process.

    Each thread builds the handler ``torchrun --rdzv-backend etcd`` builds and
    calls ``next_rendezvous()``; then the state the rendezvous left in etcd is
    read back over etcd's own HTTP API.

    Args:
        server: a running ``EtcdServer`` (or ``etcd_cluster.EtcdCluster``).
        n_nodes: agents, in [1, 8].
        timeout_s: the rendezvous' join timeout, seconds.
        between_joins: None, or a function called once the first agent has
            joined (etcd holds one participant) and before the others start.

    Returns:
        ``(table, state)``: one row per agent (``node, rank, world_size,
        met_s``, ``error``), and the rendezvous state etcd holds (a dict: its
        ``status``, ``version`` and ``participants``).
    """
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.etcd_rendezvous import (
        create_rdzv_handler,
    )

    check_int("n_nodes", n_nodes, 1, 8)
    check_float("timeout_s", timeout_s, 1.0, 600.0)
    run_id = f"meet{int(time.time() * 1e3) % 10**9}"
    rows: list = [None] * n_nodes
    handlers = []
    start = time.monotonic()

    def agent(node: int) -> None:
        try:
            params = RendezvousParameters(
                backend="etcd", endpoint=server.endpoint, run_id=run_id,
                min_nodes=n_nodes, max_nodes=n_nodes, timeout=int(timeout_s),
                last_call_timeout=1,
            )  # fmt: skip
            handler = create_rdzv_handler(params)
            handlers.append(handler)
            info = handler.next_rendezvous()
            rows[node] = {
                "node": node,
                "rank": info.rank,
                "world_size": info.world_size,
                "met_s": time.monotonic() - start,
                "error": "",
            }
        except Exception as err:  # reported in the table, not lost in a thread
            error = f"{type(err).__name__}: {err}"
            rows[node] = {"node": node, "rank": -1, "world_size": 0}
            rows[node].update(met_s=float("nan"), error=error)

    log = logging.getLogger("torch.distributed.elastic.rendezvous.etcd_rendezvous")
    level = log.level
    log.setLevel(logging.WARNING)  # its INFO lines go to stderr, one per step
    try:
        threads = [threading.Thread(target=agent, args=(i,)) for i in range(n_nodes)]
        threads[0].start()
        if between_joins is not None:
            _wait_for_participants(server, run_id, 1, timeout_s)
            between_joins()
        for t in threads[1:]:
            t.start()
        for t in threads:
            t.join(timeout_s + 10.0)
    finally:
        log.setLevel(level)
    key = _state_key(run_id)
    try:
        state = json.loads(server.get_v2(key)["node"]["value"])
    except (OSError, KeyError, ValueError) as err:
        state = {"error": f"{type(err).__name__}: {err}"}
    for h in handlers:
        h.shutdown()
        _stop_lease_renewals(h)
    return pd.DataFrame(rows), state


def _stop_lease_renewals(handler) -> None:
    """Stop the threads that keep a handler's keys alive in etcd.

    torch stops them only when the handler is garbage-collected; one left
    running after the cluster is gone fails on its next refresh, and its
    traceback would land in whatever a notebook runs next.
    """
    impl = getattr(handler, "_rdzv_impl", None)
    for name in ("_lease_run_id_stop", "_lease_this_rank_stop"):
        stop = getattr(impl, name, None)
        if stop is not None:
            stop.set()


__all__ = ["EtcdServer", "etcd_missing", "meet_through_etcd"]
