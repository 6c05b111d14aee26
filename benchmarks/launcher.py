"""Starts the ranks of a run as local processes and bounds how long they may take.

Each rank is a `python -m benchmarks.worker` process in a session of its own, so that the rank and
anything it starts (e.g. inductor's compile workers) can be killed together. The first rank that
fails, or the deadline, ends the run: the remaining ranks would otherwise wait in a collective for
their peer until the process-group timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


class RankFailure(RuntimeError):
    """A rank exited non-zero or the run passed its deadline; every rank has been killed."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the session this launcher created for the rank
            except ProcessLookupError:
                pass
    for p in procs:
        p.wait()


def rank_environment(rank: int, world: int, port: int) -> dict[str, str]:
    """The environment of local rank `rank`: the env:// world on 127.0.0.1:`port`, this
    repository importable, one compile thread (the ranks already share the machine's cores)."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "PYTHONPATH": pythonpath,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }


def run_ranks(
    module: str,
    args: list[str],
    nproc: int,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
    log_path: Callable[[int], Path] | None = None,
) -> None:
    """Runs `python -m module *args` as ranks 0..nproc-1 (with `extra_env`; each rank's output to
    `log_path(rank)` when given); raises RankFailure unless all exit 0."""
    port = free_port()  # a fresh one per run: a closing store may still hold the last one
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(nproc):
            env = {**rank_environment(rank, nproc, port), **(extra_env or {})}
            cmd = [sys.executable, "-m", module, *args]
            if log_path is None:
                output = None
            else:
                output = open(log_path(rank), "wb")  # noqa: SIM115 - the child holds it open
            try:
                procs.append(
                    subprocess.Popen(
                        cmd,
                        env=env,
                        cwd=REPO_ROOT,
                        stdout=output,
                        stderr=None if output is None else subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            finally:
                if output is not None:
                    output.close()
        deadline = time.monotonic() + timeout_s
        while True:
            codes = [p.poll() for p in procs]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                rank, code = failed[0]
                raise RankFailure(f"rank {rank} exited with code {code}; killed the other ranks")
            if all(c == 0 for c in codes):
                return
            if time.monotonic() > deadline:
                hung = [r for r, c in enumerate(codes) if c is None]
                raise RankFailure(
                    f"timeout after {timeout_s:.0f} s: ranks {hung} still running; killed them"
                )
            time.sleep(0.1)
    finally:
        _kill(procs)


def run_ranks_with_config(module: str, cfg: dict[str, Any], nproc: int, timeout_s: float) -> Any:
    """Runs `python -m module --rank-config FILE` as ranks 0..nproc-1, FILE holding `cfg` plus
    "result": the path where rank 0 writes its JSON result; returns that result."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({**cfg, "result": str(Path(tmp) / "result.json")}))
        run_ranks(module, ["--rank-config", str(config)], nproc, timeout_s)
        return json.loads((Path(tmp) / "result.json").read_text())


def arguments_or_rank(
    parser: argparse.ArgumentParser, rank_main: Callable[[dict[str, Any]], None]
) -> argparse.Namespace | None:
    """A benchmark's command line: its arguments (None once it has run as a rank). A rank is
    started by run_ranks_with_config with a hidden `--rank-config FILE`, which this reads and
    hands to `rank_main`."""
    parser.add_argument("--rank-config", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.rank_config:
        return args
    rank_main(json.loads(Path(args.rank_config).read_text()))
    return None


def start_rank() -> tuple[int, int, Any]:
    """A benchmark rank's start: the env:// Gloo world this launcher describes, then c10d_func
    (imported after the default group exists, which becomes c10d_func's world; its backend is
    registered), torch's deprecation warnings of the classic calls silenced, one thread per rank.
    Returns rank, world size and a Gloo group for barriers and result gathering only."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    import c10d_func  # noqa: F401 - after the default group

    warnings.filterwarnings("ignore", message=r"`torch\.distributed\.\w+` is deprecated")
    torch.set_num_threads(1)
    return dist.get_rank(), dist.get_world_size(), dist.new_group(backend="gloo")
