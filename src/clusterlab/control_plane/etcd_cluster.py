"""A three-member etcd cluster on loopback, and a rendezvous that loses its leader.

One etcd member is a store on one machine: when it dies, so does every
rendezvous that meets there, the same single point of failure as torchrun's
c10d store. etcd's point is replication: ``EtcdCluster`` starts ``n`` members
(three by default) that elect a Raft leader among themselves, each with its
own ports and data directory, and kills them all when its ``with`` block
ends. ``meet_losing_a_member`` runs torch's etcd rendezvous for two agents
and kills a member (Raft's leader by default) after the first agent joined
and before the second: the rendezvous must still complete, through the two
members that remain::

    with EtcdCluster(3) as cluster:
        table, state, kill = meet_losing_a_member(cluster)

torch's etcd backend takes one endpoint. Its python-etcd client reads the
member list when it connects, and an agent already connected moves on when
its member stops answering; but an agent that starts after its one address
died cannot connect at all (``victim="endpoint"`` shows it), so a real job
gives its agents a name that resolves to every member.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from clusterlab.clocks.rendezvous import _free_ports
from clusterlab.control_plane.etcd import etcd_missing, meet_through_etcd
from clusterlab.core.child import child_env
from clusterlab.core.torchrun import kill_session
from clusterlab.core.validate import check_float, check_int

#: Faster than etcd's defaults (100 ms, 1000 ms), so a lost leader is replaced
#: in about a second on a busy machine.
HEARTBEAT_MS, ELECTION_MS = 50, 500


def member_argv(
    exe: str, index: int, data_dir: str, client: str, peer: str, initial: str
) -> list[str]:
    """The command line of member ``m{index}`` of a new etcd cluster.

    Args:
        exe: the ``etcd`` executable.
        index: the member's number (its name is ``m{index}``).
        data_dir: the folder under which it keeps ``m{index}``.
        client, peer: the URLs it listens on for clients and for its peers.
        initial: every member's ``name=peer URL``, comma-separated.
    """
    return [
        exe, f"--name=m{index}", f"--data-dir={data_dir}/m{index}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster={initial}", "--initial-cluster-state=new",
        f"--heartbeat-interval={HEARTBEAT_MS}", f"--election-timeout={ELECTION_MS}",
        "--log-level=error",
    ]  # fmt: skip


class EtcdCluster:
    """``n_members`` etcd members on 127.0.0.1 with the v2 API, for the block.

    Args:
        n_members: members, in [1, 7] (odd sizes tolerate the most failures).
        start_timeout_s: seconds to wait for a leader, (0, 120].
    """

    def __init__(self, n_members: int = 3, start_timeout_s: float = 30.0):
        self.n_members = check_int("n_members", n_members, 1, 7)
        self.start_timeout_s = check_float(
            "start_timeout_s", start_timeout_s, 0.0, 120.0, low_inclusive=False
        )
        self.procs: list = []
        self.client_ports: list[int] = []
        self.endpoint_member = 0
        self._dir: tempfile.TemporaryDirectory | None = None

    @property
    def endpoint(self) -> str:
        """``host:port`` of one member's client API (``endpoint_member``, 0 unless
        set), for ``--rdzv-endpoint``."""
        return f"127.0.0.1:{self.client_ports[self.endpoint_member]}"

    def __enter__(self) -> EtcdCluster:
        exe = shutil.which("etcd")
        if exe is None:
            raise RuntimeError(etcd_missing() or "no etcd on PATH")
        self._dir = tempfile.TemporaryDirectory(prefix="etcd-cluster-")
        ports = _free_ports(2 * self.n_members)
        self.client_ports = ports[: self.n_members]
        peers = [f"http://127.0.0.1:{p}" for p in ports[self.n_members :]]
        initial = ",".join(f"m{i}={u}" for i, u in enumerate(peers))
        try:
            for i, (cport, peer) in enumerate(
                zip(self.client_ports, peers, strict=True)
            ):
                client = f"http://127.0.0.1:{cport}"
                cmd = member_argv(exe, i, self._dir.name, client, peer, initial)
                cmd.append("--enable-v2")  # /v2/stats/self names the leader
                self.procs.append(
                    subprocess.Popen(
                        cmd,
                        env=child_env(),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
            self.wait_for_leader(self.start_timeout_s)
            return self
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill every member and remove the data directories."""
        for proc in self.procs:
            if proc is not None:
                kill_session(proc)
                proc.wait()
        self.procs = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def alive(self) -> list[int]:
        """The members whose processes still run."""
        return [
            i for i, p in enumerate(self.procs) if p is not None and p.poll() is None
        ]

    def _get(self, member: int, path: str) -> dict:
        url = f"http://127.0.0.1:{self.client_ports[member]}{path}"
        with urllib.request.urlopen(url, timeout=2.0) as answer:
            return json.loads(answer.read())

    def leader(self) -> int | None:
        """The member that says it leads (its ``/v2/stats/self``), or None."""
        for i in self.alive():
            try:
                if self._get(i, "/v2/stats/self")["state"] == "StateLeader":
                    return i
            except (OSError, KeyError, ValueError):
                continue
        return None

    def wait_for_leader(self, timeout_s: float) -> int:
        """Block until a live member leads; return it (RuntimeError on timeout)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.leader()
            if found is not None:
                return found
            if not self.alive():
                break
            time.sleep(0.05)
        codes = [p.poll() if p is not None else "killed" for p in self.procs]
        raise RuntimeError(
            f"no etcd leader within {timeout_s} s (exit codes of the members {codes})"
        )

    def get_v2(self, key: str) -> dict:
        """A key read with the v2 API from the first live member that answers."""
        last: Exception = OSError("no live member")
        for i in self.alive():
            try:
                return self._get(i, f"/v2/keys/{key.lstrip('/')}?recursive=true")
            except OSError as err:
                last = err
        raise last

    def wait_until_writable(self, member: int, timeout_s: float) -> float:
        """Block until ``member`` takes a v2 write; return the seconds it took.

        Each try is a write of the key ``/clusterlab/probe`` with a one-second
        timeout. Right after a new leader is elected, a write sent to a follower
        can be lost on its way to the leader (here it came back as HTTP 500
        after about 6 s, etcd's request timeout), so the first tries may fail.

        Raises:
            RuntimeError: ``member`` took no write within ``timeout_s``.
        """
        check_int("member", member, 0, self.n_members - 1)
        url = f"http://127.0.0.1:{self.client_ports[member]}/v2/keys/clusterlab/probe"
        data = urllib.parse.urlencode({"value": "probe"}).encode()
        start = time.monotonic()
        last: Exception | None = None
        while time.monotonic() - start < timeout_s:
            request = urllib.request.Request(url, data=data, method="PUT")
            try:
                with urllib.request.urlopen(request, timeout=1.0):
                    return time.monotonic() - start
            except OSError as err:  # URLError, HTTPError and timeouts alike
                last = err
                time.sleep(0.05)
        raise RuntimeError(
            f"member {member} took no write within {timeout_s} s (last: {last})"
        )

    def version(self) -> str:
        """The version of the first live member, e.g. ``"3.4.23"``."""
        return self._get(self.alive()[0], "/version")["etcdserver"]

    def kill(self, member: int) -> None:
        """SIGKILL one member (and its session)."""
        check_int("member", member, 0, self.n_members - 1)
        proc = self.procs[member]
        if proc is not None:
            kill_session(proc)
            proc.wait()
            self.procs[member] = None


def meet_losing_a_member(
    cluster: EtcdCluster, victim: str | int = "leader", timeout_s: float = 30.0
):
    """Two agents meet through ``cluster`` while a member is killed between joins.

    Args:
        cluster: a running ``EtcdCluster``.
        victim: ``"leader"`` (Raft's leader; the agents are given another
            member's address), ``"endpoint"`` (the leader, given to the agents
            as their endpoint: torch's backend takes one address, and a new
            client cannot start without it), or a member's index.
        timeout_s: the rendezvous' join timeout, seconds.

    Returns:
        ``(table, state, kill)``: the agents' table and the state etcd holds,
        as ``etcd.meet_through_etcd`` returns them, and what was killed:
        ``member``, ``was_leader``, ``was_endpoint``, ``new_leader`` (None if
        none was elected within ``timeout_s``), ``new_leader_s`` and
        ``writable_s`` (seconds from the kill until the agents' member took a
        write again; NaN when it was the one killed or took none). The second
        agent starts only then: a write that reaches a follower while the
        leader changes can be lost, and an agent started in that moment at
        times never joined (3 of 8 runs on a busy machine timed out).
    """
    if victim not in ("leader", "endpoint"):
        check_int("victim", victim, 0, cluster.n_members - 1)
    if cluster.n_members < 3 and victim != "endpoint":
        raise ValueError(
            f"cluster.n_members={cluster.n_members}: a member killed from fewer "
            "than 3 leaves no majority; use 3 to 7"
        )
    kill: dict = {}
    leader = cluster.wait_for_leader(timeout_s)
    if victim == "endpoint":
        cluster.endpoint_member = leader
    else:  # a member that stays up: torch's etcd backend takes one endpoint
        others = [i for i in cluster.alive() if i not in (leader, victim)]
        cluster.endpoint_member = others[0]

    def kill_one() -> None:
        member = victim if isinstance(victim, int) else cluster.leader()
        if victim == "endpoint":
            member = cluster.endpoint_member
        kill.update(member=member, was_leader=member == cluster.leader())
        kill["was_endpoint"] = member == cluster.endpoint_member
        t0 = time.monotonic()
        cluster.kill(member)
        try:
            kill["new_leader"] = cluster.wait_for_leader(timeout_s)
            kill["new_leader_s"] = time.monotonic() - t0
        except RuntimeError:
            kill.update(new_leader=None, new_leader_s=float("nan"))
        kill["writable_s"] = float("nan")
        if kill["new_leader"] is not None and not kill["was_endpoint"]:
            # the next agent's first writes would be lost like any client's:
            # it joins once its member takes writes again
            try:
                cluster.wait_until_writable(cluster.endpoint_member, timeout_s)
                kill["writable_s"] = time.monotonic() - t0
            except RuntimeError:
                pass

    table, state = meet_through_etcd(cluster, 2, timeout_s, between_joins=kill_one)
    return table, state, kill


__all__ = [
    "ELECTION_MS",
    "HEARTBEAT_MS",
    "EtcdCluster",
    "meet_losing_a_member",
    "member_argv",
]
