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
