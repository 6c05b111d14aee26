"""The harness itself: a rank that crashes or hangs is reported with its cause, not just "died".

A rank's own output is in a log of its own (worker_pool.py); these tests make a real rank crash in
native code, abort, and hang, and check that the pool's error carries the signal, the native and
Python stacks, and what the rank printed during that call only.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

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
