"""What messages cost: send/recv between two ranks, on backend "gloo" and on backend "c10d_func"
(with its sends counted in the store for receivers from any source, as by default, and with
C10D_FUNC_ANNOUNCE_SENDS=0), groups taking turns round by round in the same run.

Per group, ranks 0 and 1 of the world measure
  - ping-pong: rank 0 sends, rank 1 receives and sends back (µs one way; 8 B and 1 MiB);
  - stream: rank 0 isends a burst of 8 B messages that rank 1 irecvs (µs per message);
  - any source: the ping-pong of 8 B with rank 0 receiving with no src (where counted).
Reported: the median over rounds, and gloo / c10d_func.

    python -m benchmarks.messages [--rounds 7] [--out benchmarks/results/messages]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

GROUPS = ("gloo", "c10d_func", "c10d_func, sends not counted")
MEASURES = (
    ("ping-pong 8 B, µs one way", 2, 300),
    ("ping-pong 1 MiB, µs one way", 1 << 18, 40),
    ("stream of 8 B isends, µs per message", 2, 300),
    ("ping-pong 8 B from any source, µs one way", 2, 300),
)


def measure(dist, torch, kind: str, numel: int, count: int, rank: int, group) -> float:
    """Seconds per message of one measure on `group` (ranks 0 and 1 take part)."""
    t = torch.zeros(numel)
    any_source = "any source" in kind
    start = time.perf_counter()
    if kind.startswith("stream"):
        if rank == 0:
            works = [dist.isend(t, 1, group=group) for _ in range(count)]
        else:
            outs = [torch.empty(numel) for _ in range(count)]
            works = [dist.irecv(out, 0, group=group) for out in outs]
        for work in works:
            work.wait()
        return (time.perf_counter() - start) / count
    # The ping-pong from any source runs on a tag of its own: once a receiver takes a tag from any
    # source, c10d_func's senders publish every message to it there (a store request each), and
    # the other rows measure programs that name their sources.
    tag = 1 if any_source else 0
    for _ in range(count):
        if rank == 0:
            dist.send(t, 1, group=group, tag=tag)
            source = dist.recv(t, None if any_source else 1, group=group, tag=tag)
            assert source == 1, source
        else:
            dist.recv(t, 0, group=group, tag=tag)
            dist.send(t, 0, group=group, tag=tag)
    return (time.perf_counter() - start) / (2 * count)


def rank_main(cfg: dict) -> None:
    import torch
    import torch.distributed as dist

    from benchmarks.launcher import start_rank

    rank, world, control = start_rank()
    rounds = cfg["rounds"]
    pair = [0, 1]
    groups = {}
    for name in GROUPS:
        os.environ["C10D_FUNC_ANNOUNCE_SENDS"] = "0" if "not counted" in name else "1"
        groups[name] = dist.new_group(pair, backend=name.split(",")[0])
    seconds: dict[str, dict[str, list[float]]] = {
        kind: {name: [] for name in GROUPS} for kind, _, _ in MEASURES
    }
    if rank in pair:
        for round_ in range(rounds + 1):  # the first round warms up
            # Each round starts with another group: a group measured right after Gloo's was
            # slower by 2x on the 8 B ping-pong here, whichever it was.
            shift = round_ % len(GROUPS)
            order = GROUPS[shift:] + GROUPS[:shift]
            for kind, numel, count in MEASURES:
                for name in order:
                    if "any source" in kind and "not counted" in name:
                        continue
                    dist.barrier(group=groups[name])
                    took = measure(dist, torch, kind, numel, count, rank, groups[name])
                    if round_ > 0:
                        seconds[kind][name].append(took)
    if rank == 0:
        Path(cfg["result"]).write_text(json.dumps({"seconds": seconds, "world": world}))
    dist.barrier(group=control)
    for group in groups.values():
        dist.destroy_process_group(group)
    dist.destroy_process_group()


def main() -> None:
    from benchmarks.launcher import arguments_or_rank

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=None, help="folder for results.md and results.json")
    args = arguments_or_rank(parser, rank_main)
    if args is None:
        return

    from benchmarks.launcher import run_ranks_with_config

    measured = run_ranks_with_config(
        "benchmarks.messages", {"rounds": args.rounds}, nproc=2, timeout_s=120 + 60 * args.rounds
    )

    lines = [
        f"2 ranks, medians of {args.rounds} rounds (groups taking turns)",
        "",
        "| measure | " + " | ".join(GROUPS) + " | gloo / c10d_func |",
        "|---|" + "---:|" * (len(GROUPS) + 1),
    ]
    for kind, _, _ in MEASURES:
        cells, medians = [], {}
        for name in GROUPS:
            runs = measured["seconds"][kind][name]
            medians[name] = statistics.median(runs) * 1e6 if runs else None
            cells.append(f"{medians[name]:.1f}" if runs else "-")
        ratio = medians["gloo"] / medians["c10d_func"]
        lines.append(f"| {kind} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    from benchmarks.report import publish

    publish(measured, "\n".join(lines), args.out)


if __name__ == "__main__":
    main()
