"""Keep every listener of a torchft trainer on the loopback interface.

torchft's defaults listen on every interface: its lighthouse binds ``[::]:29510``,
its ``Manager`` builds the manager server with ``bind="[::]:PORT"`` (no argument
changes it), its HTTP checkpoint transport binds all addresses, and gloo and a
``TCPStore`` master listen wherever the host name resolves. On one machine, for a
lab, all of it belongs on ``127.0.0.1``; a cluster binds the node's private
fabric address instead (the fault-tolerance chapter lists what to set).

- ``loopback_env()``: the environment gloo and ``torch.distributed`` read.
- ``loopback_manager_server()``: wraps torchft's ``ManagerServer`` so its bind is
  rewritten to the loopback address (the one listener with no argument).
- ``loopback_store()``: a ``TCPStore`` master that listens on loopback only.
- ``listening_addresses(pid)``: the addresses a process listens on (for tests).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"


def check_host(host: str) -> str:
    """``host``, if it names one interface: loopback or an emulated node's own
    address, IPv4 as the store's socket is. A wildcard (``0.0.0.0``) would
    bind every interface, which no listener of the book does: a
    ``ValueError`` names it."""
    import ipaddress

    try:
        ip = ipaddress.IPv4Address(str(host))
    except ValueError:
        raise ValueError(
            f"host={host!r} must be an IPv4 address, e.g. 127.0.0.1"
        ) from None
    if ip.is_unspecified:
        raise ValueError(
            f"host={host!r} would listen on every interface: allowed loopback "
            "(127.0.0.1) or a node's own address"
        )
    return str(host)


def interface_of(host: str) -> str:
    """The name of the interface that holds address ``host`` here ("lo" for
    127.0.0.1; "eth0" for an emulated node's own address inside that node)."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == host for a in addrs):
            return name
    raise ValueError(f"host={host!r} is no address of this machine's interfaces")


def loopback_env(env: dict | None = None, host: str = LOOPBACK) -> dict:
    """Set the variables that keep gloo and the store on ``host``; return ``env``.

    Args:
        env: the mapping to change (``os.environ`` when None).
        host: loopback, or an emulated node's own address (run inside the
            node: gloo is told that address's interface).
    """
    env = os.environ if env is None else env
    host = check_host(host)
    ifname = "lo" if host == LOOPBACK else interface_of(host)
    env["MASTER_ADDR"] = host
    env["GLOO_SOCKET_IFNAME"] = ifname
    env["TP_SOCKET_IFNAME"] = ifname
    return env


def rewrite_bind(bind: str, host: str = LOOPBACK) -> str:
    """``"[::]:1234"`` -> ``"127.0.0.1:1234"``: keep the port, change the host."""
    if not isinstance(bind, str) or ":" not in bind:
        raise ValueError(f"bind={bind!r} must be 'HOST:PORT', e.g. '[::]:0'")
    port = bind.rsplit(":", 1)[1]
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"bind={bind!r} has port {port!r}: allowed 0 to 65535")
    return f"{check_host(host)}:{port}"


def loopback_manager_server(module=None, host: str = LOOPBACK):
    """Make ``torchft.manager`` build its ``ManagerServer`` on ``host`` only.

    torchft 0.2.0 writes ``bind=f"[::]:{port}"`` inside ``Manager.__init__``;
    this replaces the name ``ManagerServer`` in that module by a function that
    rewrites the bind and calls the original. Calling it twice is harmless.

    Args:
        module: the module to patch (``torchft.manager`` when None; tests pass
            a stand-in).
        host: the address to bind.

    Returns:
        The original ``ManagerServer``.
    """
    if module is None:
        import torchft.manager as module
    current = module.ManagerServer
    original = getattr(current, "__wrapped__", current)

    def manager_server(*args, bind: str, **kwargs):
        return original(*args, bind=rewrite_bind(bind, host), **kwargs)

    manager_server.__wrapped__ = original
    module.ManagerServer = manager_server
    return original


def loopback_store(timeout_s: float = 30.0, host: str = LOOPBACK):
    """A ``TCPStore`` master listening on ``127.0.0.1`` at a free port.

    The store is handed a socket already bound to loopback (``master_listen_fd``),
    so it never listens on another address.

    Returns:
        ``(store, port, sock)``; keep ``sock`` open as long as the store lives.
    """
    from datetime import timedelta

    from torch.distributed import TCPStore

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((check_host(host), 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    store = TCPStore(
        host,
        port,
        is_master=True,
        wait_for_workers=False,
        timeout=timedelta(seconds=timeout_s),
        master_listen_fd=sock.fileno(),
    )
    return store, port, sock


def free_port(host: str = LOOPBACK) -> int:
    """A port free on ``host`` now (the caller binds it soon after); a
    wildcard ``host`` is refused, as :func:`check_host` refuses it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((check_host(host), 0))
        return s.getsockname()[1]


def listening_addresses(pid: int) -> list[str]:
    """The local addresses on which process ``pid`` listens (TCP), as strings.

    Read from the process's own ``/proc/PID/net/tcp`` and ``tcp6``, which show
    the sockets of its network namespace: a process on an emulated node lives
    in another namespace than the caller, where psutil's table would not see
    its sockets.
    """
    import ipaddress

    proc = Path(f"/proc/{int(pid)}")
    inodes = set()
    try:
        fds = list((proc / "fd").iterdir())
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile (the listing's own fd among them)
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, width in (("tcp", 4), ("tcp6", 16)):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except (FileNotFoundError, PermissionError):
            continue
        for line in lines:
            cols = line.split()
            if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                continue
            hex_ip, hex_port = cols[1].split(":")
            raw = bytes.fromhex(hex_ip)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, width, 4))
            ip = ipaddress.ip_address(raw)
            if ip.version == 6 and ip.ipv4_mapped:
                ip = ip.ipv4_mapped
            host = f"[{ip}]" if ip.version == 6 else str(ip)
            found.add(f"{host}:{int(hex_port, 16)}")
    return sorted(found)


def is_loopback(address: str) -> bool:
    """Whether ``"IP:PORT"`` is on a loopback address (127.0.0.0/8 or ::1)."""
    import ipaddress

    ip = address.rsplit(":", 1)[0].strip("[]")
    return ipaddress.ip_address(ip).is_loopback


__all__ = [
    "LOOPBACK",
    "check_host",
    "free_port",
    "interface_of",
    "is_loopback",
    "listening_addresses",
    "loopback_env",
    "loopback_manager_server",
    "loopback_store",
    "rewrite_bind",
]
