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

LOOPBACK = "127.0.0.1"


def loopback_env(env: dict | None = None) -> dict:
    """Set the variables that keep gloo and the store on loopback; return ``env``.

    Args:
        env: the mapping to change (``os.environ`` when None).
    """
    env = os.environ if env is None else env
    env["MASTER_ADDR"] = LOOPBACK
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env["TP_SOCKET_IFNAME"] = "lo"
    return env


def rewrite_bind(bind: str, host: str = LOOPBACK) -> str:
    """``"[::]:1234"`` -> ``"127.0.0.1:1234"``: keep the port, change the host."""
    if not isinstance(bind, str) or ":" not in bind:
        raise ValueError(f"bind={bind!r} must be 'HOST:PORT', e.g. '[::]:0'")
    port = bind.rsplit(":", 1)[1]
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"bind={bind!r} has port {port!r}: allowed 0 to 65535")
    return f"{host}:{port}"


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


def loopback_store(timeout_s: float = 30.0):
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
    sock.bind((LOOPBACK, 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    store = TCPStore(
        LOOPBACK,
        port,
        is_master=True,
        wait_for_workers=False,
        timeout=timedelta(seconds=timeout_s),
        master_listen_fd=sock.fileno(),
    )
    return store, port, sock


def free_port(host: str = LOOPBACK) -> int:
    """A port free on ``host`` now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def listening_addresses(pid: int) -> list[str]:
    """The local addresses on which process ``pid`` listens (TCP), as strings."""
    import psutil

    try:
        conns = psutil.Process(pid).net_connections(kind="inet")
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return []
    return sorted(
        {
            f"{c.laddr.ip}:{c.laddr.port}"
            for c in conns
            if c.status == psutil.CONN_LISTEN
        }
    )


def is_loopback(address: str) -> bool:
    """Whether ``"IP:PORT"`` is on a loopback address (127.0.0.0/8 or ::1)."""
    import ipaddress

    ip = address.rsplit(":", 1)[0].strip("[]")
    return ipaddress.ip_address(ip).is_loopback


__all__ = [
    "LOOPBACK",
    "free_port",
    "is_loopback",
    "listening_addresses",
    "loopback_env",
    "loopback_manager_server",
    "loopback_store",
    "rewrite_bind",
]
