"""The skip policy (skip_policy.py) in a pytest run of its own: with C10D_FUNC_REQUIRE_ALL_TESTS=1
a skip that is not GPU-only fails the run and is named; GPU-only skips are counted, not failed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

TESTS = """
import pytest

def test_runs():
    pass

@pytest.mark.skipif(True, reason="needs a CUDA GPU")
def test_gpu_only():
    pass

def test_skipped_for_another_reason():
    pytest.skip("network namespaces cannot be made here")
"""


def _run(tmp_path, required: bool, only: str | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": HERE}
    env.pop("C10D_FUNC_REQUIRE_ALL_TESTS", None)
    if required:
        env["C10D_FUNC_REQUIRE_ALL_TESTS"] = "1"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "skip_policy", "-p", "no:cacheprovider"]
    args += [str(tmp_path / "test_sample.py")] + (["-k", only] if only else [])
    return subprocess.run(
        args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("required", [True, False])
def test_a_skip_that_is_not_gpu_only_fails_where_every_test_must_run(tmp_path, required):
    run = _run(tmp_path, required)
    assert "skips: 1 GPU-only (no CUDA GPU here), 1 other" in run.stdout, run.stdout
    assert "skipped, must run: test_sample.py::test_skipped_for_another_reason" in run.stdout
    assert run.returncode == (1 if required else 0), run.stdout


def test_gpu_only_skips_pass_where_every_test_must_run(tmp_path):
    run = _run(tmp_path, required=True, only="not another_reason")
    assert "skips: 1 GPU-only (no CUDA GPU here), 0 other" in run.stdout, run.stdout
    assert run.returncode == 0, run.stdout
