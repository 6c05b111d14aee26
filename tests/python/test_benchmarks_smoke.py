"""The benchmark runner keeps working: a quick 2-rank run over tiny sizes produces every row, a
markdown table and a plot. Asserts nothing about speed."""

from __future__ import annotations

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO_ROOT)

from benchmarks.smoke import run_smoke


def test_benchmark_runner_quick_run(tmp_path):
    results = run_smoke(tmp_path)  # raises with the runner's output on any missing row
    assert (tmp_path / "results.md").exists() and (tmp_path / "collectives.png").exists()
    assert results["metadata"]["world_size"] == 2


def test_messages_benchmark_quick_run(tmp_path):
    import json
    import subprocess

    out = tmp_path / "messages"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.messages", "--rounds", "1", "--out", str(out)],
        cwd=REPO_ROOT,
        check=True,
        timeout=300,
        capture_output=True,
    )
    measured = json.loads((out / "results.json").read_text())
    # A measure per row, for each group it runs on, every time a positive duration.
    for kind, per_group in measured["seconds"].items():
        runs = [s for name, seconds in per_group.items() for s in seconds]
        assert runs and all(s > 0 for s in runs), (kind, per_group)
    assert "from any source" in (out / "results.md").read_text()
