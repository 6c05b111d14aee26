"""A pool of real rank processes, reused across test cases.

Each worker is a spawned Python process with its own rank; together they form a world over a
real TCPStore (env:// variables: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) and talk over real
Gloo. A test sends a module-level function to every rank; each rank calls it as fn(rank,
world_size, *args) and the pool returns the results in rank order. Every call has a timeout: a
rank that does not answer in time makes the pool kill all its workers and raise, so nothing hangs
and the next test starts a fresh pool.

A worker writes its stdout and stderr to a log file of its own, with Python's faulthandler and
torch's fatal-signal handler on: a rank that dies (a segfault, an abort, an exit) or hangs is
reported with how it ended and what it printed since the call began, including the Python and
native stacks of a crash and, for a hang, every thread's Python stack (the pool asks for them
with SIGUSR1 before it kills). Otherwise a child's output went to whatever pytest captured when
the pool started, and a death was reported with no cause.
"""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import preloaded

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# Long enough for the slowest real case on 2 cores, short enough that a bug fails fast.
DEFAULT_CALL_TIMEOUT = 180.0
# How much slower than usual this run is (scripts/sanitize.sh sets it: instrumented code runs
# several times slower): every bound of the harness, and the library timeouts the tests set
# (scaled_env), stretch by it, so that a sanitizer run fails on findings, not on the clock.
SLOWDOWN = float(os.environ.get("C10D_FUNC_TEST_SLOWDOWN", "1"))


def scaled_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with its C10D_FUNC_TIMEOUT stretched by SLOWDOWN."""
    if "C10D_FUNC_TIMEOUT" not in env or SLOWDOWN == 1:
        return env
    return {**env, "C10D_FUNC_TIMEOUT": str(float(env["C10D_FUNC_TIMEOUT"]) * SLOWDOWN)}


def launch_ranks(
    command: list[str], world_size: int, env: dict[str, str] | None = None
) -> list[subprocess.Popen]:
    """Starts `command` once per rank, each with its env:// world (a fresh MASTER_PORT), for
    programs that must run in processes of their own (exits, crashes, C++ programs)."""
    base = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(world_size),
        # The programs import the tests' helpers (process_sync, reference, ...), as on test hosts.
        "PYTHONPATH": os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])),
        **scaled_env(env or {}),
    }
    # Python programs start from a process that has imported torch already (preloaded.py).
    return [preloaded.start(command, {**base, "RANK": str(rank)}) for rank in range(world_size)]


def finish_ranks(procs: list[subprocess.Popen], timeout: float = 120) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each rank; every process is killed after `timeout`."""
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout * SLOWDOWN)
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            proc.kill()
    return results


class RankError(AssertionError):
    """A rank raised; carries every failing rank's traceback."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What the pool reports of a rank's log since the call began: its start (what the rank printed,
# then a crash's native stack of the crashing thread, printed first) and its end (the Python
# stack); the middle (other threads' native stacks) is cut past these bounds.
LOG_HEAD_CHARS = 8000
LOG_TAIL_CHARS = 4000
# Marks the start of each call in a rank's log, so that a report leaves earlier calls out.
CALL_MARK = "=== worker_pool call: "
# How faulthandler's dump of a thread's Python stack begins its frames.
STACK_MARK = "most recent call first"
# How long a hung rank gets to write its stacks once asked (it writes them from a signal handler).
STACK_DUMP_TIMEOUT = 5.0


def _log_to_file(path: str) -> None:
    """This process's stdout and stderr (the file descriptors, so C++ and native crash reports
    too) into `path`; Python stacks on a fatal signal and, on SIGUSR1, of every thread."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    faulthandler.enable(all_threads=True)
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def _worker_main(
    rank: int,
    world_size: int,
    environ: dict[str, str],
    env: dict[str, str],
    conn: Any,
    log_path: str,
) -> None:
    _log_to_file(log_path)
    # The pool's environment when it started (a forked worker has the fork server's), and its own.
    os.environ.clear()
    os.environ.update(environ)
    os.environ.update(env)
    os.environ["RANK"] = str(rank)
    sys.path.insert(0, TESTS_DIR)
    import importlib

    import c10d_func  # noqa: F401
    import torch

    # The native stack of a crash in C++ (torch chains to faulthandler's Python stack after it).
    if hasattr(torch._C, "_set_print_stack_traces_on_fatal_signal"):  # a private torch API
        torch._C._set_print_stack_traces_on_fatal_signal(True)

    setup = env.get("C10D_FUNC_TEST_SETUP")
    if setup:
        module_name, _, name = setup.partition(":")
        getattr(importlib.import_module(module_name), name)(rank, world_size)
    conn.send(("ready", None))
    while True:
        message = conn.recv()
        if message is None:
            break
        module_name, qualname, args, kwargs = message
        print(f"{CALL_MARK}{module_name}.{qualname}", file=sys.stderr, flush=True)
        try:
            fn = getattr(importlib.import_module(module_name), qualname)
            conn.send(("ok", fn(rank, world_size, *args, **kwargs)))
        except BaseException as error:  # noqa: BLE001 - report everything, keep serving
            conn.send(("error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}"))


def _worker_context() -> Any:
    """Workers are forked from multiprocessing's fork server, which imports torch once (about
    3 s of CPU saved per worker) and Dynamo and inductor (as much again for each worker that
    compiles; a worker ends with os._exit, so they add nothing to its exit);
    C10D_FUNC_TEST_FRESH_INTERPRETERS=1 spawns fresh ones."""
    if preloaded.fresh_interpreters():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch._dynamo", "torch._inductor.compile_fx"])
    return ctx


class WorkerPool:
    def __init__(
        self,
        world_size: int,
        env: dict[str, str] | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self.world_size = world_size
        self.env = scaled_env(
            {
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(free_port()),
                "WORLD_SIZE": str(world_size),
                "C10D_FUNC_TIMEOUT": "60",
                **(env or {}),
            }
        )
        ctx = _worker_context()
        self._conns = []
        self._procs = []
        self._log_dir = tempfile.mkdtemp(prefix=f"c10d_func_pool_ws{world_size}_")
        self._logs = [os.path.join(self._log_dir, f"rank{r}.log") for r in range(world_size)]
        for rank in range(world_size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_worker_main,
                args=(rank, world_size, dict(os.environ), self.env, child, self._logs[rank]),
                daemon=True,
            )
            proc.start()
            self._conns.append(parent)
            self._procs.append(proc)
        self._collect(start_timeout, what="start")
        self.broken = False

    def run(
        self,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float = DEFAULT_CALL_TIMEOUT,
        **kwargs: Any,
    ) -> list[Any]:
        """Runs fn(rank, world_size, *args, **kwargs) on every rank; returns results by rank."""
        if self.broken:
            raise RuntimeError("worker pool is broken by an earlier failure")
        message = (fn.__module__, fn.__qualname__, args, kwargs)
        for rank, conn in enumerate(self._conns):
            try:
                conn.send(message)
            except (BrokenPipeError, ConnectionResetError):
                # The rank died since the last call (killed, out of memory): this pool is done;
                # the next test gets a fresh one instead of every later test failing here.
                raise self._killed_after(rank, f"rank {rank} is gone") from None
        return self._collect(timeout, what=fn.__qualname__)

    def _collect(self, timeout: float, what: str) -> list[Any]:
        timeout *= SLOWDOWN
        deadline = time.monotonic() + timeout
        results: list[Any] = [None] * self.world_size
        errors = []
        for rank, conn in enumerate(self._conns):
            remaining = deadline - time.monotonic()
            if not conn.poll(max(remaining, 0)):
                stacks = self._stacks_of_live_ranks()
                self.close(kill=True)
                raise TimeoutError(
                    f"rank {rank} did not finish {what} within {timeout:.0f} s; pool killed\n"
                    f"{stacks}"
                )
            try:
                status, value = conn.recv()
            except EOFError:
                raise self._killed_after(rank, f"rank {rank} died during {what}") from None
            if status == "error":
                errors.append(f"--- rank {rank} ---\n{value}")
            else:
                results[rank] = value
        if errors:
            raise RankError("\n".join(errors))
        return results

    def _killed_after(self, rank: int, what_happened: str) -> RuntimeError:
        """Kills the pool once rank `rank` is gone; the error to raise, with its report."""
        report = self.report(rank)
        self.close(kill=True)
        return RuntimeError(f"{what_happened}; pool killed\n{report}")

    def report(self, rank: int, wait: bool = True) -> str:
        """How rank `rank` ended (if it did) and its log since its current call began."""
        proc = self._procs[rank]
        if wait:
            proc.join(timeout=5)  # a dying process may still be writing its crash report
        code = proc.exitcode
        if code is None:
            ended = "still running"
        elif code < 0:
            ended = f"killed by {signal.Signals(-code).name}"
        else:
            ended = f"exited with code {code}"
        return f"--- rank {rank} ({ended}), log {self._logs[rank]}:\n{self.log_since_call(rank)}"

    def log_since_call(self, rank: int) -> str:
        """Rank `rank`'s output since its last call began, its middle cut past LOG_HEAD_CHARS +
        LOG_TAIL_CHARS."""
        try:
            with open(self._logs[rank], errors="replace") as log:
                text = log.read()
        except OSError as error:
            return f"(no log: {error})"
        text = text[text.rfind(CALL_MARK) :] if CALL_MARK in text else text
        if len(text) <= LOG_HEAD_CHARS + LOG_TAIL_CHARS:
            return text
        cut = len(text) - LOG_HEAD_CHARS - LOG_TAIL_CHARS
        return f"{text[:LOG_HEAD_CHARS]}\n[... {cut} characters ...]\n{text[-LOG_TAIL_CHARS:]}"

    def _stacks_of_live_ranks(self) -> str:
        """Every live rank's Python stacks (faulthandler's SIGUSR1 dump) and log, for a hang."""
        live = [r for r, proc in enumerate(self._procs) if proc.is_alive()]
        for rank in live:
            os.kill(self._procs[rank].pid, signal.SIGUSR1)
        deadline = time.monotonic() + STACK_DUMP_TIMEOUT
        waiting = set(live)
        while waiting and time.monotonic() < deadline:
            waiting = {r for r in waiting if STACK_MARK not in self.log_since_call(r)}
            time.sleep(0.01)  # polling the logs until each holds its dump, bounded above
        return "\n".join(self.report(rank, wait=False) for rank in range(self.world_size))

    def close(self, kill: bool = False) -> None:
        self.broken = True
        if not kill:
            for conn in self._conns:
                try:
                    conn.send(None)
                except (BrokenPipeError, OSError):
                    pass
            for proc in self._procs:
                proc.join(timeout=10)
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
        # A pool that ended well leaves nothing behind; a killed one keeps its ranks' logs for
        # whoever reads the error that named them.
        if not kill:
            self.remove_logs()

    def remove_logs(self) -> None:
        """Deletes the ranks' logs (for a pool killed on purpose, once its error was read)."""
        shutil.rmtree(self._log_dir, ignore_errors=True)
