"""One test host's launcher (tests/python/hosts.py): started inside the host's namespaces, it
runs the host's ranks of a program and reports, on one line after "HOST DONE ", each rank's exit
code and output and what the ranks left in the host's /dev/shm.

    host_launcher.py FIRST_RANK COUNT PROGRAM [ARGS...]

The world comes from the environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE); each rank gets RANK
and LOCAL_RANK as torchrun would give them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import preloaded  # tests/python (PYTHONPATH)

TIMEOUT = float(os.environ.get("C10D_FUNC_TEST_HOST_TIMEOUT", "150")) * float(
    os.environ.get("C10D_FUNC_TEST_SLOWDOWN", "1")
)


def main() -> None:
    first, count, program, args = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    # Each rank joins this launcher's namespaces (the host's), started by the tests' preloaded
    # server (torch already imported) or, where fresh interpreters are asked for, by nsenter.
    procs = {
        first + local: preloaded.start(
            [sys.executable, program, *args],
            {**os.environ, "RANK": str(first + local), "LOCAL_RANK": str(local)},
            namespaces_of=os.getpid(),
            merge_stderr=True,
        )
        for local in range(count)
    }
    report: dict[str, object] = {"ranks": {}}
    for rank, proc in procs.items():
        try:
            out, _ = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            out += f"\n(killed by the host launcher after {TIMEOUT} s)"
        report["ranks"][str(rank)] = (proc.returncode, out[-20000:])
    report["shm_left"] = sorted(os.listdir("/dev/shm"))
    print("HOST DONE " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
