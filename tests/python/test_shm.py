"""The shm transport: what the op suite (run on both CPU transports) does not show. A member
killed during a large collective fails the others within the timeout, naming its rank; no
segment is left in /dev/shm by a kill or a normal exit; two jobs on one host do not interfere;
chunks spanning hosts (faked with the test-only C10D_FUNC_TEST_HOST_ID) pick Gloo; members in
different collectives fail instead of mixing data."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

import c10d_func
from worker_pool import WorkerPool, free_port

ops = torch.ops.c10d_func
HERE = os.path.dirname(os.path.abspath(__file__))


def launch(program: str, world_size: int, *args: str, env: dict[str, str] | None = None):
    port = str(free_port())
    base = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": port,
        "WORLD_SIZE": str(world_size),
        **(env or {}),
    }
    return [
        subprocess.Popen(
            [sys.executable, os.path.join(HERE, "programs", program), *args],
            env={**base, "RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world_size)
    ]


def finish(procs, timeout: float = 120):
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            proc.kill()
    return results


def segments_of(pids) -> list[str]:
    """The /dev/shm entries this library names after a process (rank 0 creates them)."""
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return [n for n in names if n.startswith("c10d_func_") and any(n.endswith(f"_{p}") for p in pids)]


def test_a_member_killed_mid_collective_fails_the_others_naming_it():
    procs = launch("shm_member_killed.py", 2, env={"C10D_FUNC_TIMEOUT": "10"})
    pids = [p.pid for p in procs]
    (code0, out0, err0), (code1, _, _) = finish(procs)
    assert code1 == -9, "rank 1 was to be killed"
    assert code0 == 0, err0[-2000:]
    line = next(l for l in out0.splitlines() if l.startswith("RESULT "))
    assert "no error" not in line, line
    elapsed = float(line.split()[1])
    assert elapsed < 10, f"took {elapsed} s; the timeout is 10 s"
    assert "rank 1" in line and "c10d_func.all_reduce" in line, line
    assert segments_of(pids) == []


def test_two_jobs_on_one_host_do_not_interfere():
    jobs = [launch("shm_job.py", 2, str(job)) for job in (1, 2)]
    pids = [p.pid for procs in jobs for p in procs]
    for job, procs in enumerate(jobs, start=1):
        for rank, (code, out, err) in enumerate(finish(procs)):
            assert code == 0 and "job ok" in out, f"job {job} rank {rank}: {out}{err[-2000:]}"
    assert segments_of(pids) == []


def setup_two_hosts(rank: int, world_size: int) -> None:
    # Test-only: ranks 0, 1 claim host "a" and ranks 2, 3 host "b".
    os.environ["C10D_FUNC_TEST_HOST_ID"] = "a" if rank < 2 else "b"


def body_chunks_across_hosts(rank: int, world_size: int):
    everyone = list(range(world_size))
    results = {
        "pairs": ops.wait_tensor(ops.all_reduce(torch.full((3,), float(rank)), "sum", "", everyone, 2)).tolist(),
        "world": ops.wait_tensor(ops.all_reduce(torch.full((3,), float(rank)), "sum", "", everyone, 4)).tolist(),
    }
    backends = {tuple(g["ranks"]): g["backend"] for g in c10d_func.groups() if g["tag"] == ""}
    c10d_func.set_transport("shm", "cpu", tag="only-shm")
    try:
        ops.all_reduce(torch.ones(2), "sum", "only-shm", everyone, 4)
        forced = "no error"
    except RuntimeError as error:
        forced = str(error)
    return results, backends, forced


def test_chunks_spanning_hosts_pick_gloo():
    pool = WorkerPool(4, env={"C10D_FUNC_TEST_SETUP": "test_shm:setup_two_hosts", "C10D_FUNC_TIMEOUT": "30"})
    try:
        answers = pool.run(body_chunks_across_hosts, timeout=120)
    finally:
        pool.close()
    for rank, (results, backends, forced) in enumerate(answers):
        pair = [0, 1] if rank < 2 else [2, 3]
        assert results["pairs"] == [float(sum(pair))] * 3
        assert results["world"] == [6.0] * 3
        assert backends[tuple(pair)] == "shm"
        assert backends[(0, 1, 2, 3)] == "gloo"
        assert "the shm transport needs every member of the group on one host" in forced, forced
        others = "[2, 3]" if rank < 2 else "[0, 1]"
        assert f"ranks {others} run on another host" in forced, forced


def body_different_collectives(rank: int, world_size: int, tag: str):
    ranks = list(range(world_size))
    try:
        if rank == 0:
            ops.wait_tensor(ops.all_gather_into_tensor(torch.ones(3), tag, ranks, world_size))
        else:
            ops.wait_tensor(ops.all_reduce(torch.ones(3), "sum", tag, ranks, world_size))
        return "no error"
    except RuntimeError as error:
        return str(error)


def test_members_in_different_collectives_fail_instead_of_mixing_data():
    pool = WorkerPool(2, env={"C10D_FUNC_TIMEOUT": "20"})
    try:
        messages = pool.run(body_different_collectives, "mixed", timeout=90)
    finally:
        pool.close()
    for message in messages:
        assert "the members are in different collectives" in message, message
