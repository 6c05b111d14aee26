"""Shared fixtures: rank pools reused across the whole session (spawning ranks and importing
torch is the expensive part), recreated only when a test breaks one."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Inductor compiles in worker processes of its own, started per compiling process, each importing
# torch (about 5 s of CPU): per rank, on a machine whose cores the ranks already share. Every
# process of the tests (pytest, the pools' ranks, the programs they launch, the test hosts' ranks)
# inherits this and compiles in its own process instead.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

from worker_pool import WorkerPool

# Skips other than GPU-only ones fail CI (skip_policy.py).
pytest_plugins = ["skip_policy"]

_pools: dict[tuple, WorkerPool] = {}  # in order of last use, oldest first

# Every rank holds torch (and, once it compiled, inductor): about 1 GB each (2.5 GB under TSan).
# Pools kept for the whole session would add up past the memory of a small machine, so only the
# most recently used ones stay, up to this many ranks in all (the four pools of the `pool`
# fixture); scripts/sanitize.sh lowers it (C10D_FUNC_TEST_MAX_CACHED_RANKS).
MAX_CACHED_RANKS = int(os.environ.get("C10D_FUNC_TEST_MAX_CACHED_RANKS", "12"))


def get_pool(world_size: int, env: dict[str, str] | None = None) -> WorkerPool:
    """The session's pool of `world_size` ranks started with `env` (variables read once at start,
    such as C10D_FUNC_DEBUG), made on first use and again after a test broke it or after it was
    closed to make room for others."""
    key = (world_size, tuple(sorted((env or {}).items())))
    pool = _pools.pop(key, None)
    if pool is None or pool.broken:
        while _pools and sum(k[0] for k in _pools) + world_size > MAX_CACHED_RANKS:
            _pools.pop(next(iter(_pools))).close()
        pool = WorkerPool(world_size, env=env)
    _pools[key] = pool  # now the most recently used
    return pool


# The CPU transports every pooled multi-process test runs on: the default ("auto": shared memory
# for ranks on one host) and Gloo.
TRANSPORTS = {"shm": {}, "gloo": {"C10D_FUNC_CPU_TRANSPORT": "gloo"}}


@pytest.fixture(
    params=[(n, t) for t in TRANSPORTS for n in (2, 4)],
    ids=[f"{t}-ws{n}" for t in TRANSPORTS for n in (2, 4)],
)
def pool(request: pytest.FixtureRequest) -> WorkerPool:
    world_size, transport = request.param
    return get_pool(world_size, TRANSPORTS[transport] or None)


@pytest.fixture
def pool2() -> WorkerPool:
    return get_pool(2)


@pytest.fixture
def pool4() -> WorkerPool:
    return get_pool(4)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for pool in _pools.values():
        pool.close()
