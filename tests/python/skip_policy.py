"""A skipped test is a check that did not run. Where C10D_FUNC_REQUIRE_ALL_TESTS=1 (CI: .ci/run),
the only skips allowed are of tests that need a GPU (skip reason "needs a CUDA GPU"); any other
skip fails the run, named in the summary, which also says how many GPU-only tests were skipped.
Elsewhere (a developer's machine without network namespaces, say) skips stay skips, listed."""

from __future__ import annotations

import os

import pytest

GPU_ONLY = "needs a CUDA GPU"
REQUIRED = "C10D_FUNC_REQUIRE_ALL_TESTS"

_skipped: dict[str, list[tuple[str, str]]] = {"gpu": [], "other": []}


def _reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    return str(report.longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        reason = _reason(report)
        _skipped["gpu" if GPU_ONLY in reason else "other"].append((report.nodeid, reason))


def _required() -> bool:
    return os.environ.get(REQUIRED) == "1"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    gpu, other = _skipped["gpu"], _skipped["other"]
    terminalreporter.write_line(
        f"skips: {len(gpu)} GPU-only (no CUDA GPU here), {len(other)} other"
        + (f" ({REQUIRED}=1: not allowed)" if other and _required() else "")
    )
    for nodeid, reason in other:
        terminalreporter.write_line(f"  skipped, must run: {nodeid}: {reason}")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped["other"] and _required() and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
