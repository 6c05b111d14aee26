"""all_reduce across test hosts: c10d_func's hierarchical collectives (shared memory inside each
host; between hosts, each rail's own TCP link: the hosts' first ranks up to 1 MiB, every rail
above), called through the eager API and as compiled code calls them (the op and its wait),
against c10d_func on flat Gloo, classic `dist.all_reduce` on a c10d_func group (the
backend, which runs on the same hierarchical communicator), torch's functional collectives and
classic `dist.all_reduce` (both on torch's Gloo group), in the same run, on 2 hosts x 2 ranks made of
network namespaces joined by a veth pair (tests/python/hosts.py; needs root), once with
the link limited to 10 Gb/s (tc tbf) and once unlimited.

    sudo python -m benchmarks.across_hosts [--iters 20] [--out benchmarks/results/hosts2]

Two measures, after a warm-up, as rank 0 sees them: the median time of one call (each rank starting
together after a barrier; the implementations take turns call by call), and the time per call of
`iters` calls back to back (each waited before the next): the median over 5 such blocks, the
implementations taking turns block by block, of each block's mean. Ratios are against c10d_func
hierarchical. Writes results.json and results.md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests" / "python"
SIZES = [8, 64 << 10, 1 << 20, 8 << 20, 16 << 20]
# Blocks of calls back to back per implementation and size (the median block mean is kept).
BLOCKS = 5
IMPLS = [
    "c10d_func hierarchical",
    "c10d_func ops, as compiled code calls them",
    "c10d_func flat Gloo",
    "dist.all_reduce (c10d_func)",
    "torch funcol (Gloo)",
    "dist.all_reduce (Gloo)",
]


def rank_main(iters: int) -> None:
    """One rank: times every implementation at every size; rank 0 prints the medians."""
    import torch

    torch.set_num_threads(1)
    # torch's Gloo binds to the address the host name resolves to, which the test hosts' names
    # do not: name the veth, as a user would with GLOO_SOCKET_IFNAME.
    names = [name for _, name in socket.if_nameindex() if name != "lo"]
    os.environ["GLOO_SOCKET_IFNAME"] = names[0]
    import c10d_func
    import torch.distributed as dist
    import torch.distributed._functional_collectives as torch_funcol

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    everyone = list(range(world))
    c10d_func.set_transport("gloo", "cpu", tag="flat")
    backend_group = dist.new_group(backend="c10d_func")
    ops = torch.ops.c10d_func
    calls = {
        "c10d_func hierarchical": lambda x: c10d_func.all_reduce(x, "sum", everyone, "hier").wait(),
        # What a torch.compile'd or exported program runs: the op and its wait, without the
        # eager API's AsyncCollectiveTensor and torch's wait_tensor.
        "c10d_func ops, as compiled code calls them": lambda x: ops.wait_tensor(
            ops.all_reduce(x, "sum", "hier", everyone, world)
        ),
        "c10d_func flat Gloo": lambda x: c10d_func.all_reduce(x, "sum", everyone, "flat").wait(),
        "dist.all_reduce (c10d_func)": lambda x: dist.all_reduce(x, group=backend_group),
        "torch funcol (Gloo)": lambda x: torch_funcol.all_reduce(x, "sum", dist.group.WORLD).wait(),
        "dist.all_reduce (Gloo)": lambda x: dist.all_reduce(x),
    }
    single: dict[str, dict[str, float]] = {}
    back_to_back: dict[str, dict[str, float]] = {}
    names = list(calls)
    for size in SIZES:
        x = torch.ones(max(size // 4, 2))
        for call in calls.values():
            for _ in range(3):
                call(x.clone())
        # One call at a time, every rank starting together after a barrier; the implementations
        # take turns call by call (the order rotating), so slow drift on the machine lands on
        # all of them alike.
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(iters):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                y = x.clone()
                dist.barrier()
                start = time.perf_counter()
                calls[name](y)
                times[name].append(time.perf_counter() - start)
        for name in names:
            single.setdefault(str(size), {})[name] = statistics.median(times[name]) * 1e6
        # Calls back to back, each waited before the next (a training step's many small
        # all_reduces): blocks of `iters` calls after a barrier, the implementations taking turns
        # block by block; the median of BLOCKS block means, so one descheduled rank in one block
        # (4 ranks share 2 cores here) does not decide the cell.
        means: dict[str, list[float]] = {name: [] for name in names}
        for b in range(BLOCKS):
            for name in names[b % len(names) :] + names[: b % len(names)]:
                ys = [x.clone() for _ in range(iters)]
                dist.barrier()
                start = time.perf_counter()
                for y in ys:
                    calls[name](y)
                means[name].append((time.perf_counter() - start) / iters * 1e6)
        for name in names:
            back_to_back.setdefault(str(size), {})[name] = statistics.median(means[name])
    served = [g["backend"] for g in c10d_func.groups() if g["tag"] == "hier"]
    served_backend = cpu_transport_of(backend_group)
    if rank == 0:
        result = {
            "us": single,
            "back_to_back_us": back_to_back,
            "hierarchical_backend": served,
            "backend_group_transport": served_backend,
        }
        print("RESULT " + json.dumps(result), flush=True)
    c10d_func.shutdown()
    dist.destroy_process_group()


def cpu_transport_of(group) -> str:
    """The transport of the CPU communicator behind a c10d_func ProcessGroup ("cpu:shm+gloo")."""
    import torch

    return group._get_backend(torch.device("cpu")).options.transport


def human(size: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


MEASURES = {
    "us": "median µs of one all_reduce, the ranks starting together after a barrier",
    "back_to_back_us": "µs per all_reduce over calls back to back, each waited (median of 5 blocks' means)",
}


def table(runs: dict[str, dict]) -> str:
    lines = []
    for link, result in runs.items():
        for measure, what in MEASURES.items():
            lines.extend(rows(f"{link}: {what}", result[measure]))
            if result.get("gbit"):
                lines.extend(link_rate(result[measure], result["gbit"]))
    return "\n".join(lines) + "\n"


def link_rate(result: dict[str, dict[str, float]], gbit: float) -> list[str]:
    """How close the hierarchical all_reduce comes to the link: between 2 hosts each host must
    send the other its whole partial sum's worth (half in the reduce-scatter, half in the
    all-gather), so `size` bytes each way take at least size / rate."""
    lines = ["", "Link-rate fraction of c10d_func hierarchical (the floor: size / link rate):", ""]
    for size in SIZES:
        if size >= 1 << 20:
            floor_us = size / (gbit * 1e9 / 8) * 1e6
            measured = result[str(size)][IMPLS[0]]
            lines.append(
                f"- {human(size)}: floor {floor_us:.0f} µs, measured {measured:.0f} µs: "
                f"**{floor_us / measured:.0%}** of the link's rate"
            )
    return lines


def rows(title: str, result: dict[str, dict[str, float]]) -> list[str]:
    lines = [
        f"\n**{title}** (2 hosts x 2 ranks; ratio = time / c10d_func hierarchical)\n",
        "| size | " + " | ".join(IMPLS) + " |",
        "|---|" + "---|" * len(IMPLS),
    ]
    for size in SIZES:
        row = result[str(size)]
        base = row[IMPLS[0]]
        cells = [f"{row[IMPLS[0]]:.0f}"] + [
            f"{row[name]:.0f} ({row[name] / base:.2f}x)" for name in IMPLS[1:]
        ]
        lines.append(f"| {human(size)} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks.across_hosts", description=__doc__)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "hosts2")
    parser.add_argument(
        "--links", choices=["both", "limited"], default="both", help="'limited': 10 Gb/s only"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    from hosts import TestHosts, available, host_results

    why_not = available()
    if why_not:
        sys.exit(f"benchmarks.across_hosts: {why_not}")
    runs = {}
    links = [("veth limited to 10 Gb/s", 10.0), ("veth unlimited", None)]
    for link, gbit in links[:1] if args.links == "limited" else links:
        with TestHosts(2) as hosts:
            if gbit:
                hosts.limit(1, gbit)
            launchers = hosts.launch(
                str(Path(__file__)),
                [2, 2],
                ["--rank", str(args.iters)],
                env={"PYTHONPATH": f"{HERE.parent}:{TESTS}"},
            )
            ranks, _ = host_results(launchers, timeout=900)
        code, out = ranks[0]
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        if code != 0 or not lines:
            sys.exit(f"rank 0 failed ({code}):\n{out[-4000:]}")
        runs[link] = json.loads(lines[-1][len("RESULT ") :])
        runs[link]["gbit"] = gbit
        print(
            f"{link}: hierarchical served by {runs[link]['hierarchical_backend']}, the backend's "
            f"group by {runs[link]['backend_group_transport']}",
            flush=True,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(runs, indent=2))
    markdown = table(runs)
    (args.out / "results.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
