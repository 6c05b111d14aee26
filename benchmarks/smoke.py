"""Smoke-test body for the test suite: a `--quick --nproc 2` run checked for shape, not speed.

`run_smoke(out_dir)` asserts that every op/size/implementation row exists, that the measured numbers
are finite and positive and that results.md and collectives.png were written; it asserts nothing
about how fast anything is.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from .correctness import ERROR, OK, UNAVAILABLE
from .impls import FRONTEND, IMPL_NAMES, OPS
from .launcher import REPO_ROOT

QUICK_SIZES = [8, 32, 128, 512]
TIMEOUT_S = 120


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def run_smoke(out_dir: str | Path, strict: bool = True) -> dict[str, Any]:
    """Runs the quick benchmark into `out_dir` and returns the parsed results.json.

    strict: every implementation must pass its correctness check and be timed (the frontend only
    when c10d_func has one). With strict=False an op that raised is accepted as long as its row
    exists and says why; this keeps the smoke test about the runner while an op is known broken.
    """
    out = Path(out_dir).resolve()
    # The runner's own timeout is shorter: a hung rank is then killed and reported by the runner
    # (whose ranks run in sessions of their own, out of reach of subprocess.run's kill).
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.collectives",
        "--quick",
        "--nproc",
        "2",
        "--timeout",
        str(TIMEOUT_S - 20),
        "--out",
        str(out),
    ]
    proc = subprocess.run(
        cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    assert proc.returncode == 0, (
        f"benchmark run failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    assert (out / "results.md").stat().st_size > 0
    assert (out / "collectives.png").stat().st_size > 0

    meta = results["metadata"]
    assert meta["world_size"] == 2 and meta["sizes"] == QUICK_SIZES, meta
    frontend_present = meta["frontend_note"] is None
    rows = {(r["op"], r["size"], r["impl"]): r for r in results["collectives"]}
    problems = []
    for op in OPS:
        for size in QUICK_SIZES:
            for impl in IMPL_NAMES:
                row = rows.get((op, size, impl))
                if row is None:
                    problems.append(f"missing row {op} {size} B {impl}")
                    continue
                if impl == FRONTEND and not frontend_present:
                    if row["status"] != UNAVAILABLE:
                        problems.append(f"{op} {size} B {impl}: no frontend, yet {row['status']}")
                    continue
                if row["status"] != OK and (strict or not row["detail"]):
                    problems.append(f"{op} {size} B {impl}: {row['status']}: {row['detail']}")
                    continue
                if row["status"] == ERROR:
                    continue  # accepted by strict=False above: raised, so nothing was timed
                for key in ("median_us", "algbw_gbps", "busbw_gbps"):
                    if not _positive(row[key]):
                        problems.append(f"{op} {size} B {impl}: {key} = {row[key]!r}")
                times = row.get("times_us") or []
                if not times or not all(_positive(t) for t in times):
                    problems.append(f"{op} {size} B {impl}: per-iteration times not all positive")
    assert not problems, "benchmark smoke test:\n" + "\n".join(problems)
    return results
