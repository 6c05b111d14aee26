"""all_reduce (or, with --op, all_gather or reduce_scatter: FSDP's collectives; broadcast from
rank 0: loading a checkpoint on one rank, DDP's start; all_to_all: MoE's exchange, evenly routed
(no split sizes), and all_to_all_uneven: routed unevenly (split sizes given, of 1 to 4 shares of
a rank's buffer per destination, the shares rotating with the rank); permute: each rank's whole
buffer to the next rank (pipeline stages passing activations; classic calls as
all_to_all_single with split sizes); reduce to
rank 0: a metric or checkpoint shard summed on one rank; gather to rank 0: results collected on
one rank; scatter from rank 0: work handed out from one rank; these three with no torch funcol
column, as torch's functional collectives have none of them)
across test
hosts: c10d_func's hierarchical collectives (shared memory inside each host; between hosts, each
rail's own TCP link), called through the eager API and as compiled code calls them (the op and its
wait), against c10d_func on flat Gloo, classic `dist.*` on a c10d_func group (the backend, which
runs on the same hierarchical communicator), torch's functional collectives and classic `dist.*`
(both on torch's Gloo group), in the same run, on 2 hosts x 2 ranks made of network namespaces
joined by a veth pair (tests/python/hosts.py; needs root), once with the link limited to 10 Gb/s
(tc tbf) and once unlimited. `--per-host 1` runs 2 hosts x 1 rank instead: c10d_func's default is
then the hosts' own TCP link beside Gloo (no host step), its first column.

    sudo python -m benchmarks.across_hosts [--op all_reduce] [--per-host 2] [--iters 20] [--out DIR]
        [--sizes 8,65536] [--links both|limited]

A size is the whole buffer: all_reduce's and reduce's, all_gather's and gather's output,
reduce_scatter's and scatter's input (each rank gives or keeps a quarter of it).

Two measures, after a warm-up, as rank 0 sees them: the median time of one call (each rank starting
together after a barrier; the implementations take turns call by call), and the time per call of
`iters` calls back to back (each waited before the next): the median over 5 such blocks, the
implementations taking turns block by block, of each block's mean. Ratios are against
c10d_func's default (the first column). Writes results.json and results.md to --out (default
benchmarks/results/hosts2 for all_reduce, hosts2_<op> for the others; hosts2x1[_<op>] with
--per-host 1).
"""

from __future__ import annotations

import argparse
import functools
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
OPS = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "all_to_all",
    "all_to_all_uneven",
    "permute",
    "reduce",
    "gather",
    "scatter",
]
# Ops whose input is this rank's block of the output.
BLOCK_INPUT_OPS = ("all_gather", "gather")
# torch's functional collectives have neither.
NO_TORCH_FUNCOL = ("reduce", "gather", "scatter")
# Ops whose whole buffer is the message (the others': the output or input of all members).
WHOLE_BUFFER_OPS = ("all_reduce", "broadcast", "reduce", "permute")
# The classic call of each op, for the columns' names.
CLASSIC = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter_tensor",
    "broadcast": "broadcast",
    "all_to_all": "all_to_all_single",
    "all_to_all_uneven": "all_to_all_single",
    "permute": "all_to_all_single",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
}


def default_name(per_host: int) -> str:
    """c10d_func's default across hosts: hierarchical where a host holds several ranks."""
    return "c10d_func hierarchical" if per_host > 1 else "c10d_func over the hosts' link"


def impls(op: str, per_host: int = 2) -> list[str]:
    names = [
        default_name(per_host),
        "c10d_func ops, as compiled code calls them",
        "c10d_func flat Gloo",
        f"dist.{CLASSIC[op]} (c10d_func)",
        "torch funcol (Gloo)",
        f"dist.{CLASSIC[op]} (Gloo)",
    ]
    return [name for name in names if not (op in NO_TORCH_FUNCOL and name == "torch funcol (Gloo)")]


def make_calls(op: str, everyone: list[int], backend_group, per_host: int) -> dict:
    """Each implementation's call of `op` on a rank's input (the whole buffer for all_reduce and
    reduce_scatter; for all_gather this rank's block, a quarter of the output)."""
    import c10d_func
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as torch_funcol

    ops = torch.ops.c10d_func
    world = len(everyone)
    if op == "all_reduce":

        def eager(x, tag):
            return c10d_func.all_reduce(x, "sum", everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.all_reduce(x, "sum", "hier", everyone, world))

        def classic(x, group):
            return dist.all_reduce(x, group=group)

        def torch_eager(x):
            return torch_funcol.all_reduce(x, "sum", dist.group.WORLD).wait()

    elif op == "all_gather":

        def eager(x, tag):
            return c10d_func.all_gather_tensor(x, 0, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.all_gather_into_tensor(x, "hier", everyone, world))

        def classic(x, group):
            return dist.all_gather_into_tensor(x.new_empty(world * x.numel()), x, group=group)

        def torch_eager(x):
            return torch_funcol.all_gather_tensor(x, 0, dist.group.WORLD).wait()

    elif op == "all_to_all":  # equal blocks (MoE's token exchange, evenly routed)

        def eager(x, tag):
            return c10d_func.all_to_all_single(x, None, None, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.all_to_all_single(x, None, None, "hier", everyone, world))

        def classic(x, group):
            return dist.all_to_all_single(torch.empty_like(x), x, group=group)

        def torch_eager(x):
            return torch_funcol.all_to_all_single(x, None, None, dist.group.WORLD).wait()

    elif op == "all_to_all_uneven":  # MoE's token exchange routed unevenly: split sizes given

        @functools.cache
        def routed_rows(rows):
            me = dist.get_rank()
            sends = [uneven_splits(rows, world, r) for r in range(world)]
            return [sends[j][me] for j in range(world)], sends[me]

        def routed(x):
            """(output splits, input splits) of this rank's buffer of x's size, worked out once per
            size: a training loop has its router's splits at hand, and computing them inside
            the timed call would add the same Python time to every column."""
            return routed_rows(x.numel())

        def eager(x, tag):
            received, sent = routed(x)
            return c10d_func.all_to_all_single(x, received, sent, everyone, tag).wait()

        def as_compiled(x):
            received, sent = routed(x)
            return ops.wait_tensor(
                ops.all_to_all_single(x, received, sent, "hier", everyone, world)
            )

        def classic(x, group):
            received, sent = routed(x)
            out = x.new_empty(sum(received))
            return dist.all_to_all_single(out, x, received, sent, group=group)

        def torch_eager(x):
            received, sent = routed(x)
            return torch_funcol.all_to_all_single(x, received, sent, dist.group.WORLD).wait()

    elif op == "permute":  # each rank's buffer to the next one: a ring shift
        ring = [(r + 1) % world for r in range(world)]

        def eager(x, tag):
            return c10d_func.permute_tensor(x, ring, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.permute(x, ring, "hier", everyone, world))

        def classic(x, group):
            me = dist.get_rank()
            sent = [x.numel() if j == ring[me] else 0 for j in range(world)]
            received = [x.numel() if ring[j] == me else 0 for j in range(world)]
            return dist.all_to_all_single(x.new_empty(x.numel()), x, received, sent, group=group)

        def torch_eager(x):
            return torch_funcol.permute_tensor(x, ring, dist.group.WORLD).wait()

    elif op == "broadcast":  # from rank 0, on host 0

        def eager(x, tag):
            return c10d_func.broadcast(x, 0, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.broadcast(x, 0, "hier", everyone, world))

        def classic(x, group):
            return dist.broadcast(x, 0, group=group)

        def torch_eager(x):
            return torch_funcol.broadcast(x, 0, dist.group.WORLD).wait()

    elif op == "reduce":  # to rank 0, on host 0

        def eager(x, tag):
            return c10d_func.reduce(x, "sum", 0, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.reduce(x, "sum", 0, "hier", everyone, world))

        def classic(x, group):
            return dist.reduce(x, 0, group=group)

        torch_eager = None

    elif op == "gather":  # to rank 0, on host 0

        def eager(x, tag):
            return c10d_func.gather(x, 0, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.gather(x, 0, "hier", everyone, world))

        def classic(x, group):
            into = [torch.empty_like(x) for _ in everyone] if dist.get_rank() == 0 else None
            return dist.gather(x, into, 0, group=group)

        torch_eager = None

    elif op == "scatter":  # from rank 0, on host 0: its whole buffer, a block to each rank

        def eager(x, tag):
            return c10d_func.scatter(x, 0, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.scatter(x, 0, "hier", everyone, world))

        def classic(x, group):
            blocks = list(x.chunk(world)) if dist.get_rank() == 0 else None
            return dist.scatter(x.new_empty(x.numel() // world), blocks, 0, group=group)

        torch_eager = None

    else:

        def eager(x, tag):
            return c10d_func.reduce_scatter_tensor(x, "sum", 0, everyone, tag).wait()

        def as_compiled(x):
            return ops.wait_tensor(ops.reduce_scatter_tensor(x, "sum", "hier", everyone, world))

        def classic(x, group):
            return dist.reduce_scatter_tensor(x.new_empty(x.numel() // world), x, group=group)

        def torch_eager(x):
            return torch_funcol.reduce_scatter_tensor(x, "sum", 0, dist.group.WORLD).wait()

    # In impls(op)'s order. "As compiled": what a torch.compile'd or exported program runs, the
    # op and its wait, without the eager API's AsyncCollectiveTensor and torch's wait_tensor.
    calls = [
        lambda x: eager(x, "hier"),
        as_compiled,
        lambda x: eager(x, "flat"),
        lambda x: classic(x, backend_group),
        torch_eager,
        lambda x: classic(x, None),
    ]
    return dict(zip(impls(op, per_host), [call for call in calls if call is not None]))


def uneven_splits(rows: int, world: int, rank: int) -> list[int]:
    """`rank`'s split sizes of `rows` in all_to_all_uneven: shares of 1 to 4 per destination
    (1, 4, 2, 3 for 4 ranks), rotated by the rank, the remainder to the last destination."""
    shares = [(1, 4, 2, 3)[(j + rank) % 4] for j in range(world)]
    splits = [rows * share // sum(shares) for share in shares]
    splits[-1] += rows - sum(splits)
    return splits


def rank_main(op: str, iters: int, per_host: int, sizes: str) -> None:
    """One rank: times every implementation at every size; rank 0 prints the medians."""
    import torch

    torch.set_num_threads(1)
    # torch's Gloo binds to the address the host name resolves to, which the test hosts' names
    # do not: name the veth, as a user would with GLOO_SOCKET_IFNAME.
    names = [name for _, name in socket.if_nameindex() if name != "lo"]
    os.environ["GLOO_SOCKET_IFNAME"] = names[0]
    import c10d_func
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    everyone = list(range(world))
    c10d_func.set_transport("gloo", "cpu", tag="flat")
    backend_group = dist.new_group(backend="c10d_func")
    calls = make_calls(op, everyone, backend_group, per_host)
    single: dict[str, dict[str, float]] = {}
    back_to_back: dict[str, dict[str, float]] = {}
    names = list(calls)
    for size in [int(s) for s in sizes.split(",")] if sizes else sizes_of(op):
        # all_gather's and gather's input is this rank's block of the output.
        numel = max(size // 4, 2)
        x = torch.ones(numel // world if op in BLOCK_INPUT_OPS else numel)
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


def sizes_of(op: str) -> list[int]:
    # all_gather's, reduce_scatter's and all_to_all's smallest buffer holds one 4-byte element per
    # rank.
    return SIZES if op in WHOLE_BUFFER_OPS else [64] + SIZES[1:]


def measures(op: str) -> dict[str, str]:
    return {
        "us": f"median µs of one {op}, the ranks starting together after a barrier",
        "back_to_back_us": f"µs per {op} over calls back to back, each waited (median of 5 "
        "blocks' means)",
    }


def table(runs: dict[str, dict], op: str) -> str:
    lines = []
    for link, result in runs.items():
        per_host = result.get("per_host", 2)
        for measure, what in measures(op).items():
            lines.extend(rows(f"{link}: {what}", result[measure], op, per_host))
            if result.get("gbit"):
                lines.extend(link_rate(result[measure], result["gbit"], op, per_host))
    return "\n".join(lines) + "\n"


def floor_bytes(size: int, op: str, per_host: int) -> int:
    """What each of 2 hosts must send the other at least: an all_reduce its whole partial sum's
    worth (half in the reduce-scatter, half in the all-gather); an all_gather its half of the
    output; a reduce_scatter the other host's half of its partial sums; a broadcast's root host
    the whole buffer (the other host nothing); a reduce's other host its whole partial sum (the
    root's host nothing); a gather's other host its half of the output; a scatter's root host
    the other host's half of the input; an all_to_all, of each member's buffer, the half bound
    for the other host; a permute (a ring shift, ranks host by host) one buffer each way."""
    if op == "all_to_all":
        return size // 2 * per_host
    if op == "all_to_all_uneven":  # the larger way between the hosts, ranks host by host
        world, rows = 2 * per_host, max(size // 4, 2)
        sends = [uneven_splits(rows, world, r) for r in range(world)]
        ways = [
            sum(
                sends[r][j]
                for r in range(world)
                for j in range(world)
                if r // per_host == h != j // per_host
            )
            for h in range(2)
        ]
        return max(ways) * 4
    return size if op in WHOLE_BUFFER_OPS else size // 2


def link_rate(
    result: dict[str, dict[str, float]], gbit: float, op: str, per_host: int
) -> list[str]:
    """How close c10d_func's default comes to the link."""
    what = "size" if op in WHOLE_BUFFER_OPS else "size / 2"
    if op == "all_to_all":
        what = f"size / 2 x {per_host} member(s) per host"
    if op == "all_to_all_uneven":
        what = "the parts one host sends the other (the larger way)"
    lines = [
        "",
        f"Link-rate fraction of {default_name(per_host)} (the floor: {what} / link rate):",
        "",
    ]
    for size in map(int, result):
        if size >= 1 << 20:
            floor_us = floor_bytes(size, op, per_host) / (gbit * 1e9 / 8) * 1e6
            measured = result[str(size)][impls(op, per_host)[0]]
            lines.append(
                f"- {human(size)}: floor {floor_us:.0f} µs, measured {measured:.0f} µs: "
                f"**{floor_us / measured:.0%}** of the link's rate"
            )
    return lines


def rows(title: str, result: dict[str, dict[str, float]], op: str, per_host: int) -> list[str]:
    names = impls(op, per_host)
    shape = f"2 hosts x {per_host} rank{'s' if per_host > 1 else ''}"
    lines = [
        f"\n**{title}** ({shape}; ratio = time / {names[0]})\n",
        "| size | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for size in map(int, result):
        row = result[str(size)]
        base = row[names[0]]
        cells = [f"{base:.0f}"] + [
            f"{row[name]:.0f} ({row[name] / base:.2f}x)" for name in names[1:]
        ]
        lines.append(f"| {human(size)} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        # The launcher drops an empty argument: no --sizes arrives as no sixth argument.
        sizes = sys.argv[5] if len(sys.argv) > 5 else ""
        rank_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sizes)
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks.across_hosts", description=__doc__)
    parser.add_argument("--op", choices=OPS, default="all_reduce")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument(
        "--per-host", type=int, choices=[1, 2], default=2, help="ranks on each of the 2 hosts"
    )
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/hosts2[x1][_<op>]")
    parser.add_argument(
        "--links", choices=["both", "limited"], default="both", help="'limited': 10 Gb/s only"
    )
    parser.add_argument(
        "--sizes", default="", help="comma-separated sizes in bytes (default: the op's 5 sizes)"
    )
    args = parser.parse_args()
    if args.out is None:
        suffix = "" if args.op == "all_reduce" else f"_{args.op}"
        shape = "" if args.per_host == 2 else f"x{args.per_host}"
        args.out = HERE / "results" / f"hosts2{shape}{suffix}"
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
                [args.per_host, args.per_host],
                ["--rank", args.op, str(args.iters), str(args.per_host), args.sizes],
                env={"PYTHONPATH": f"{HERE.parent}:{TESTS}"},
            )
            ranks, _ = host_results(launchers, timeout=900)
        code, out = ranks[0]
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        if code != 0 or not lines:
            sys.exit(f"rank 0 failed ({code}):\n{out[-4000:]}")
        runs[link] = json.loads(lines[-1][len("RESULT ") :])
        runs[link]["gbit"] = gbit
        runs[link]["per_host"] = args.per_host
        print(
            f"{link}: c10d_func's default served by {runs[link]['hierarchical_backend']}, the "
            f"backend's "
            f"group by {runs[link]['backend_group_transport']}",
            flush=True,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(runs, indent=2))
    markdown = table(runs, args.op)
    (args.out / "results.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
