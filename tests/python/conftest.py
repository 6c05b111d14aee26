"""Shared fixtures: rank pools reused across the whole session (spawning ranks and importing
torch is the expensive part), recreated only when a test breaks one."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from worker_pool import WorkerPool  # noqa: E402

_pools: dict[int, WorkerPool] = {}


def get_pool(world_size: int) -> WorkerPool:
    pool = _pools.get(world_size)
    if pool is None or pool.broken:
        pool = WorkerPool(world_size)
        _pools[world_size] = pool
    return pool


@pytest.fixture(params=[2, 4], ids=["ws2", "ws4"])
def pool(request: pytest.FixtureRequest) -> WorkerPool:
    return get_pool(request.param)


@pytest.fixture
def pool2() -> WorkerPool:
    return get_pool(2)


@pytest.fixture
def pool4() -> WorkerPool:
    return get_pool(4)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for pool in _pools.values():
        pool.close()
