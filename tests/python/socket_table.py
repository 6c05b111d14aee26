"""Connections read from the kernel's socket tables, for tests and benchmarks that count what a
run opened (an independent reference: the library's own counters are not consulted)."""

from __future__ import annotations

from pathlib import Path

ESTABLISHED, TIME_WAIT = "01", "06"


def store_connections_opened(port: int) -> int:
    """Client connections to `port` in this network namespace that are open or were closed
    within the last minute (TIME_WAIT, kept on the side that closed: the client)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            remote, state = line.split()[2:4]
            if int(remote.rsplit(":", 1)[1], 16) == port and state in (ESTABLISHED, TIME_WAIT):
                count += 1
    return count
