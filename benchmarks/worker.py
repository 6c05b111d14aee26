"""One rank of a benchmark run: `python -m benchmarks.worker CONFIG.json`, started by the launcher.

It joins the default process group, checks every op and implementation once, measures the sweep
(and the compiled step when asked), and sends its raw per-iteration times to rank 0, which writes
them to the config's `raw_path`. Summaries are the runner's job (benchmarks.stats).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from . import memory_bound
from .correctness import ERROR, OK, UNAVAILABLE, check
from .impls import (
    BUILDERS,
    FRONTEND,
    IMPL_NAMES,
    GroupCtx,
    dist_on_c10d_func_group,
    input_numel,
    missing_reason,
)
from .mlp_step import run_step_benchmark
from .timing import device_sync, measure_interleaved


def _log(rank: int, msg: str) -> None:
    if rank == 0:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)


def _init(cfg: dict[str, Any]) -> tuple[int, int, torch.device, dist.ProcessGroup]:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    url = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    timeout = datetime.timedelta(seconds=cfg["timeout_s"])
    if cfg["device"] == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        torch.cuda.set_device(device)
        backend = "cpu:gloo,cuda:nccl"  # NCCL measures; Gloo carries the CPU-side control traffic
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, init_method=url, rank=rank, world_size=world, timeout=timeout)
    # Barriers, agreement and result gathering run on a group of their own, so that this control
    # traffic never shares a communicator with the measured collectives.
    control = dist.new_group(backend="gloo")
    return rank, world, device, control


def _check_all(
    ctx: GroupCtx, device: torch.device, ops: list[str], control: dist.ProcessGroup
) -> dict[str, dict[str, dict[str, Any]]]:
    """status[op][impl] = {"status": ok|mismatch|error|unavailable, "detail": text or None}."""
    # A root other than 0 catches an implementation that ignores its broadcast src.
    check_ctx = GroupCtx(ctx.rank, ctx.world, ctx.group, src=ctx.world - 1, tag=ctx.tag)
    status: dict[str, dict[str, dict[str, Any]]] = {op: {} for op in ops}
    for impl in IMPL_NAMES:
        missing = missing_reason(impl, device.type)
        fns = {} if missing else BUILDERS[impl](check_ctx)
        for op in ops:
            if op not in fns:
                detail = missing or f"the frontend has no {op}"
                status[op][impl] = {"status": UNAVAILABLE, "detail": detail}
                continue
            local = check(op, fns[op], check_ctx, device)
            every: list[Any] = [None] * ctx.world
            dist.all_gather_object(every, local, group=control)
            bad = [(r, s, d) for r, (s, d) in enumerate(every) if s != OK]
            # The worst outcome on any rank is the outcome: an error anywhere means not timed.
            worst = ERROR if any(s == ERROR for _, s, _ in bad) else (bad[0][1] if bad else OK)
            detail = "; ".join(f"rank {r}: {d}" for r, _, d in bad) or None
            status[op][impl] = {"status": worst, "detail": detail}
            _log(ctx.rank, f"check {op:<15} {impl:<28} {worst}{': ' + detail if detail else ''}")
    return status


def _sweep(
    ctx: GroupCtx,
    device: torch.device,
    cfg: dict[str, Any],
    status: dict[str, dict[str, dict[str, Any]]],
    barrier: Callable[[], None],
) -> list[dict[str, Any]]:
    fns = {
        impl: BUILDERS[impl](ctx)
        for impl in IMPL_NAMES
        if missing_reason(impl, device.type) is None
    }
    sync = device_sync(device)
    rows = []
    for op in cfg["ops"]:
        timed = [i for i in fns if status[op][i]["status"] not in (ERROR, UNAVAILABLE)]
        for size in cfg["sizes"]:
            numel = input_numel(op, size, ctx.world)
            x = torch.full((numel,), float(ctx.rank + 1), device=device)
            thunks = {impl: (lambda fn=fns[impl][op], x=x: fn(x)) for impl in timed}
            times = measure_interleaved(
                thunks,
                iters=cfg["iters"],
                warmup=cfg["warmup"],
                block=cfg["block"],
                barrier=barrier,
                sync=sync,
            )
            row = {"op": op, "size": size, "numel": numel, "times_s": times}
            if device.type == "cpu" and numel * x.element_size() >= memory_bound.FROM_BYTES:
                row.update(
                    memory_bound.measure(op, x, thunks, cfg, barrier, dist_on_c10d_func_group)
                )
            rows.append(row)
            _log(ctx.rank, f"timed {op} {size} B")
    return rows


def _steps(
    ctx: GroupCtx,
    device: torch.device,
    cfg: dict[str, Any],
    barrier: Callable[[], None],
    agree: Callable[[bool], bool],
) -> list[dict[str, Any]]:
    rows = []
    for backend in cfg["step_backends"]:
        _log(ctx.rank, f"compiled step, backend {backend}")
        try:
            row = run_step_benchmark(
                ctx,
                device,
                backend,
                iters=cfg["iters"],
                warmup=max(1, cfg["warmup"]),  # at least one step after compiling
                block=cfg["block"],
                barrier=barrier,
                sync=device_sync(device),
                agree=agree,
            )
        except Exception as e:  # noqa: BLE001 - the step must not take the sweep's results down
            row = {"backend_requested": backend, "error": f"{type(e).__name__}: {e}"[:500]}
        rows.append(row)
    return rows


def _metadata(world: int, device: torch.device, cfg: dict[str, Any]) -> dict[str, Any]:
    import c10d_func

    meta: dict[str, Any] = {
        "torch_version": torch.__version__,
        # Which build ran: an editable install in the environment can shadow PYTHONPATH.
        "c10d_func_path": os.path.dirname(c10d_func.__file__),
        "c10d_func_native": c10d_func._C.__file__,
        "world_size": world,
        "device": str(device.type),
        "threads_per_rank": torch.get_num_threads(),
        "frontend_note": missing_reason(FRONTEND),
        "transport": cfg.get("transport") or "default",
    }
    if device.type == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(device)
    return meta


def main(config_path: str) -> int:
    # torch 2.14 deprecates the classic *_tensor names in favour of *_single; the issue asks for
    # the established names, and one warning per call site per rank would drown the progress log.
    warnings.filterwarnings(
        "ignore", message=r"`torch\.distributed\.\w+` is deprecated", category=FutureWarning
    )
    cfg = json.loads(Path(config_path).read_text())
    torch.set_num_threads(cfg["threads"])
    rank, world, device, control = _init(cfg)
    import c10d_func  # after the default group exists, so that it becomes c10d_func's world

    tag = ""
    if cfg.get("transport"):
        # Pinned for a tag of its own: the transport runs even in a world of one rank, where the
        # library's default is a local copy.
        tag = f"bench-{cfg['transport']}"
        c10d_func.set_transport(cfg["transport"], device.type, tag=tag)
    ctx = GroupCtx(rank, world, dist.group.WORLD, tag=tag)

    def barrier() -> None:
        dist.barrier(group=control)

    def agree(ok: bool) -> bool:
        flag = torch.tensor([1 if ok else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=control)
        return bool(flag.item())

    status = _check_all(ctx, device, cfg["ops"], control)
    sweep = _sweep(ctx, device, cfg, status, barrier)
    steps = _steps(ctx, device, cfg, barrier, agree)
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object({"sweep": sweep, "steps": steps}, gathered, dst=0, group=control)
    if rank == 0:
        raw = {"metadata": _metadata(world, device, cfg), "checks": status, "ranks": gathered}
        Path(cfg["raw_path"]).write_text(json.dumps(raw))
    barrier()
    c10d_func.shutdown()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
