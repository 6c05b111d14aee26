"""The harness itself: a rank that crashes or hangs is reported with its cause, not just "died";
programs started from the preloaded server run as a fresh interpreter would run them.

A rank's own output is in a log of its own (worker_pool.py); these tests make a real rank crash in
native code, abort, and hang, and check that the pool's error carries the signal, the native and
Python stacks, and what the rank printed during that call only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

import hosts
import preloaded
import pytest
from worker_pool import CALL_MARK, WorkerPool


def body_print_then_crash_in_native_code(rank: int, world_size: int) -> None:
    print(f"rank {rank}: about to read address 0", file=sys.stderr, flush=True)
    if rank == 1:
        ctypes.string_at(0)  # SIGSEGV in native code


def body_print(rank: int, world_size: int, text: str) -> str:
    print(text, flush=True)
    return text


def body_abort(rank: int, world_size: int) -> None:
    if rank == 0:
        os.abort()


def body_sleep_in_a_named_function(rank: int, world_size: int) -> None:
    if rank == 0:
        time.sleep(600)


@pytest.fixture
def pool_of_two():
    pool = WorkerPool(2)
    yield pool
    pool.close(kill=pool.broken)
    pool.remove_logs()  # these tests kill their pools on purpose


def test_a_native_crash_reports_the_signal_the_stacks_and_this_calls_output(pool_of_two):
    assert (
        pool_of_two.run(body_print, "output of an earlier call")
        == ["output of an earlier call"] * 2
    )
    with pytest.raises(RuntimeError) as caught:
        pool_of_two.run(body_print_then_crash_in_native_code)
    message = str(caught.value)
    assert "rank 1 died during body_print_then_crash_in_native_code" in message
    assert "killed by SIGSEGV" in message
    assert "rank 1: about to read address 0" in message  # what the rank printed before
    assert "Segmentation fault" in message  # faulthandler's report, with the Python stack
    assert "body_print_then_crash_in_native_code" in message.split("killed by SIGSEGV", 1)[1]
    assert "output of an earlier call" not in message  # only the call that crashed
    assert pool_of_two.broken


def test_an_abort_is_reported_with_its_signal(pool_of_two):
    with pytest.raises(
        RuntimeError, match=r"rank 0 died during body_abort(.|\n)*killed by SIGABRT"
    ):
        pool_of_two.run(body_abort)


def test_a_hang_is_reported_with_every_live_ranks_python_stack(pool_of_two):
    with pytest.raises(TimeoutError) as caught:
        pool_of_two.run(body_sleep_in_a_named_function, timeout=3)
    message = str(caught.value)
    assert "rank 0 did not finish body_sleep_in_a_named_function within 3 s" in message
    rank0 = message.split("--- rank 0", 1)[1].split("--- rank 1", 1)[0]
    assert "still running" in rank0
    assert f"{CALL_MARK}test_worker_pool.body_sleep_in_a_named_function" in rank0
    assert "in body_sleep_in_a_named_function" in rank0  # faulthandler's dump of the sleeper


# ------------------------------------------- programs started from the preloaded server

PROGRAM = """
import atexit, os, socket, sys
import torch
atexit.register(lambda: print("atexit", flush=True))
print("argv", sys.argv[1:], "env", os.environ.get("PRELOADED_TEST"), "path", sys.path[:2])
print("main", __name__, __file__ == sys.argv[0], "host", socket.gethostname())
print("cwd", os.getcwd(), "torch", torch.arange(4).sum().item())
print("to stderr", file=sys.stderr)
GLOBAL = torch.ones(1)  # alive until the interpreter's shutdown, as a script's globals are
if sys.argv[1] == "raise":
    raise ValueError("raised by the program")
if sys.argv[1] == "sleep":
    import time
    time.sleep(600)
sys.exit(int(sys.argv[1]))
"""


def test_a_preloaded_program_runs_as_the_interpreter_would_run_it(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    env = {**os.environ, "PRELOADED_TEST": "yes", "PYTHONPATH": "/nonexistent-first"}

    # The server's own path, whatever C10D_FUNC_TEST_FRESH_INTERPRETERS says.
    def start(argument: str, merge_stderr: bool = False) -> preloaded.PreloadedProcess:
        command = [sys.executable, str(program), argument]
        return preloaded.PreloadedProcess(command, env, None, merge_stderr)

    proc = start("3")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, (out, err)
    assert f"argv ['3'] env yes path ['{tmp_path}', '/nonexistent-first']" in out, out
    assert "main __main__ True" in out and f"cwd {os.getcwd()} torch 6" in out, out
    assert out.endswith("atexit\n") and err == "to stderr\n", (out, err)

    # An uncaught exception: its traceback on stderr and exit code 1, atexit still run.
    proc = start("raise", merge_stderr=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and err is None, out
    assert "ValueError: raised by the program" in out and out.endswith("atexit\n"), out

    # Killed: the signal as Popen reports it; a timeout keeps what was read for the next call.
    proc = start("sleep")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.communicate(timeout=1)
    assert proc.poll() is None
    proc.kill()
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL and "argv ['sleep']" in out, out


def test_a_preloaded_program_joins_a_test_hosts_namespaces(tmp_path):
    why_not = hosts.available()
    if why_not:
        pytest.skip(why_not)  # no namespaces here (not root); CI's skip policy fails the run
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    with hosts.TestHosts(2) as made:
        launchers = made.launch(str(program), [1, 1], ["0"])
        ranks, leftovers = hosts.host_results(launchers, timeout=120)
    for rank in (0, 1):
        code, out = ranks[rank]
        assert code == 0 and f"host testhost{rank}" in out, out
    assert leftovers == {0: [], 1: []}
