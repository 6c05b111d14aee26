"""Test hosts on one machine: network namespaces joined by a veth pair, each rank started in a
host of its own (its network, hostname, IPC and mount namespaces, with a private /dev/shm), so
host identity, the store across an interface and Gloo's choice of interface meet a real network.

    with TestHosts(2) as hosts:
        procs = hosts.launch(program, ranks_per_host=[2, 2])
        ranks, leftovers = host_results(procs)

Needs root and iproute2 (`ip netns`, veth); `available()` says why not otherwise, for a skip.
Every namespace and link is removed on exit, after a failure too (and at interpreter exit, for a
test killed mid-way). A link may be limited (`tc qdisc ... tbf`) or set down (`link_down`).
Each host's launcher reports what its ranks left in the host's /dev/shm.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence
from typing import Self

import preloaded
from worker_pool import SLOWDOWN, TESTS_DIR, free_port, scaled_env

SUBNET = "10.231.{index}.{host}"  # a private test subnet that lives only inside the namespaces


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=60)


def available() -> str | None:
    """None when test hosts can be made here, else why not."""
    if os.geteuid() != 0:
        return "test hosts need root (network namespaces)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"test hosts need {tool} (iproute2, util-linux)"
    probe = f"c10dp{uuid.uuid4().hex[:8]}"
    made = _run("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    _run("ip", "netns", "del", probe, check=False)
    return None


class TestHosts:
    """`count` hosts on one test subnet. Host h has address `address(h)`; a bridge-free star:
    host 0 is joined to every other host by a veth pair of its own, and the others reach each
    other through host 0 (enough for 2 or 3 hosts; routes are added for it)."""

    __test__ = False  # not a pytest class

    def __init__(self, count: int = 2) -> None:
        self.count = count
        self.tag = uuid.uuid4().hex[:6]
        self.names = [f"c10dh{self.tag}{h}" for h in range(count)]
        self.links: list[tuple[str, str]] = []  # (device in host 0, device in host h)
        self.index = int(self.tag[:2], 16) % 200 + 20  # the subnet's third octet
        self._made: list[str] = []

    def address(self, host: int) -> str:
        return SUBNET.format(index=self.index, host=host + 1)

    def __enter__(self) -> Self:
        atexit.register(self.remove)
        try:
            for name in self.names:
                _run("ip", "netns", "add", name)
                self._made.append(name)
                self.exec(name, "ip", "link", "set", "lo", "up")
            for h in range(1, self.count):
                near, far = f"c10v{self.tag}{h}a", f"c10v{self.tag}{h}b"
                _run("ip", "link", "add", near, "type", "veth", "peer", "name", far)
                _run("ip", "link", "set", near, "netns", self.names[0])
                _run("ip", "link", "set", far, "netns", self.names[h])
                self.links.append((near, far))
                # Point-to-point /32 addresses with a route each way: one address per host.
                self.exec(
                    self.names[0],
                    "ip",
                    "addr",
                    "add",
                    self.address(0),
                    "peer",
                    self.address(h),
                    "dev",
                    near,
                )
                self.exec(
                    self.names[h],
                    "ip",
                    "addr",
                    "add",
                    self.address(h),
                    "peer",
                    self.address(0),
                    "dev",
                    far,
                )
                self.exec(self.names[0], "ip", "link", "set", near, "up")
                self.exec(self.names[h], "ip", "link", "set", far, "up")
            if self.count > 2:
                self.exec(self.names[0], "sysctl", "-qw", "net.ipv4.ip_forward=1")
                for h in range(1, self.count):
                    for other in range(1, self.count):
                        if other != h:
                            self.exec(
                                self.names[h],
                                "ip",
                                "route",
                                "add",
                                self.address(other),
                                "via",
                                self.address(0),
                            )
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def exec(self, namespace: str, *command: str) -> subprocess.CompletedProcess:
        return _run("ip", "netns", "exec", namespace, *command)

    def limit(self, host: int, gbit: float) -> None:
        """Limits the link between host 0 and `host` (> 0) to `gbit` Gb/s, both ways (tbf)."""
        near, far = self.links[host - 1]
        rate = f"{gbit}gbit"
        for namespace, device in ((self.names[0], near), (self.names[host], far)):
            self.exec(
                namespace,
                "tc",
                "qdisc",
                "replace",
                "dev",
                device,
                "root",
                "tbf",
                "rate",
                rate,
                "burst",
                "4mb",
                "latency",
                "50ms",
            )

    def link_down(self, host: int) -> None:
        """Cuts the link between host 0 and `host` (> 0)."""
        near, far = self.links[host - 1]
        self.exec(self.names[0], "ip", "link", "set", near, "down")
        self.exec(self.names[host], "ip", "link", "set", far, "down")

    def launch(
        self,
        program: str,
        ranks_per_host: Sequence[int],
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> list[subprocess.Popen]:
        """Starts `program` (in tests/python/programs) once per rank, host by host: ranks 0 ..
        ranks_per_host[0]-1 on host 0, and so on. Each host is one launcher process
        (programs/host_launcher.py) in the host's network namespace and in new UTS, IPC and mount
        namespaces (hostname `testhost<h>`, a /dev/shm of its own); it starts the host's ranks,
        which share them as the processes of one machine do, and reports each rank's exit code
        and output, then what its ranks left in the host's /dev/shm. Returns the launchers, one
        per host; `host_results` reads them."""
        world = sum(ranks_per_host)
        if not preloaded.fresh_interpreters():
            preloaded.server_address()  # the hosts' launchers start their ranks from it
        base = {
            **os.environ,
            "MASTER_ADDR": self.address(0),
            "MASTER_PORT": str(free_port()),
            "WORLD_SIZE": str(world),
            "PYTHONPATH": TESTS_DIR,
            **scaled_env(env or {}),
        }
        launcher = os.path.join(TESTS_DIR, "programs", "host_launcher.py")
        target = os.path.join(TESTS_DIR, "programs", program)
        procs = []
        first = 0
        for host, count in enumerate(ranks_per_host):
            hostname = f"testhost{host}"
            inner = (
                f"hostname {hostname} && mount -t tmpfs -o size=2g tmpfs /dev/shm && "
                f"exec {sys.executable} {launcher} {first} {count} {target} " + " ".join(args)
            )
            command = [
                "ip",
                "netns",
                "exec",
                self.names[host],
                "unshare",
                "--uts",
                "--ipc",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                inner,
            ]
            procs.append(
                subprocess.Popen(
                    command, env=base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
            first += count
        return procs

    def remove(self) -> None:
        """Removes every namespace (their links and processes go with them); idempotent."""
        for name in self._made:
            pids = _run("ip", "netns", "pids", name, check=False).stdout.split()
            for pid in pids:
                _run("kill", "-9", pid, check=False)
            _run("ip", "netns", "del", name, check=False)
        self._made.clear()
        for near, _ in self.links:
            _run("ip", "link", "del", near, check=False)  # gone with the namespace; harmless
        self.links.clear()


def host_results(
    launchers: list[subprocess.Popen], timeout: float = 180
) -> tuple[dict[int, tuple[int, str]], dict[int, list[str]]]:
    """Each rank's (exit code, output) and each host's files left in /dev/shm, from the
    launchers' reports; every launcher is killed after `timeout`."""
    ranks: dict[int, tuple[int, str]] = {}
    leftovers: dict[int, list[str]] = {}
    try:
        for host, launcher in enumerate(launchers):
            out, err = launcher.communicate(timeout=timeout * SLOWDOWN)
            if launcher.returncode != 0 and "HOST DONE" not in out:
                raise AssertionError(f"host {host}'s launcher failed: {out[-3000:]}{err[-3000:]}")
            report = json.loads(out[out.index("HOST DONE ") + len("HOST DONE ") :].splitlines()[0])
            for rank, (code, output) in report["ranks"].items():
                ranks[int(rank)] = (code, output)
            leftovers[host] = report["shm_left"]
    finally:
        for launcher in launchers:
            launcher.kill()
    return ranks, leftovers
