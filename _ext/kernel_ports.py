"""Kernels get ports below the system's ephemeral range (tests and ``make book``).

jupyter_client picks a kernel's five ports by binding port 0 and letting go,
and the kernel binds them a second or two later, once Python has started.
Port 0 hands out ports of the ephemeral range, the same range every outgoing
connection takes its local port from, and the labs open many (gloo meshes,
torchft's quorums, torchrun's restarts). Twice in one day a kernel died with
``ZMQError: Address already in use`` because a connection had taken its port
in that window. Ports just below the range are never handed out implicitly;
each is still checked free and kept once per process.

The test run (``conftest.py``) and ``scripts/execute_labs.py``, which runs two
labs' kernels at once, both call :func:`use_ports_below_the_ephemeral_range`.
"""

from __future__ import annotations

import random
import socket


def use_ports_below_the_ephemeral_range() -> None:
    """Make jupyter_client choose kernel ports below the ephemeral range."""
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
