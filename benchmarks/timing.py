"""The measurement loop: warm-up, then timed blocks interleaved round-robin between candidates.

Interleaving spreads slow drift (other load on the machine, frequency changes) over every candidate
equally; a barrier before each block gives every rank the same start. The per-rank times are turned
into per-iteration times (max over ranks) on rank 0 by `max_over_ranks`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

Thunk = Callable[[], object]  # one complete iteration: the op and its wait


def device_sync(device: torch.device) -> Callable[[], None]:
    """What makes an iteration's end observable on the host: nothing on CPU, a sync on CUDA."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def measure_interleaved(
    thunks: dict[str, Thunk],
    *,
    iters: int,
    warmup: int,
    block: int,
    barrier: Callable[[], None],
    sync: Callable[[], None],
) -> dict[str, list[float]]:
    """Seconds per iteration on this rank, `iters` per candidate, in blocks of `block`.

    Every rank must call this with the same candidates in the same order (collectives inside).
    """
    names = list(thunks)
    for name in names:
        barrier()
        for _ in range(warmup):
            thunks[name]()
        sync()
    times: dict[str, list[float]] = {name: [] for name in names}
    round_ = 0
    while any(len(times[name]) < iters for name in names):
        # Rotate the order so that no candidate always runs first after the barrier.
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            count = min(block, iters - len(times[name]))
            barrier()
            for _ in range(count):
                start = time.perf_counter()
                thunks[name]()
                sync()
                times[name].append(time.perf_counter() - start)
        round_ += 1
    return times


def max_over_ranks(per_rank: list[list[float]]) -> list[float]:
    """Iteration i takes as long as its slowest rank."""
    return [max(ts) for ts in zip(*per_rank, strict=True)]


def median(values: list[float]) -> float:
    return statistics.median(values)
