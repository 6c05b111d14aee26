"""What observing costs: an 8 B all_reduce with and without c10d_func's observation.

Every collective of c10d_func is observed (counters for c10d_func.groups(); entries in torch's
flight recorder when TORCH_FR_BUFFER_SIZE asks for it; torch.profiler events while a profiler
records). This run measures a 2-rank 8 B functional all_reduce on shared memory, back to back,
under each setting, beside torch's Gloo all_reduce under the same settings (Gloo records in the
flight recorder by default), and reports the median latency and its ratio to "not observed"
(C10D_FUNC_OBSERVE=0) for c10d_func, to "default" for Gloo.

    python -m benchmarks.observability_cost [--iters 3000] [--out benchmarks/results/observability]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

SETTINGS = {
    # name: (environment, profiler active)
    "not observed (C10D_FUNC_OBSERVE=0)": (
        {"C10D_FUNC_OBSERVE": "0", "TORCH_FR_BUFFER_SIZE": "0"},
        False,
    ),
    "default (counters only)": ({"TORCH_FR_BUFFER_SIZE": "0"}, False),
    "flight recorder (TORCH_FR_BUFFER_SIZE=2000)": ({"TORCH_FR_BUFFER_SIZE": "2000"}, False),
    "profiler recording": ({"TORCH_FR_BUFFER_SIZE": "0"}, True),
}


def rank_main(iters: int, profile: bool, out: str) -> None:
    import c10d_func  # noqa: F401 - registers the ops
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ranks = list(range(world))
    x = torch.ones(2)  # 8 B

    def func() -> None:
        torch.ops.c10d_func.wait_tensor(torch.ops.c10d_func.all_reduce(x, "sum", "", ranks, world))

    def gloo() -> None:
        dist.all_reduce(x)

    results = {}
    for name, fn in (("c10d_func", func), ("gloo", gloo)):
        for _ in range(200):
            fn()
        dist.barrier()
        rounds = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(iters // 5):
                fn()
            rounds.append((time.perf_counter() - start) / (iters // 5) * 1e6)
        results[name] = statistics.median(rounds)

    if profile:
        import torch.profiler

        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            results = {}
            for name, fn in (("c10d_func", func), ("gloo", gloo)):
                dist.barrier()
                start = time.perf_counter()
                for _ in range(iters // 5):
                    fn()
                results[name] = (time.perf_counter() - start) / (iters // 5) * 1e6
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=3000)
    parser.add_argument("--out", default=None, help="folder for results.md and results.json")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_main:
        rank_main(args.iters, args.profile, args.result)
        return

    from benchmarks.launcher import run_ranks

    measured = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (env, profile) in SETTINGS.items():
            result = os.path.join(tmp, "result.json")
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                extra = ["--profile"] if profile else []
                run_ranks(
                    "benchmarks.observability_cost",
                    ["--rank-main", "--iters", str(args.iters), "--result", result, *extra],
                    nproc=2,
                    timeout_s=600,
                )
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            measured[name] = json.loads(Path(result).read_text())

    base_func = measured["not observed (C10D_FUNC_OBSERVE=0)"]["c10d_func"]
    base_gloo = measured["default (counters only)"]["gloo"]
    lines = [
        "| setting | c10d_func all_reduce 8 B (µs) | ratio | Gloo all_reduce 8 B (µs) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in measured.items():
        lines.append(
            f"| {name} | {values['c10d_func']:.1f} | {values['c10d_func'] / base_func:.2f} | "
            f"{values['gloo']:.1f} | {values['gloo'] / base_gloo:.2f} |"
        )
    from benchmarks.report import publish

    publish(measured, "\n".join(lines), args.out)


if __name__ == "__main__":
    main()
