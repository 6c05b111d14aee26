"""How the standalone test programs (programs/) tell each other that a step happened, without
sleeping: a file that appears whole (written aside, then renamed), a wait for a condition, and
whether a process has exited. Every test host shares the file system and the pid namespace."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def mark(path: str, text: str = "1") -> None:
    """Creates `path` holding `text`, whole at once."""
    with open(path + ".tmp", "w") as file:
        file.write(text)
    os.rename(path + ".tmp", path)


def until(condition: Callable[[], bool], what: str) -> None:
    """Waits for `condition`. The bound is only against a broken test: the harness's own
    timeout ends a stuck process first."""
    deadline = time.monotonic() + 600
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"never saw {what}")
        time.sleep(0.001)


def exited(pid: int) -> bool:
    """The process has exited; a killed child stays a zombie until its parent reaps it, and has
    exited all the same."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (ProcessLookupError, FileNotFoundError):
        return True
