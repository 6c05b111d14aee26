"""The local multi-rank demo: `python -m c10d_func.demo --nproc 4`.

Launches N local CPU ranks (real processes, a real TCPStore, the library's default transport:
shared memory on one host; the world comes from the env:// variables, no init_process_group),
runs every c10d_func operator, checks each result
against a value computed from every rank's known input, times it, and prints one table on rank 0:
op, shape, dtype, correct, median µs per call (issue + wait).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class Case:
    op: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    run: Callable[[torch.Tensor], torch.Tensor]  # issues the op on this rank's input
    expected: Callable[[], torch.Tensor]  # computed from every rank's input, no communication


def known_input(rank: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Rank r holds r+1 everywhere, plus a ramp so positions matter."""
    ramp = torch.arange(int(torch.Size(shape).numel()), dtype=torch.float64).reshape(shape)
    return (ramp + rank + 1).to(dtype)


def cases(rank: int, n: int) -> list[Case]:
    ops = torch.ops.c10d_func
    ranks = list(range(n))
    # References are computed in float64 from every rank's input and cast once at the end, so
    # they do not depend on an accumulation order.
    inputs = lambda shape, dtype: [known_input(r, shape, dtype).double() for r in ranks]
    out: list[Case] = []
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        shape = (n * 4, 8)
        out += [
            Case(
                "all_reduce sum",
                shape,
                dtype,
                lambda x: ops.all_reduce(x, "sum", "", ranks, n),
                lambda s=shape, d=dtype: sum(inputs(s, d)),
            ),
            Case(
                "all_reduce max",
                shape,
                dtype,
                lambda x: ops.all_reduce(x, "max", "", ranks, n),
                lambda s=shape, d=dtype: torch.stack(inputs(s, d)).amax(0),
            ),
            Case(
                "all_gather_into_tensor",
                shape,
                dtype,
                lambda x: ops.all_gather_into_tensor(x, "", ranks, n),
                lambda s=shape, d=dtype: torch.cat(inputs(s, d)),
            ),
            Case(
                "reduce_scatter_tensor sum",
                shape,
                dtype,
                lambda x: ops.reduce_scatter_tensor(x, "sum", "", ranks, n),
                lambda s=shape, d=dtype: sum(inputs(s, d)).chunk(n)[rank],
            ),
        ]
    shape, dtype = (n * 4, 8), torch.float32
    out += [
        Case(
            "all_reduce avg",
            shape,
            dtype,
            lambda x: ops.all_reduce(x, "avg", "", ranks, n),
            lambda: sum(inputs(shape, dtype)) / n,
        ),
        Case(
            "all_to_all_single",
            shape,
            dtype,
            lambda x: ops.all_to_all_single(x, None, None, "", ranks, n),
            lambda: torch.cat([i.chunk(n)[rank] for i in inputs(shape, dtype)]),
        ),
        Case(
            "broadcast src=0",
            shape,
            dtype,
            lambda x: ops.broadcast(x, 0, "", ranks, n),
            lambda: inputs(shape, dtype)[0],
        ),
        Case(
            "reduce sum dst=0",
            shape,
            dtype,
            lambda x: ops.reduce(x, "sum", 0, "", ranks, n),
            lambda: sum(inputs(shape, dtype)) if rank == 0 else torch.zeros(shape),
        ),
        Case(
            "gather dst=0",
            shape,
            dtype,
            lambda x: ops.gather(x, 0, "", ranks, n),
            lambda: torch.cat(inputs(shape, dtype)) if rank == 0 else torch.zeros(n * shape[0], 8),
        ),
        Case(
            "scatter src=0",
            shape,
            dtype,
            lambda x: ops.scatter(x, 0, "", ranks, n),
            lambda: inputs(shape, dtype)[0].chunk(n)[rank],
        ),
        Case(
            "permute shift by 1",
            shape,
            dtype,
            lambda x: ops.permute(x, [(i + 1) % n for i in ranks], "", ranks, n),
            lambda: inputs(shape, dtype)[(rank - 1) % n],
        ),
        Case(
            "all_reduce_coalesced sum",
            shape,
            dtype,
            lambda x: ops.all_reduce_coalesced([x, x[0]], "sum", "", ranks, n)[0],
            lambda: sum(inputs(shape, dtype)),
        ),
        Case(
            "all_reduce sum, groups of 2",
            shape,
            dtype,
            lambda x: ops.all_reduce(x, "sum", "", ranks, 2 if n % 2 == 0 else 1),
            lambda: sum(
                inputs(shape, dtype)[r]
                for r in ranks
                if r // (2 if n % 2 == 0 else 1) == rank // (2 if n % 2 == 0 else 1)
            ),
        ),
    ]
    return out


def header(n: int, groups: list[dict]) -> str:
    """The table's title: what actually served the demo's groups, as the registry reports it in
    `groups` (c10d_func.groups() after the collectives): shm on one host, unless the
    environment chose another transport."""
    served = sorted({g["backend"] for g in groups if g["device"] == "cpu"})
    return (
        f"c10d_func demo: {n} CPU ranks over {', '.join(served) or 'local copies'}, "
        f"world from env://, torch {torch.__version__}"
    )


def run_rank(iters: int) -> None:
    import c10d_func  # registers torch.ops.c10d_func

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ops = torch.ops.c10d_func
    rows = []
    for case in cases(rank, n):
        x = known_input(rank, case.shape, case.dtype)
        result = ops.wait_tensor(case.run(x))
        expected = case.expected().to(case.dtype)
        tolerance = {torch.bfloat16: 1e-2, torch.float16: 1e-3, torch.float32: 1e-6}.get(
            case.dtype, 0
        )
        correct = result.shape == expected.shape and torch.allclose(
            result.double(), expected.double(), rtol=tolerance, atol=0
        )
        # Each rank times its own calls; agree on the slowest rank's median afterwards.
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            ops.wait_tensor(case.run(x))
            times.append((time.perf_counter() - start) * 1e6)
        median = torch.tensor([statistics.median(times), 0.0 if correct else 1.0])
        median = ops.wait_tensor(ops.all_reduce(median, "max", "demo-stats", list(range(n)), n))
        rows.append(
            (
                case.op,
                tuple(case.shape),
                str(case.dtype).replace("torch.", ""),
                median[1].item() == 0.0,
                median[0].item(),
            )
        )
    if rank == 0:
        print(f"\n{header(n, c10d_func.groups())}")
        print(f"{'op':<30} {'shape':<10} {'dtype':<9} {'correct':<8} {'median µs':>10}")
        for op, shape, dtype, correct, us in rows:
            print(f"{op:<30} {shape!s:<10} {dtype:<9} {'yes' if correct else 'NO':<8} {us:>10.1f}")
        wrong = [r[0] for r in rows if not r[3]]
        print(f"\n{len(rows) - len(wrong)} of {len(rows)} correct on every rank")
    if any(not r[3] for r in rows):
        sys.exit(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(nproc: int, iters: int, timeout: float) -> int:
    env = {
        **os.environ,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": str(nproc),
    }
    env.setdefault("C10D_FUNC_TIMEOUT", "60")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "c10d_func.demo", "--worker", "--iters", str(iters)],
            env={**env, "RANK": str(rank)},
        )
        for rank in range(nproc)
    ]
    deadline = time.monotonic() + timeout
    codes = []
    try:
        for proc in procs:
            codes.append(proc.wait(timeout=max(deadline - time.monotonic(), 1)))
    except subprocess.TimeoutExpired:
        print(f"demo: ranks did not finish within {timeout:.0f} s; killing them", file=sys.stderr)
        return 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return max(codes) if codes else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=4, help="local ranks to launch (default 4)")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per op (default 20)")
    parser.add_argument(
        "--timeout", type=float, default=300, help="seconds before ranks are killed"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_rank(args.iters)
    else:
        sys.exit(launch(args.nproc, args.iters, args.timeout))


if __name__ == "__main__":
    main()
