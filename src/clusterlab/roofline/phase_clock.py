"""The clock of the workload kernels: seconds per phase, FLOPs and bytes counted.

A kernel calls ``lap(phase)`` at the end of each stretch of work, so the
phases' seconds add up to the kernel's time. Files are written durably and
then dropped from the page cache, so that reading them goes to the disk
where the operating system allows it.
"""

from __future__ import annotations

import os
import socket
import time

PHASES = ("io", "dense", "stream", "branchy")


FP32_BYTES = 4


class Clock:
    """Seconds per phase, with the FLOPs, bytes and messages counted on the way."""

    def __init__(self):
        self.s = dict.fromkeys(PHASES, 0.0)
        self.flop = 0.0
        self.bytes = 0.0
        self.messages = 0
        self.t = time.perf_counter()

    def start(self) -> None:
        """Start timing now (after the kernel's data is made)."""
        self.t = time.perf_counter()

    def lap(self, phase: str) -> None:
        """Charge the time since the last lap to ``phase``."""
        now = time.perf_counter()
        self.s[phase] += now - self.t
        self.t = now


def socket_pair():
    """Two connected local datagram sockets (one message per send)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)


def cold_file(folder: str, name: str, data: bytes) -> str:
    """Write ``data`` durably, then ask the kernel to drop it from the page cache."""
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    return path


def read_file(c: Clock, path: str) -> bytes:
    """Read a whole file, charged to ``io``."""
    c.lap("branchy")
    with open(path, "rb") as f:
        data = f.read()
    c.bytes += len(data)
    c.lap("io")
    return data


def write_durably(c: Clock, path: str, blob: bytes) -> None:
    """Write a file and wait until it is on disk, charged to ``io``."""
    c.lap("branchy")
    with open(path, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    c.bytes += len(blob)
    c.lap("io")


def matmul(c: Clock, a, b):
    """``a @ b`` charged to ``dense``, with 2mnk FLOPs and its operands' bytes."""
    c.lap("stream")
    out = a @ b
    c.flop += 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    c.bytes += FP32_BYTES * (a.numel() + b.numel() + out.numel())
    c.lap("dense")
    return out


def count_elementwise(c: Clock, n: int, flop_each: float, arrays: int) -> None:
    """Count an element-wise step over ``n`` values touching ``arrays`` arrays."""
    c.flop += flop_each * n
    c.bytes += FP32_BYTES * arrays * n
