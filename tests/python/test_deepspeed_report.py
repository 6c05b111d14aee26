"""The DeepSpeed comparison's report (benchmarks/deepspeed_allreduce.py) from known timings: each
cell is the median over iterations of the slowest rank, each ratio divides by the right
DeepSpeed column (in place for c10d_func's in-place forms, input kept for its functional form).
DeepSpeed is not installed in CI, so the ranks never run here; this checks the arithmetic and
the table the README quotes. Asserts nothing about speed."""

from __future__ import annotations

import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO_ROOT)

from benchmarks import deepspeed_allreduce as ds

# µs per iteration of each rank; the slowest rank's iteration counts.
RANK_TIMES = {
    ds.DS: ([3.0, 4.0, 5.0], [3.5, 3.0, 6.0]),  # per-iteration max 3.5, 4.0, 6.0: median 4.0
    ds.DS_OP: ([2.0, 2.0, 2.0], [1.0, 1.0, 1.0]),  # 2.0
    ds.DS_KEPT: ([5.0, 5.0, 5.0], [4.0, 6.0, 4.0]),  # 5.0, 6.0, 5.0: median 5.0
    ds.PRIVATE: ([2.0, 3.0, 4.0], [1.0, 1.0, 1.0]),  # 3.0
    ds.SYMMETRIC: ([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]),  # 2.0
    ds.FUNCTIONAL: ([6.0, 6.0, 6.0], [6.0, 6.0, 6.0]),  # 6.0
}
EXPECTED_US = {
    ds.DS: 4.0,
    ds.DS_OP: 2.0,
    ds.DS_KEPT: 5.0,
    ds.PRIVATE: 3.0,
    ds.SYMMETRIC: 2.0,
    ds.FUNCTIONAL: 6.0,
}


def raw_results(shm_op: bool = True) -> dict:
    ranks = [
        [
            {
                "size": 8,
                "iters": 3,
                "times_s": {
                    impl: [t * 1e-6 for t in times[r]] for impl, times in RANK_TIMES.items()
                },
            }
        ]
        for r in range(2)
    ]
    metadata = {
        "nproc": 2,
        "cores": 2,
        "threads_per_rank": 1,
        "OMP_NUM_THREADS": "1",
        "torch_version": "test",
        "deepspeed_version": "test",
        "deepspeed_accelerator": "cpu",
        "deepspeed_backend": "gloo",
        "deepspeed_shm_op": shm_op,
        "deepspeed_vector_kernel_level": 2,
        "loadavg_at_start": [0.0, 0.0, 0.0],
        "loadavg_at_end": [0.0, 0.0, 0.0],
    }
    return {"metadata": metadata, "ranks": ranks}


def test_medians_are_of_the_slowest_rank():
    results = ds.summarize(raw_results())
    medians = {row["impl"]: row["median_us"] for row in results["rows"]}
    assert medians == pytest.approx(EXPECTED_US)


def test_ratios_divide_by_the_matching_deepspeed_form():
    (ratio,) = ds.summarize(raw_results())["ratios"]
    assert ratio[ds.PRIVATE] == pytest.approx(3.0 / 4.0)
    assert ratio[ds.SYMMETRIC] == pytest.approx(2.0 / 4.0)
    assert ratio[ds.FUNCTIONAL] == pytest.approx(6.0 / 4.0)
    assert ratio["functional_over_deepspeed_input_kept"] == pytest.approx(6.0 / 5.0)
    assert ratio["deepspeed_op_over_deepspeed"] == pytest.approx(2.0 / 4.0)
    assert ratio["deepspeed_path"] == "shm, one barrier"


def test_table_has_every_column_and_the_path():
    text = ds.render(ds.summarize(raw_results()))
    header = next(line for line in text.splitlines() if line.startswith("| size"))
    for impl in ds.IMPLS:
        assert f"{impl} µs" in header
    assert "ratio functional/ds input kept" in header
    row = next(line for line in text.splitlines() if line.startswith("| 8 B"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1 : 1 + len(ds.IMPLS)] == [f"{EXPECTED_US[impl]:.1f}" for impl in ds.IMPLS]
    assert cells[-2] == "1.20"  # functional / DeepSpeed with its input kept
    assert cells[-1] == "shm, one barrier"
    # Without DeepSpeed's shm op, its all_reduce is torch.distributed's: the table says so.
    fallback = ds.render(ds.summarize(raw_results(shm_op=False)))
    assert "torch.distributed (gloo)" in fallback
