"""Benchmark runner: `python -m benchmarks.collectives [--quick] [--nproc N] [--device cuda] ...`.

Owns the command line and the run's shape: resolves options, starts the ranks (benchmarks.worker)
under a timeout, then summarises their raw times and writes results.json, results.md and
collectives.png to `--out`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import plot, report
from .impls import ELEMENT_BYTES, OPS
from .launcher import RankFailure, run_ranks
from .mlp_step import STEP_BACKENDS

QUICK = {"min_bytes": 8, "max_bytes": 512, "iters": 3, "warmup": 1}
FULL = {"min_bytes": 8, "max_bytes": 64 << 20, "iters": 20, "warmup": 5}
# inductor's first compile takes tens of seconds on a small CPU machine: quick runs skip it.
DEFAULT_STEP_BACKENDS = {"quick": "aot_eager", "full": "aot_eager,inductor"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.collectives", description=__doc__)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--nproc", type=int, help="ranks to launch (default 2 on cpu, 1 on cuda)")
    p.add_argument("--min-bytes", type=int, help="smallest per-rank input (default 8)")
    p.add_argument("--max-bytes", type=int, help="largest per-rank input (default 64 MiB)")
    p.add_argument("--iters", type=int, help="timed iterations per point (default 20)")
    p.add_argument("--warmup", type=int, help="warm-up iterations per point (default 5)")
    p.add_argument(
        "--block",
        type=int,
        default=5,
        help="iterations per timed block; implementations alternate between blocks",
    )
    p.add_argument(
        "--ops", default=",".join(OPS), help=f"comma-separated subset of {','.join(OPS)}"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke-test mode: 8 B .. 512 B, 3 iterations, 1 warm-up, no compiled step",
    )
    step = p.add_mutually_exclusive_group()
    step.add_argument(
        "--step", action="store_true", help="run the compiled MLP step (also in --quick)"
    )
    step.add_argument("--no-step", action="store_true", help="skip the compiled MLP step")
    p.add_argument(
        "--step-backends",
        help=f"comma-separated torch.compile backends among {','.join(STEP_BACKENDS)} "
        f"(default {DEFAULT_STEP_BACKENDS['full']}, {DEFAULT_STEP_BACKENDS['quick']} "
        "with --quick); each falls back to simpler ones when it fails",
    )
    p.add_argument(
        "--transport",
        help="pin c10d_func's columns to this transport (cpu: gloo; cuda: nccl, gloo); "
        "default: the library's own choice on cpu, nccl on cuda. In a world of one rank "
        "the library's choice is a local copy, so pin one to measure a transport",
    )
    p.add_argument("--threads", type=int, help="torch threads per rank (default: CPUs / nproc)")
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds the whole run may take before every rank is killed",
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    return p.parse_args(argv)


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of 4 times min_bytes up to max_bytes, then max_bytes itself if off that grid.

    8 B * 4^k skips 64 MiB (it lands on 32 MiB and 128 MiB), so the default top size is appended.
    """
    out = []
    size = min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= 4
    if out[-1] != max_bytes:
        out.append(max_bytes)
    return out


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """The run's configuration: explicit options win over the --quick / full defaults."""
    base = QUICK if args.quick else FULL
    pick = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in base.items()}
    if pick["min_bytes"] < ELEMENT_BYTES or pick["min_bytes"] % ELEMENT_BYTES:
        raise SystemExit(f"--min-bytes must be a positive multiple of {ELEMENT_BYTES} (float32)")
    if pick["max_bytes"] < pick["min_bytes"] or pick["max_bytes"] % ELEMENT_BYTES:
        raise SystemExit(f"--max-bytes must be >= --min-bytes and a multiple of {ELEMENT_BYTES}")
    if pick["iters"] < 1 or pick["warmup"] < 0 or args.block < 1:
        raise SystemExit("--iters and --block must be >= 1, --warmup >= 0")
    ops = [op for op in args.ops.split(",") if op]
    unknown = set(ops) - set(OPS)
    if unknown or not ops:
        raise SystemExit(f"--ops: unknown {sorted(unknown)}; choose among {list(OPS)}")
    step_backends = args.step_backends or DEFAULT_STEP_BACKENDS["quick" if args.quick else "full"]
    backends = [b for b in step_backends.split(",") if b]
    if set(backends) - set(STEP_BACKENDS):
        raise SystemExit(f"--step-backends: choose among {STEP_BACKENDS}")
    run_step = args.step or not (args.quick or args.no_step)
    nproc = args.nproc or (1 if args.device == "cuda" else 2)
    if nproc < 1:
        raise SystemExit("--nproc must be >= 1")
    return {
        "device": args.device,
        "nproc": nproc,
        "sizes": sizes(pick["min_bytes"], pick["max_bytes"]),
        "iters": pick["iters"],
        "warmup": pick["warmup"],
        "block": args.block,
        "ops": ops,
        "step_backends": backends if run_step else [],
        "threads": args.threads or max(1, (os.cpu_count() or 1) // nproc),
        "timeout_s": args.timeout,
        "transport": args.transport or ("nccl" if args.device == "cuda" else None),
    }


def _check_device(device: str, nproc: int) -> None:
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise SystemExit(
            "--device cuda: torch.cuda.is_available() is False on this machine "
            f"(torch {torch.__version__}); run on a machine with a GPU or use --device cpu"
        )
    if torch.cuda.device_count() < nproc:
        raise SystemExit(
            f"--device cuda: --nproc {nproc} needs one GPU per rank; "
            f"{torch.cuda.device_count()} visible"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = resolve(args)
    _check_device(cfg["device"], cfg["nproc"])
    plot._pyplot()  # fail before the run, not after it, when matplotlib is missing
    # A terminated runner must still kill its ranks (run_ranks does so on the way out).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="c10d_func_bench_") as tmp:
        cfg["raw_path"] = str(Path(tmp) / "raw.json")
        config_path = Path(tmp) / "config.json"
        config_path.write_text(json.dumps(cfg))
        print(
            f"[bench] {cfg['nproc']} ranks on {cfg['device']}, sizes "
            f"{report.human_bytes(cfg['sizes'][0])}..{report.human_bytes(cfg['sizes'][-1])}, "
            f"{cfg['iters']} iterations",
            file=sys.stderr,
            flush=True,
        )
        try:
            run_ranks("benchmarks.worker", [str(config_path)], cfg["nproc"], cfg["timeout_s"])
        except RankFailure as e:
            print(f"[bench] FAILED: {e}", file=sys.stderr)
            return 1
        raw = json.loads(Path(cfg["raw_path"]).read_text())
    from .stats import summarize  # imports torch: only once the ranks are done

    metadata = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "argv": sys.argv[1:] if argv is None else argv,
        **{k: cfg[k] for k in ("iters", "warmup", "block", "sizes", "ops", "step_backends")},
    }
    results = summarize(raw, metadata)
    out_dir = args.out.resolve()
    json_path, md_path = report.write(results, out_dir)
    png_path = plot.write(results, out_dir)
    print(report.render_markdown(results))
    print(f"[bench] wrote {json_path}, {md_path}, {png_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
