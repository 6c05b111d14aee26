"""DeepSpeed's CPU shared-memory all_reduce beside c10d_func's, float32, ranks on one host.

DeepSpeed is optional: when `import deepspeed` fails, or its `shm_comm` op cannot be built, this
prints why and exits 0. Its CPU path (DS_ACCELERATOR=cpu, set here) is
`deepspeed.comm.inference_all_reduce(x)`: in place, through `torch.ops.deepspeed.
inference_all_reduce_`, the op that DeepSpeed's `ShareMemCommBuilder` JIT-builds (a C++ compiler
and ninja; ~40 s the first time, cached under ~/.cache/torch_extensions). The op is built once by
this launcher before the ranks start. What the ranks need for the shm path:
  - `deepspeed.comm.init_distributed(dist_backend="gloo")` with env:// (MASTER_ADDR, MASTER_PORT,
    RANK, WORLD_SIZE, LOCAL_RANK; without them DeepSpeed tries MPI discovery);
  - LOCAL_SIZE == WORLD_SIZE: the op maps its shared memory only then (and does not check it:
    without LOCAL_SIZE its all_reduce dereferences unmapped workspaces);
  - float32 (avx2), bf16/fp16 (avx512bw); other dtypes pass its Python check, and the op returns
    without reducing (see the report). Under 1 MiB one copy-in + a barrier, each rank reducing
    every rank's buffer; from 1 MiB a reduce-scatter + all-gather with two barriers; chunks of
    32 MiB; OpenMP threads (OMP_NUM_THREADS) for its copies and reductions, spin-waits between.
Its segments (/dev/shm/deepspeed_allreduce_buffer_<uid>_<addr>_<port>_<rank>, 66 MiB a rank) are
never unlinked by DeepSpeed; each rank unlinks its own once every rank has mapped them.

Measured per size, interleaved round-robin in blocks (benchmarks/timing.py), each candidate back to
back on its own buffer; µs per call, median over iterations of the slowest rank:
  - deepspeed: `deepspeed.comm.inference_all_reduce(x)` (in place);
  - deepspeed op: `torch.ops.deepspeed.inference_all_reduce_(x)`, the same without the Python
    wrapper (its `timed_op` decorator and `TorchBackend` checks);
  - deepspeed, input kept: `inference_all_reduce(x.clone())`, what a caller who still needs `x`
    writes (DeepSpeed has no out-of-place form): the reference for c10d_func's functional form;
  - c10d_func in place, private: `all_reduce_(x, "sum", "", ranks, n)` + `wait_tensor(x)` on a
    `torch.empty` buffer, each op's `.default` overload bound once (as for DeepSpeed's op, and as
    inductor's generated code calls them);
  - c10d_func in place, symmetric: the same on a `c10d_func.empty(...)` buffer;
  - c10d_func functional: `wait_tensor(all_reduce(x, "sum", "", ranks, n))`.
Every candidate's result is checked once per size (sum of known per-rank values) before timing; a
wrong one fails the run. Ratios are c10d_func time / DeepSpeed time (< 1: c10d_func faster).

    python -m benchmarks.deepspeed_allreduce [--nproc 2] [--iters N] [--quick] \
        [--out benchmarks/results/deepspeed]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

SIZES = [8, 4 << 10, 64 << 10, 1 << 20, 8 << 20, 32 << 20]  # bytes of float32
DS = "deepspeed"
DS_OP = "deepspeed op"
DS_KEPT = "deepspeed, input kept"
PRIVATE = "c10d_func in place, private"
SYMMETRIC = "c10d_func in place, symmetric"
FUNCTIONAL = "c10d_func functional"
IMPLS = [DS, DS_OP, DS_KEPT, PRIVATE, SYMMETRIC, FUNCTIONAL]
C10D_FUNC_IMPLS = [PRIVATE, SYMMETRIC, FUNCTIONAL]
NAIVE_THRESHOLD = 1 << 20  # DeepSpeed's NAIVE_ALLREDUCE_THRESHOLD (ops/csrc/cpu/comm/shm.cpp)
DS_SHM_PREFIX = "/dev/shm/deepspeed_allreduce_buffer"
BYTES_PER_SIZE = 4 << 30  # bytes one candidate reduces per size, at most: bounds large sizes


def iters_for(size: int, iters: int, quick: bool) -> int:
    return iters if quick else max(20, min(iters, BYTES_PER_SIZE // size))


def deepspeed_unavailable() -> str | None:
    """Why DeepSpeed's CPU shm all_reduce cannot run here, or None once its op is built."""
    os.environ["DS_ACCELERATOR"] = "cpu"
    try:
        import deepspeed
        import deepspeed.comm
        import deepspeed.ops
        from deepspeed.accelerator import get_accelerator
    except Exception as e:  # noqa: BLE001 - any import failure means: not installed usably
        return f"deepspeed is not importable ({type(e).__name__}: {e})"
    builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
    if builder is None or not deepspeed.ops.__compatible_ops__.get(builder.NAME, False):
        return (
            f"deepspeed {deepspeed.__version__}: its ShareMemCommBuilder op is not compatible here"
        )
    try:
        builder.load(verbose=False)
    except Exception as e:  # noqa: BLE001 - compiler, ninja, headers: the build's own message
        return f"deepspeed {deepspeed.__version__}: building its shm_comm op failed ({e})"
    return None


def rank_main(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    import deepspeed
    import deepspeed.comm as ds_comm
    import torch.distributed as dist

    ds_comm.init_distributed(dist_backend="gloo", verbose=False)
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()  # every rank has mapped every rank's DeepSpeed segment: unlink ours
    addr, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
    own_segment = f"{DS_SHM_PREFIX}_{os.getuid()}_{addr}_{port}_{rank}"
    if os.path.exists(own_segment):
        os.unlink(own_segment)

    import c10d_func  # after the default group exists, so that it becomes c10d_func's world

    from benchmarks.timing import measure_interleaved

    cdb = ds_comm.comm.cdb
    level = getattr(cdb, "shm_vector_kernel_level", 0)
    ds_shm = (
        cdb.shm_comm_op is not None
        and hasattr(torch.ops, "deepspeed")
        and hasattr(torch.ops.deepspeed, "inference_all_reduce_")
        and level >= 1  # float32 needs avx2
    )
    if not ds_shm and rank == 0:
        print("deepspeed: no shm op for float32 here; inference_all_reduce is torch.distributed's")

    ops = torch.ops.c10d_func
    ds_op = torch.ops.deepspeed.inference_all_reduce_.default if ds_shm else None
    ranks = list(range(world))
    # The overloads, bound once, as for DeepSpeed's op above and as inductor's generated code
    # calls them: a packet (`ops.all_reduce_`) picks its overload in Python on every call.
    all_reduce_ = ops.all_reduce_.default
    all_reduce = ops.all_reduce.default
    wait_tensor = ops.wait_tensor.default

    def ds_kept(x: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        ds_comm.inference_all_reduce(out)
        return out

    def c10d_in_place(buf: torch.Tensor) -> None:
        all_reduce_(buf, "sum", "", ranks, world)
        wait_tensor(buf)

    def c10d_functional(x: torch.Tensor) -> torch.Tensor:
        return wait_tensor(all_reduce(x, "sum", "", ranks, world))

    def check(name: str, size: int, got: torch.Tensor, expected: torch.Tensor) -> None:
        if not torch.equal(got, expected):
            bad = (got != expected).nonzero()[0].item()
            raise AssertionError(
                f"rank {rank}: {name} at {size} B: element {bad} is {got[bad].item()}, "
                f"expected {expected[bad].item()}"
            )

    sizes = [s for s in SIZES if not args.sizes or s in args.sizes]
    per_size: list[dict[str, Any]] = []
    for size in sizes:
        n = size // 4
        base = (torch.arange(n) % 13).float()
        mine = base + (rank + 1)
        expected = base * world + world * (world + 1) // 2

        # Buffers, one per candidate; each checked once.
        ds_buf = mine.clone()
        ds_comm.inference_all_reduce(ds_buf)
        check(DS, size, ds_buf, expected)
        kept = ds_kept(mine)
        check(DS_KEPT, size, kept, expected)
        check(DS_KEPT + " (input kept)", size, mine, base + (rank + 1))
        del kept
        ds_op_buf = mine.clone()
        if ds_op is not None:
            ds_op(ds_op_buf)
            check(DS_OP, size, ds_op_buf, expected)
        private = torch.empty(n)
        private.copy_(mine)
        ops.all_reduce_(private, "sum", "", ranks, world)
        check(PRIVATE, size, ops.wait_tensor(private), expected)
        symmetric = c10d_func.empty(n, group=ranks, dtype=torch.float32)
        symmetric.copy_(mine)
        ops.all_reduce_(symmetric, "sum", "", ranks, world)
        check(SYMMETRIC, size, ops.wait_tensor(symmetric), expected)
        functional_in = mine.clone()
        out = ops.wait_tensor(ops.all_reduce(functional_in, "sum", "", ranks, world))
        check(FUNCTIONAL, size, out, expected)
        check(FUNCTIONAL + " (input kept)", size, functional_in, mine)
        del out

        # In place back to back: zeros keep the values finite whatever the iteration count.
        for buf in (ds_buf, ds_op_buf, private, symmetric):
            buf.zero_()

        thunks = {DS: partial(ds_comm.inference_all_reduce, ds_buf)}
        if ds_op is not None:
            thunks[DS_OP] = partial(ds_op, ds_op_buf)
        # zeros, as the in-place buffers: the clone is reduced, the source never changes.
        kept_source = torch.zeros_like(mine)
        thunks[DS_KEPT] = partial(ds_kept, kept_source)
        thunks[PRIVATE] = partial(c10d_in_place, private)
        thunks[SYMMETRIC] = partial(c10d_in_place, symmetric)
        thunks[FUNCTIONAL] = partial(c10d_functional, functional_in)
        iters = iters_for(size, args.iters, args.quick)
        times = measure_interleaved(
            thunks,
            iters=iters,
            warmup=min(10, iters),
            block=args.block,
            barrier=dist.barrier,
            sync=lambda: None,
        )
        per_size.append({"size": size, "iters": iters, "times_s": times})

        # Once more after the timed calls: every buffer still reduces (not only zeros).
        for name, buf in (
            (DS, ds_buf),
            (DS_OP, ds_op_buf),
            (PRIVATE, private),
            (SYMMETRIC, symmetric),
        ):
            if name in thunks:
                buf.copy_(mine)
                thunks[name]()
                check(name + " (after timing)", size, buf, expected)
        out = thunks[FUNCTIONAL]()
        check(FUNCTIONAL + " (after timing)", size, out, expected)
        kept_source.copy_(mine)
        out = thunks[DS_KEPT]()
        check(DS_KEPT + " (after timing)", size, out, expected)
        del out
        del symmetric, private  # returns the symmetric pool's room before the next size
        if rank == 0:
            print(f"{size} B: measured", flush=True)

    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, per_size)
    if rank == 0:
        groups = c10d_func.groups()
        metadata = {
            "nproc": world,
            "threads_per_rank": args.threads,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "LOCAL_SIZE": os.environ.get("LOCAL_SIZE"),
            "torch_version": torch.__version__,
            "deepspeed_version": deepspeed.__version__,
            "deepspeed_accelerator": os.environ.get("DS_ACCELERATOR"),
            "deepspeed_shm_op": ds_shm,
            "deepspeed_vector_kernel_level": level,
            "deepspeed_backend": dist.get_backend(),
            "c10d_func_native": c10d_func._C.__file__,
            "c10d_func_groups": json.loads(json.dumps(groups, default=str)),
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "loadavg_at_start": args.loadavg,
            "loadavg_at_end": list(os.getloadavg()),
        }
        Path(args.result).write_text(json.dumps({"metadata": metadata, "ranks": gathered}))
    dist.barrier()
    dist.destroy_process_group()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.timing import max_over_ranks, median

    rows, ratios = [], []
    for i, first in enumerate(raw["ranks"][0]):
        size = first["size"]
        medians: dict[str, float] = {}
        for impl in first["times_s"]:
            times = max_over_ranks([r[i]["times_s"][impl] for r in raw["ranks"]])
            medians[impl] = median(times) * 1e6
            rows.append(
                {
                    "size": size,
                    "impl": impl,
                    "iters": first["iters"],
                    "median_us": medians[impl],
                    "min_us": min(times) * 1e6,
                    "p10_us": quantile(times, 0.1) * 1e6,
                    "p90_us": quantile(times, 0.9) * 1e6,
                }
            )
        ds_path = "shm, one barrier" if size < NAIVE_THRESHOLD else "shm, reduce-scatter + gather"
        if not raw["metadata"]["deepspeed_shm_op"]:
            ds_path = "torch.distributed (gloo)"
        ratios.append(
            {
                "size": size,
                "deepspeed_path": ds_path,
                **{impl: medians[impl] / medians[DS] for impl in C10D_FUNC_IMPLS},
                "deepspeed_op_over_deepspeed": (
                    medians[DS_OP] / medians[DS] if DS_OP in medians else None
                ),
                "functional_over_deepspeed_input_kept": medians[FUNCTIONAL] / medians[DS_KEPT],
            }
        )
    return {"metadata": raw["metadata"], "rows": rows, "ratios": ratios}


def render(results: dict[str, Any]) -> str:
    from benchmarks.report import human_bytes

    meta = results["metadata"]
    by_key = {(r["size"], r["impl"]): r for r in results["rows"]}
    short = {PRIVATE: "private", SYMMETRIC: "symmetric", FUNCTIONAL: "functional"}
    head = [
        "size",
        *(f"{impl} µs" for impl in IMPLS),
        *(f"ratio {short[impl]}/ds" for impl in C10D_FUNC_IMPLS),
        "ratio functional/ds input kept",
        "deepspeed path",
    ]
    lines = [
        "# DeepSpeed CPU shm all_reduce vs c10d_func",
        "",
        (
            f"{meta['nproc']} ranks on one host ({meta['cores']} cores), float32, "
            f"{meta['threads_per_rank']} thread(s) per rank "
            f"(OMP_NUM_THREADS={meta['OMP_NUM_THREADS']}); "
            f"torch {meta['torch_version']}, deepspeed {meta['deepspeed_version']} "
            f"(DS_ACCELERATOR={meta['deepspeed_accelerator']}, init_distributed over "
            f"{meta['deepspeed_backend']}, shm op: {meta['deepspeed_shm_op']}, "
            f"vector kernel level {meta['deepspeed_vector_kernel_level']}). "
            f"Load average {meta['loadavg_at_start'][0]:.2f} before the ranks started, "
            f"{meta['loadavg_at_end'][0]:.2f} at the end (the ranks' own included)."
        ),
        "",
        (
            "µs per call, median over iterations of the slowest rank (min, p10, p90 in results.json); "
            "every candidate back to back on its own buffer, candidates interleaved in blocks. "
            "Ratios: c10d_func time / `deepspeed.comm.inference_all_reduce` time (< 1: c10d_func "
            "faster). Every result was checked against the sum of the ranks' known values before "
            "and after timing."
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 2) + "---|",
    ]
    for ratio in results["ratios"]:
        size = ratio["size"]
        iters = by_key[(size, DS)]["iters"]
        cells = [f"{human_bytes(size)} ({iters} it)"]
        for impl in IMPLS:
            row = by_key.get((size, impl))
            cells.append("n/a" if row is None else f"{row['median_us']:.1f}")
        cells += [f"{ratio[impl]:.2f}" for impl in C10D_FUNC_IMPLS]
        cells.append(f"{ratio['functional_over_deepspeed_input_kept']:.2f}")
        cells.append(ratio["deepspeed_path"])
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        (
            "deepspeed: `deepspeed.comm.inference_all_reduce(x)`; deepspeed op: "
            "`torch.ops.deepspeed.inference_all_reduce_(x)` (no Python wrapper); deepspeed, input "
            "kept: `inference_all_reduce(x.clone())`; private: `all_reduce_` + `wait_tensor` "
            "(their `.default` overloads) on a `torch.empty` buffer; symmetric: the same on "
            "`c10d_func.empty(...)`; functional: `wait_tensor(all_reduce(x, ...))`."
        ),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--iters", type=int, default=None, help="per candidate and size (max)")
    parser.add_argument("--block", type=int, default=25, help="iterations per timed block")
    parser.add_argument("--quick", action="store_true", help="a few iterations per size")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch and OpenMP threads per rank (default: cores / nproc, at least 1)",
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help="folder for results.md and results.json")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the ranks")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", default="", help=argparse.SUPPRESS)
    parser.add_argument("--loadavg", type=float, nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.iters is None:
        args.iters = 20 if args.quick else 1000
    if args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // args.nproc)
    if args.rank_main:
        rank_main(args)
        return 0

    start = time.time()
    why = deepspeed_unavailable()
    if why is not None:
        print(f"note: skipped, DeepSpeed is optional: {why}")
        print(
            "      (pip install --no-deps deepspeed plus its pure-Python imports; see the docstring)"
        )
        return 0
    print(f"deepspeed shm op ready ({time.time() - start:.0f} s); starting {args.nproc} ranks")

    from benchmarks.launcher import RankFailure, run_ranks
    from benchmarks.report import write_document

    env = {
        "DS_ACCELERATOR": "cpu",
        "LOCAL_SIZE": str(args.nproc),  # all ranks local: DeepSpeed maps its shm only then
        "OMP_NUM_THREADS": str(args.threads),
    }
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.json")
        command = ["--rank-main", "--result", result, "--iters", str(args.iters)]
        command += ["--block", str(args.block), "--threads", str(args.threads)]
        command += ["--loadavg", *(f"{x:.2f}" for x in os.getloadavg())]  # other load: noise
        if args.quick:
            command.append("--quick")
        if args.sizes:
            command += ["--sizes", *map(str, args.sizes)]
        try:
            run_ranks(
                "benchmarks.deepspeed_allreduce",
                command,
                nproc=args.nproc,
                timeout_s=args.timeout,
                extra_env=env,
            )
        except RankFailure as failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            # Killed ranks leave their DeepSpeed segments (66 MiB each) behind: ours are the
            # local ones created since this run began.
            for path in glob.glob(f"{DS_SHM_PREFIX}_{os.getuid()}_127.0.0.1_*"):
                if os.path.getmtime(path) >= start:
                    os.unlink(path)
            return 1
        raw = json.loads(Path(result).read_text())
    results = summarize(raw)
    markdown = render(results)
    print(markdown)
    if args.out:
        json_path, md_path = write_document(results, markdown, Path(args.out))
        print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
