"""Classic `torch.distributed` calls whose tensor lists a backend packs into one buffer, on a group
of backend `c10d_func` against the default Gloo group, in the same run: `all_gather` (a list of
outputs), `all_to_all` (lists both ways), `gather` and `scatter` (lists on the root), the same
all_gather, gather and scatter into or from the in-order chunks of one tensor,
`reduce_scatter` (a list of inputs), `all_reduce_coalesced`, and `reduce`, whose non-roots reduce a
scratch copy. These are the calls of user code (metrics, `all_gather_object`, MoE code written
with lists), not DDP's or FSDP's. The c10d_func backend draws its packed buffers from the
communicator's memory: symmetric memory on shm (the members read and write them in place), reused
private memory on Gloo.

Each call's result is checked against a reference once before it is timed. Blocks of calls back
to back after a barrier, the two groups taking turns block by block; the median block mean of the
slowest rank, µs per call.

    python -m benchmarks.classic_lists [--nproc 2] [--sizes 8,32] [--blocks 6] [--quick]
        [--out benchmarks/results/classic_lists]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

CALLS = [
    "all_gather",
    "all_gather into chunks",
    "all_to_all",
    "gather",
    "gather into chunks",
    "scatter",
    "scatter from chunks",
    "reduce_scatter",
    "all_reduce_coalesced",
    "reduce",
]
PER_BLOCK = 10


def make_calls(x: Any, rank: int, world: int) -> dict[str, tuple[Any, Any]]:
    """Each call on one group, and its check: a function of the group, and one of nothing that
    raises unless the last call's results match a reference built from every rank's known input."""
    import torch
    import torch.distributed as dist

    n = x.numel() // world  # each piece
    total = float(sum(range(1, world + 1)))  # every rank's x is rank + 1
    every = [torch.full((n,), float(r + 1)) for r in range(world)]
    root = world - 1
    outs = [torch.empty(n) for _ in range(world)]
    sent = [torch.full((n,), float(rank * world + j)) for j in range(world)]
    received = [torch.empty(n) for _ in range(world)]
    scattered = torch.empty(n)
    reduced = torch.empty(n)
    pair = [every[rank].clone(), every[rank].clone()]
    kept = x.clone()
    # The chunk forms: the lists are the in-order chunks of one tensor (list(t.chunk(world))),
    # as code that gathers into or scatters from one buffer writes them; the backend reads and
    # writes that tensor in place instead of packing the list.
    gathered = torch.empty(world * n)
    into_chunks = list(gathered.chunk(world))
    from_chunks = list(torch.cat(every).chunk(world))

    def expect(got: Any, want: Any, what: str) -> None:
        if not torch.equal(got, want):
            raise AssertionError(f"rank {rank}: {what} differs from its reference")

    def all_reduce_coalesced(tensors: list[Any], group: Any) -> None:
        for tensor in tensors:  # fresh inputs: the call reduces them in place
            tensor.copy_(every[rank])
        dist.all_reduce_coalesced(tensors, group=group)

    def check_gathered() -> None:
        expect(torch.cat(outs), torch.cat(every), "all_gather / gather")

    calls = {
        "all_gather": (lambda g: dist.all_gather(outs, every[rank], group=g), check_gathered),
        "all_gather into chunks": (
            lambda g: dist.all_gather(into_chunks, every[rank], group=g),
            lambda: expect(gathered, torch.cat(every), "all_gather into chunks"),
        ),
        "all_to_all": (
            lambda g: dist.all_to_all(received, sent, group=g),
            lambda: expect(
                torch.cat(received),
                torch.cat([torch.full((n,), float(r * world + rank)) for r in range(world)]),
                "all_to_all",
            ),
        ),
        "gather": (
            lambda g: dist.gather(every[rank], outs if rank == root else None, dst=root, group=g),
            lambda: check_gathered() if rank == root else None,
        ),
        "gather into chunks": (
            lambda g: dist.gather(
                every[rank], into_chunks if rank == root else None, dst=root, group=g
            ),
            lambda: (
                expect(gathered, torch.cat(every), "gather into chunks") if rank == root else None
            ),
        ),
        "scatter": (
            lambda g: dist.scatter(scattered, every if rank == root else None, src=root, group=g),
            lambda: expect(scattered, every[rank], "scatter"),
        ),
        "scatter from chunks": (
            lambda g: dist.scatter(
                scattered, from_chunks if rank == root else None, src=root, group=g
            ),
            lambda: expect(scattered, every[rank], "scatter from chunks"),
        ),
        "reduce_scatter": (
            lambda g: dist.reduce_scatter(reduced, every, group=g),
            lambda: expect(reduced, every[rank] * world, "reduce_scatter"),
        ),
        "all_reduce_coalesced": (
            lambda g: all_reduce_coalesced(pair, g),
            lambda: expect(pair[1], torch.full((n,), total), "all_reduce_coalesced"),
        ),
        "reduce": (
            lambda g: dist.reduce(kept.copy_(x), dst=root, group=g),
            # Only the root's result is defined (Gloo uses the others' tensors as scratch).
            lambda: expect(kept, total * torch.ones_like(x), "reduce") if rank == root else None,
        ),
    }
    return calls


def rank_main(cfg: dict[str, Any]) -> None:
    from benchmarks.launcher import start_rank

    rank, world, control = start_rank()  # c10d_func only after the default group exists
    import c10d_func
    import torch
    import torch.distributed as dist

    groups = {"c10d_func": dist.new_group(backend="c10d_func"), "gloo": None}
    mine: dict[str, dict[str, float]] = {}
    for mib in cfg["sizes"]:
        x = torch.full(((mib << 20) // 4,), float(rank + 1))
        calls = make_calls(x, rank, world)
        for name in CALLS:
            call, verify = calls[name]
            blocks: dict[str, list[float]] = {impl: [] for impl in groups}
            for impl, group in groups.items():
                call(group)
                verify()
            for b in range(cfg["blocks"]):
                order = list(groups.items()) if b % 2 == 0 else list(groups.items())[::-1]
                for impl, group in order:
                    dist.barrier(group=control)
                    start = time.perf_counter()
                    for _ in range(PER_BLOCK):
                        call(group)
                    blocks[impl].append((time.perf_counter() - start) / PER_BLOCK)
            for impl, means in blocks.items():
                # The slowest rank's block means.
                times = torch.tensor(means, dtype=torch.float64)
                dist.all_reduce(times, op=dist.ReduceOp.MAX, group=control)
                mine.setdefault(f"{name}|{mib}", {})[impl] = statistics.median(times.tolist()) * 1e6
    if rank == 0:
        Path(cfg["result"]).write_text(json.dumps(mine))
    c10d_func.shutdown()
    dist.destroy_process_group()


def render(results: dict[str, Any]) -> str:
    meta = results["metadata"]
    lines = [
        "# Classic list-form calls: a c10d_func group against the default Gloo group",
        "",
        (
            f"{meta['date']} · torch {meta['torch']} · world size {meta['nproc']} · "
            f"{os.cpu_count()} host CPUs · {meta['blocks']} blocks of {PER_BLOCK} calls per cell"
        ),
        "",
        "µs per call (median block mean of the slowest rank); × = Gloo ÷ c10d_func.",
        "",
        "| call | size per rank | c10d_func µs | Gloo µs | × |",
        "|---|---|---:|---:|---:|",
    ]
    for key, cell in results["us"].items():
        name, mib = key.split("|")
        ratio = cell["gloo"] / cell["c10d_func"]
        lines.append(
            f"| {name} | {mib} MiB | {cell['c10d_func']:.0f} | {cell['gloo']:.0f} | {ratio:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    from benchmarks.launcher import arguments_or_rank

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--sizes", default="8,32", help="MiB per rank, comma-separated")
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="1 MiB, 2 blocks (a smoke run)")
    parser.add_argument("--out", default=None, help="folder for results.md and results.json")
    args = arguments_or_rank(parser, rank_main)
    if args is None:
        return

    import torch

    from benchmarks.launcher import run_ranks_with_config
    from benchmarks.report import write_document

    sizes = [1] if args.quick else [int(s) for s in args.sizes.split(",")]
    blocks = 2 if args.quick else args.blocks
    cfg = {"sizes": sizes, "blocks": blocks}
    us = run_ranks_with_config("benchmarks.classic_lists", cfg, args.nproc, 600)
    results = {
        "metadata": {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__,
            "nproc": args.nproc,
            "blocks": blocks,
        },
        "us": us,
    }
    markdown = render(results)
    print(markdown)
    if args.out:
        json_path, md_path = write_document(results, markdown, Path(args.out))
        print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
