"""What a new group costs: `dist.new_group` and its first all_reduce, on each backend.

Programs make groups at start-up (DeviceMesh dims, FSDP/TP groups, evaluation groups), some
many of them, and elastic jobs make them again after every restart. This run times, per rank,
`dist.new_group(ranks, backend=...)` followed by a first 8 B `dist.all_reduce` on the new group
(where a lazily formed communicator forms), for backend "gloo" and backend "c10d_func" taking
turns group by group, and counts the TCP connections to the store that the run opened (from the
kernel's socket table: open or closed within the last minute). Reported per backend: the
median, mean and slowest group (slowest rank), and connections opened per group.

    python -m benchmarks.group_creation [--groups 40] [--nproc 2] [--out benchmarks/results/group_creation]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

BACKENDS = ("gloo", "c10d_func")
TESTS = Path(__file__).resolve().parent.parent / "tests" / "python"


def rank_main(cfg: dict) -> None:
    import torch
    import torch.distributed as dist

    from benchmarks.launcher import start_rank

    sys.path.insert(0, str(TESTS))
    from socket_table import store_connections_opened

    rank, world, control = start_rank()
    groups = cfg["groups"]
    port = int(os.environ["MASTER_PORT"])
    ranks = list(range(world))
    seconds: dict[str, list[float]] = {name: [] for name in BACKENDS}
    opened: dict[str, int] = dict.fromkeys(BACKENDS, 0)
    made = []
    for i in range(groups):
        for name in BACKENDS:
            dist.barrier(group=control)
            before = store_connections_opened(port)
            dist.barrier(group=control)
            start = time.perf_counter()
            group = dist.new_group(ranks, backend=name)
            x = torch.ones(2)
            dist.all_reduce(x, group=group)
            elapsed = time.perf_counter() - start
            assert torch.equal(x, torch.full((2,), float(world))), (name, i, x)
            dist.barrier(group=control)
            # Every rank's connections, read on one host: the delta is the whole world's.
            opened[name] += store_connections_opened(port) - before
            slowest = torch.tensor([elapsed], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=control)
            seconds[name].append(slowest.item())
            made.append(group)
    if rank == 0:
        Path(cfg["result"]).write_text(json.dumps({"seconds": seconds, "opened": opened}))
    for group in made:
        dist.destroy_process_group(group)
    dist.destroy_process_group()


def main() -> None:
    from benchmarks.launcher import arguments_or_rank

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--out", default=None, help="folder for results.md and results.json")
    args = arguments_or_rank(parser, rank_main)
    if args is None:
        return

    from benchmarks.launcher import run_ranks_with_config

    measured = run_ranks_with_config(
        "benchmarks.group_creation",
        {"groups": args.groups},
        nproc=args.nproc,
        timeout_s=60 + 30 * args.groups,
    )

    what = "new_group + first 8 B all_reduce, ms (slowest rank)"
    lines = [
        f"{args.groups} groups of {args.nproc} ranks, {what}",
        "",
        "| backend | median | mean | slowest | over 1 s | store connections opened per group |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in BACKENDS:
        ms = [s * 1e3 for s in measured["seconds"][name]]
        lines.append(
            f"| {name} | {statistics.median(ms):.1f} | {statistics.mean(ms):.1f} | "
            f"{max(ms):.1f} | {sum(m > 1000 for m in ms)} | "
            f"{measured['opened'][name] / args.groups:.2f} |"
        )
    from benchmarks.report import publish

    publish(measured, "\n".join(lines), args.out)


if __name__ == "__main__":
    main()
