"""What large CPU messages are measured against, in the same run as the sweep: a memcpy of the
same size into memory already touched (the roofline a collective that moves each byte once could
approach), the classic in-place `dist.all_reduce` on a persistent bucket (what DDP does: no fresh
output, no clone) on the default Gloo group and on a group of backend `c10d_func`, and the peak
resident memory of each implementation (VmHWM, reset before each through /proc/self/clear_refs;
shared memory a process touched counts in its RSS, so the shm pool is included)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from .timing import measure_interleaved

# Below this, page faults and bandwidth do not decide: the extra measurements are skipped.
FROM_BYTES = 1 << 20
ROOFLINE = "memcpy"
INPLACE = {"dist in place (Gloo)": None, "dist in place on c10d_func": "c10d_func"}


def _peak_rss_mib(thunk: Callable[[], object], runs: int) -> float | None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        return None
    for _ in range(runs):
        thunk()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def measure(
    op: str,
    x: torch.Tensor,
    thunks: dict[str, Callable[[], object]],
    cfg: dict[str, Any],
    barrier: Callable[[], None],
    backend_group: Callable[[], dist.ProcessGroup],
) -> dict[str, Any]:
    """The extra measurements of one large point; every rank calls it alike."""
    touched = torch.empty_like(x).fill_(0)
    extra = {ROOFLINE: lambda: touched.copy_(x)}
    if op == "all_reduce":
        for name, backend in INPLACE.items():
            bucket = x.clone()  # persistent and touched, as a DDP bucket
            group = backend_group() if backend else None
            extra[name] = lambda b=bucket, g=group: dist.all_reduce(b, group=g)
    times = measure_interleaved(
        extra,
        iters=cfg["iters"],
        warmup=cfg["warmup"],
        block=cfg["block"],
        barrier=barrier,
        sync=lambda: None,
    )
    peak = {}
    for name, thunk in {**thunks, **extra}.items():
        barrier()
        peak[name] = _peak_rss_mib(thunk, runs=3)
    return {"extra_times_s": times, "peak_rss_mib": peak}
