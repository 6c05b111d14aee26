"""Collectives called the way training programs call them, on CPU: c10d_func's ops against
torch's functional collectives (`torch.ops._c10d_functional`) and classic `torch.distributed`,
both on the Gloo default group, in the same run.

(A) Private input after a barrier: all_reduce, all_gather, reduce_scatter, all_to_all (equal
    splits) and broadcast (src 0) of 1, 8 and 32 MiB per rank (float32). Each rank allocates its
    input once with torch.empty (not a symmetric c10d_func.empty tensor); before each timed call
    it writes a fresh value into it (`x.fill_(rank + i)`, a gradient just computed), then a
    barrier on a separate Gloo group, then ONE call + wait is timed. Beside it, "back to back":
    the same input, calls one after another in blocks, no barrier between them.
(B) 8 B all_reduce with peers arriving apart: after a call of the same implementation on
    another group (as between a model's layers), rank 1 busy-waits a random 0-20 µs (--delay-us; seeded, the same sequence for every implementation) before calling; every rank
    times its own call + wait.

Implementations run interleaved round-robin (the order rotates every iteration). A time is the
slowest rank's per iteration; the tables give the median (µs), bus bandwidth as in nccl-tests and
ratios c10d_func / other (< 1: c10d_func faster); in (B) against the faster of the two Gloo
implementations. Every op and size is checked against a reference once before it is timed.

    python -m benchmarks.user_calls [--nproc 2] [--iters N] [--quick]
        [--out benchmarks/results/user_calls]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

C10D_FUNC, FUNCOL, DIST = "c10d_func", "torch funcol (Gloo)", "torch.distributed (Gloo)"
IMPLS = [C10D_FUNC, FUNCOL, DIST]
OTHERS = {"funcol": FUNCOL, "dist": DIST}
OP_NAMES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]
SIZES = [1 << 20, 8 << 20, 32 << 20]
MODES = ["after barrier", "back to back"]
SMALL_DELAY_US = 20.0  # default bound of rank 1's extra delay in (B)
SEED = 0


def check(op: str, fn: Any, x: Any, rank: int, world: int, impl: str) -> None:
    """One call on inputs that differ per rank and per element, against a local reference."""
    import torch

    base = torch.arange(x.numel(), dtype=x.dtype) % 997
    inputs = [base + 1000 * r for r in range(world)]
    x.copy_(inputs[rank])
    expected = {
        "all_reduce": lambda: sum(inputs),
        "all_gather": lambda: torch.cat(inputs),
        "reduce_scatter": lambda: sum(inputs).chunk(world)[rank],
        "all_to_all": lambda: torch.cat([inp.chunk(world)[rank] for inp in inputs]),
        "broadcast": lambda: inputs[0],
    }[op]()
    out = fn(x)
    if out.shape != expected.shape or not torch.equal(out, expected):
        bad = "shape" if out.shape != expected.shape else f"{(out != expected).sum()} elements"
        raise AssertionError(
            f"{impl} {op} of {x.numel()} floats on rank {rank}: wrong result "
            f"({bad} differ{'s' if bad == 'shape' else ''})"
        )


def time_after_barrier(
    fns: dict[str, Any],
    x: Any,
    rank: int,
    iters: int,
    warmup: int,
    barrier: Any,
    delays_us: list[float] | None = None,
    before: dict[str, Any] | None = None,
    block: int = 1,
) -> dict[str, list]:
    """Per implementation, seconds of one call + wait on this rank, each after a fresh write into
    `x` and a barrier (or, with `before`, the implementation's own call on another group); with
    `delays_us`, rank 1 busy-waits delays_us[i] before calling. Implementations take turns in
    blocks of `block` iterations (the order rotates each round); a block's first iteration is
    not timed, so one implementation's threads winding down do not land on the next's time."""
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    skip = 1 if block > 1 else 0
    for first in range(0, warmup + iters, block):
        shift = (first // block) % len(names)
        for name in names[shift:] + names[:shift]:
            for i in range(first - skip, min(first + block, warmup + iters)):
                x.fill_(rank + i)
                if before is None:
                    barrier()
                else:
                    before[name]()
                if delays_us is not None and rank == 1 and i >= 0:
                    until = time.perf_counter() + delays_us[i] * 1e-6
                    while time.perf_counter() < until:
                        pass
                start = time.perf_counter()
                fns[name](x)
                elapsed = time.perf_counter() - start
                if i >= warmup:
                    times[name].append(elapsed)
    return times


def rank_main(cfg: dict[str, Any]) -> None:
    from benchmarks.launcher import start_rank

    rank, world, control = start_rank()  # c10d_func only after the default group exists
    import c10d_func
    import torch
    import torch.distributed as dist

    from benchmarks.impls import BUILDERS, TORCH_DIST, TORCH_NATIVE, GroupCtx, input_numel
    from benchmarks.timing import measure_interleaved

    def barrier() -> None:
        dist.barrier(group=control)

    ctx = GroupCtx(rank, world, dist.group.WORLD)
    builders = (BUILDERS["c10d_func"], BUILDERS[TORCH_NATIVE], BUILDERS[TORCH_DIST])
    tables = {impl: build(ctx) for impl, build in zip(IMPLS, builders, strict=True)}
    mine: dict[str, Any] = {}  # key -> impl -> seconds per iteration, this rank
    for op in cfg["ops"]:
        for size in cfg["sizes"]:
            x = torch.empty(input_numel(op, size, world))  # private, allocated once
            fns = {impl: tables[impl][op] for impl in IMPLS}
            for impl, fn in fns.items():
                check(op, fn, x, rank, world, impl)
            barrier()
            mine[f"{op}|{size}|after barrier"] = time_after_barrier(
                fns, x, rank, cfg["iters"], cfg["warmup"], barrier, block=cfg["block"]
            )
            x.fill_(rank + 1)
            mine[f"{op}|{size}|back to back"] = measure_interleaved(
                {impl: lambda fn=fn, x=x: fn(x) for impl, fn in fns.items()},
                iters=cfg["iters"],
                warmup=cfg["warmup"],
                block=cfg["block"],
                barrier=barrier,
                sync=lambda: None,
            )
            if rank == 0:
                print(f"  {op} {size >> 20} MiB done", flush=True)

    x8 = torch.empty(2)  # 8 B
    small = {impl: tables[impl]["all_reduce"] for impl in IMPLS}
    for impl, fn in small.items():
        check("all_reduce", fn, x8, rank, world, impl)
    draw = random.Random(SEED)
    delays = [
        draw.uniform(0, cfg["small_delay_us"]) for _ in range(cfg["warmup"] + cfg["small_iters"])
    ]
    # The previous call is the implementation's own collective on another group, as between the
    # layers of a model: the peers leave it as that implementation releases them.
    other = dist.new_group(backend="gloo")
    other_ctx = GroupCtx(rank, world, other, tag="bench-other-group")
    y8 = torch.ones(2)
    other_calls = [build(other_ctx)["all_reduce"] for build in builders]
    previous = {
        impl: functools.partial(fn, y8) for impl, fn in zip(IMPLS, other_calls, strict=True)
    }
    barrier()
    mine["small"] = time_after_barrier(
        small, x8, rank, cfg["small_iters"], cfg["warmup"], barrier, delays, previous, block=50
    )

    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, mine, group=control)
    if rank == 0:
        groups = c10d_func.groups()
        # Iteration i took as long as its slowest rank; the median over iterations, in µs.
        medians = {
            key: {
                i: statistics.median(map(max, zip(*(g[key][i] for g in gathered)))) * 1e6
                for i in IMPLS
            }
            for key in mine
        }
        per_rank = [{i: statistics.median(g["small"][i]) * 1e6 for i in IMPLS} for g in gathered]
        meta = {
            "world_size": world,
            "torch_version": torch.__version__,
            "cpu_count": os.cpu_count(),
            "transport": ", ".join(sorted({f"{g['device']}:{g['backend']}" for g in groups})),
        }
        Path(cfg["result"]).write_text(
            json.dumps({"medians_us": medians, "small_per_rank_us": per_rank, "meta": meta})
        )
    barrier()
    c10d_func.shutdown()
    dist.destroy_process_group()


def summarize(raw: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.impls import OPS, input_numel

    medians, world = raw["medians_us"], raw["meta"]["world_size"]
    rows = []
    for op in cfg["ops"]:
        for size in cfg["sizes"]:
            input_bytes = input_numel(op, size, world) * 4
            total = OPS[op].nccl_bytes(input_bytes, world)  # nccl-tests "size"
            for mode in MODES:
                us = medians[f"{op}|{size}|{mode}"]
                busbw = {i: total / (us[i] * 1e-6) * OPS[op].busbw_factor(world) / 1e9 for i in us}
                ratios = {f"c10d_func_over_{k}": us[C10D_FUNC] / us[i] for k, i in OTHERS.items()}
                row = {"op": op, "size": size, "input_bytes": input_bytes, "mode": mode}
                rows.append({**row, "median_us": us, "busbw_gbps": busbw, **ratios})
    small = medians["small"]
    best = min((FUNCOL, DIST), key=lambda i: small[i])
    return {
        "metadata": {
            **raw["meta"],
            **{k: cfg[k] for k in ("iters", "small_iters", "warmup", "block", "sizes")},
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "small_delay_us": cfg["small_delay_us"],
            "seed": SEED,
        },
        "large": rows,
        "small_all_reduce": {
            "median_us": small,
            "per_rank_median_us": raw["small_per_rank_us"],
            "fastest_gloo": best,
            "c10d_func_over_fastest_gloo": small[C10D_FUNC] / small[best],
            **{f"c10d_func_over_{k}": small[C10D_FUNC] / small[i] for k, i in OTHERS.items()},
        },
    }


def render(results: dict[str, Any]) -> str:
    from benchmarks.report import human_bytes

    meta = results["metadata"]
    lines = [
        "# Collectives called as training programs call them",
        "",
        (
            f"{meta['date']} · torch {meta['torch_version']} · world size {meta['world_size']} · "
            f"c10d_func transport {meta['transport']} · "
            f"{meta['cpu_count']} host CPUs · 1 thread per rank · {meta['iters']} timed iterations "
            f"per cell ({meta['small_iters']} for 8 B), warm-up {meta['warmup']}, implementations in turn"
        ),
        "",
        "## (A) Private input: after a barrier, and back to back",
        "",
        (
            "Median µs of the slowest rank. after barrier: fresh `x.fill_` into a private torch.empty "
            "input, barrier on a separate Gloo group, one call + wait. back to back: the same input, "
            f"calls in blocks of {meta['block']}, no barrier between. Ratio < 1: c10d_func faster."
        ),
        "",
        "| op | size | calls | "
        + " | ".join(f"{i} µs" for i in IMPLS)
        + " | c10d_func / funcol | c10d_func / dist | "
        + " | ".join(f"busbw {i} GB/s" for i in IMPLS)
        + " |",
        "|---|---|---|" + "---:|" * (2 * len(IMPLS) + 2),
    ]
    for r in results["large"]:
        size = human_bytes(r["size"])
        if r["input_bytes"] != r["size"]:
            size += f" ({human_bytes(r['input_bytes'])})"
        lines.append(
            f"| {r['op']} | {size} | {r['mode']} | "
            + " | ".join(f"{r['median_us'][i]:.1f}" for i in IMPLS)
            + f" | {r['c10d_func_over_funcol']:.2f} | {r['c10d_func_over_dist']:.2f} | "
            + " | ".join(f"{r['busbw_gbps'][i]:.3g}" for i in IMPLS)
            + " |"
        )
    s = results["small_all_reduce"]
    lines += [
        "",
        "## (B) 8 B all_reduce, peers arriving apart",
        "",
        (
            f"After a call of the same implementation on another group, rank 1 busy-waits a random 0-{meta['small_delay_us']:.0f} µs (seed "
            f"{meta['seed']}, same sequence for every implementation); median µs of the slowest "
            "rank's call + wait."
        ),
        "",
        "| median of | " + " | ".join(f"{i} µs" for i in IMPLS) + " | c10d_func / fastest Gloo |",
        "|---|" + "---:|" * (len(IMPLS) + 1),
    ]
    rows = [("slowest rank", s["median_us"])]
    rows += [(f"rank {r} alone", us) for r, us in enumerate(s["per_rank_median_us"])]
    for name, us in rows:
        best = min(us[FUNCOL], us[DIST])
        cells = " | ".join(f"{us[i]:.1f}" for i in IMPLS)
        lines.append(f"| {name} | {cells} | {us[C10D_FUNC] / best:.2f} |")
    lines.append(f"\nFastest Gloo implementation (slowest rank): {s['fastest_gloo']}.")
    return "\n".join(lines)


def main() -> None:
    from benchmarks.launcher import arguments_or_rank

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--iters", type=int, default=None, help="timed iterations per cell (A)")
    parser.add_argument("--quick", action="store_true", help="a few iterations, 1 MiB only")
    parser.add_argument(
        "--ops", default=",".join(OP_NAMES), help="ops of (A), comma-separated ('' for (B) only)"
    )
    parser.add_argument(
        "--delay-us", type=float, default=SMALL_DELAY_US, help="(B): rank 1's delay, 0 to this"
    )
    parser.add_argument("--out", default=None, help="folder for results.md and results.json")
    args = arguments_or_rank(parser, rank_main)
    if args is None:
        return

    from benchmarks.launcher import run_ranks_with_config
    from benchmarks.report import write_document

    iters = args.iters or (5 if args.quick else 40)
    ops = [op for op in args.ops.split(",") if op]
    cfg: dict[str, Any] = {"iters": iters, "small_iters": 50 * iters, "sizes": SIZES, "ops": ops}
    cfg["small_delay_us"] = args.delay_us
    cfg |= (
        {"warmup": 2, "block": 5, "sizes": SIZES[:1]} if args.quick else {"warmup": 5, "block": 10}
    )
    start = time.perf_counter()
    raw = run_ranks_with_config(
        "benchmarks.user_calls", cfg, args.nproc, 120 if args.quick else 900
    )
    results = summarize(raw, cfg)
    results["metadata"]["wall_s"] = round(time.perf_counter() - start, 1)
    markdown = render(results)
    print(markdown)
    print(f"\n(wall time {results['metadata']['wall_s']} s)")
    if args.out:
        json_path, md_path = write_document(results, markdown, Path(args.out))
        print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
