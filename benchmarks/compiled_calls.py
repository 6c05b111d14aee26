"""What a collective costs inside a compiled program: an 8 B all_reduce + wait, called from
inductor's C++ wrapper (`cpp_wrapper=True`) and from an AOTInductor package.

Three programs per wrapper, the same chain of CHAIN all_reduce + wait on an 8 B tensor (each
call's input is the previous call's output, so the calls run one after another), differing only
in how the collective is reached:
  - c10d_func, direct C shims: `aoti_torch_cpu_c10d_func_all_reduce_` (kernels/c_shims.cpp);
  - c10d_func, boxed: C10D_FUNC_C_SHIMS=0, inductor's boxed dispatcher call (C++ wrapper) or
    proxy executor (AOTInductor), what custom ops get without C shims;
  - torch funcol: torch's own `_c10d_functional` ops and C shims, on a Gloo group.
Each program is called back to back after a warm-up; the table gives µs per all_reduce + wait
(the program's time / CHAIN) as rank 0 sees it, median of 5 rounds, and the ratio to c10d_func's
direct calls. 2 ranks on one host (shared memory for c10d_func).

    python -m benchmarks.compiled_calls [--iters 2000] [--out benchmarks/results/compiled_calls]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

CHAIN = 16
PROGRAMS = ["c10d_func, direct C shims", "c10d_func, boxed", "torch funcol (Gloo)"]
WRAPPERS = ["cpp_wrapper", "AOTInductor"]


def chain_program(library: str, ranks: list[int], group_name: str):  # type: ignore[no-untyped-def]
    import torch

    class Chain(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for _ in range(CHAIN):
                if library == "torch funcol (Gloo)":
                    ops = torch.ops._c10d_functional
                    x = ops.wait_tensor(ops.all_reduce(x, "sum", group_name))
                else:
                    ops = torch.ops.c10d_func
                    x = ops.wait_tensor(ops.all_reduce(x, "sum", "", ranks, len(ranks)))
                x = x * 0.5  # keeps values bounded; fused into the next collective's input
            return x

    return Chain()


def time_per_call(program, x, iters: int) -> float:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    for _ in range(50):
        program(x)
    rounds = []
    for _ in range(5):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters // 5):
            program(x)
        rounds.append((time.perf_counter() - start) / (iters // 5) / CHAIN * 1e6)
    return statistics.median(rounds)


def rank_main(iters: int, out: str, workdir: str, programs: list[str]) -> None:
    import c10d_func  # noqa: F401 - registers the ops
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    ranks, group_name = list(range(world)), dist.group.WORLD.group_name
    torch._inductor.config.fx_graph_cache = False  # each program is compiled as configured now
    x = torch.ones(2)
    results: dict[str, dict[str, float]] = {wrapper: {} for wrapper in WRAPPERS}
    for library in programs:
        program = chain_program(library, ranks, group_name)

        # One package, compiled by rank 0, loaded by every rank.
        path = os.path.join(workdir, f"chain{PROGRAMS.index(library)}.pt2")
        if rank == 0:
            exported = torch.export.export(program, (x,))
            torch._inductor.aoti_compile_and_package(exported, package_path=path)
        dist.barrier()
        runner = torch._inductor.aoti_load_package(path)
        results["AOTInductor"][library] = time_per_call(runner, x, iters)
        expected = torch.ones(2) * (world * 0.5) ** CHAIN
        assert torch.allclose(runner(x), expected), f"{library}: wrong result"
        if rank == 0:  # kept if a later program hangs
            Path(out).write_text(json.dumps(results))

        torch._dynamo.reset()
        with torch._inductor.config.patch({"cpp_wrapper": True}):
            compiled = torch.compile(program, fullgraph=True)
            results["cpp_wrapper"][library] = time_per_call(compiled, x, iters)
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--out", default=None, help="folder for results.md and results.json")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", default="", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default="", help=argparse.SUPPRESS)
    parser.add_argument("--programs", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_main:
        rank_main(
            args.iters,
            args.result,
            args.workdir,
            [PROGRAMS[int(i)] for i in args.programs.split(",")],
        )
        return

    from benchmarks.launcher import RankFailure, run_ranks

    measured: dict[str, dict[str, float]] = {wrapper: {} for wrapper in WRAPPERS}
    # C10D_FUNC_C_SHIMS is read once per process: the boxed program runs in processes of its own.
    # A program that hangs (e.g. torch funcol over Gloo once hung when c10d_func's library was
    # made global; docs/inductor.md) costs its own processes only, and torch funcol's, which
    # still hangs there (README), its own shorter limit: compiling and timing it takes under a
    # minute when it does not hang.
    for shims, programs, limit_s in (("1", "0", 600), ("0", "1", 600), ("1", "2", 180)):
        with tempfile.TemporaryDirectory() as tmp:
            result = os.path.join(tmp, "result.json")
            os.environ["C10D_FUNC_C_SHIMS"] = shims
            command = ["--rank-main", "--iters", str(args.iters), "--result", result]
            command += ["--workdir", tmp, "--programs", programs]
            try:
                run_ranks("benchmarks.compiled_calls", command, nproc=2, timeout_s=limit_s)
            except RankFailure as failure:
                print(f"{PROGRAMS[int(programs)]}: {failure}")
            if os.path.exists(result):
                for wrapper, values in json.loads(Path(result).read_text()).items():
                    measured[wrapper].update(values)
    os.environ.pop("C10D_FUNC_C_SHIMS")

    lines = [
        "| wrapper | " + " | ".join(f"{name} (µs)" for name in PROGRAMS) + " |",
        "|---|" + "---:|" * len(PROGRAMS),
    ]
    for wrapper in WRAPPERS:
        values = measured[wrapper]
        base = values[PROGRAMS[0]]

        def cell(i: int, name: str, values: dict[str, float] = values, base: float = base) -> str:
            if name not in values:
                return "did not finish (see the run's output)"
            return f"{values[name]:.1f}" + ("" if i == 0 else f" ({values[name] / base:.2f}x)")

        cells = [cell(i, name) for i, name in enumerate(PROGRAMS)]
        lines.append(f"| {wrapper} | " + " | ".join(cells) + " |")
    from benchmarks.report import publish

    publish(measured, "\n".join(lines), args.out)


if __name__ == "__main__":
    main()
