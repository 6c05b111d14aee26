"""Programs of the tests started from a process that has already imported torch.

Every rank a test launches is a Python program that imports torch first: about 3 s of CPU per
process on the 2-core machine CI runs on, for a few hundred processes a run. A server process
(started once, on first use, by whichever process launches programs first; its children find it
through C10D_FUNC_TEST_PRELOADED) imports torch once and forks a child per program. The child
takes the caller's standard output and error, environment, working directory and arguments,
runs the program as `python program.py args...` would (as `__main__`, its folder first on
sys.path, then PYTHONPATH) and ends as that interpreter would: Python's own shutdown, atexit
handlers and the C++ libraries' static destructors included, so what a program does at exit is
tested as it would run. A child may join the namespaces of another process first (a test host's
launcher: tests/python/hosts.py).

What differs from a fresh interpreter: torch was imported with the server's environment (torch
reads none of the tests' variables at import; c10d_func, which reads its own, is imported by the
program), and the parent process is the server. C10D_FUNC_TEST_FRESH_INTERPRETERS=1 starts every
program in an interpreter of its own instead (scripts/sanitize.sh does, and so can anyone
chasing a difference).

    proc = start([sys.executable, "program.py", "arg"], env)   # like subprocess.Popen(..., text=True)
    out, err = proc.communicate(timeout=60)
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

ADDRESS_VARIABLE = "C10D_FUNC_TEST_PRELOADED"
FRESH_VARIABLE = "C10D_FUNC_TEST_FRESH_INTERPRETERS"
NAMESPACES = ("net", "uts", "ipc", "mnt")  # what a test host has of its own
MAX_REQUEST_BYTES = 1 << 20

_server: subprocess.Popen | None = None  # the server this process started; its stdin ends it


# ------------------------------------------------------------------------------------- client


def fresh_interpreters() -> bool:
    """Every process of the tests is to start in an interpreter of its own (FRESH_VARIABLE)."""
    return os.environ.get(FRESH_VARIABLE, "0") == "1"


def preloadable(command: list[str]) -> bool:
    """`command` runs a Python program with this interpreter, which the server can start."""
    return (
        not fresh_interpreters()
        and len(command) >= 2
        and command[0] == sys.executable
        and command[1].endswith(".py")
    )


def start(
    command: list[str],
    env: dict[str, str],
    namespaces_of: int | None = None,
    merge_stderr: bool = False,
) -> PreloadedProcess | subprocess.Popen:
    """Runs `command` (`[sys.executable, program.py, *args]`) with `env`, its output read as
    text through pipes (one, with `merge_stderr`: communicate gives (output, None)), in the
    namespaces of process `namespaces_of` if given. Programs the server cannot start (other
    commands, or fresh interpreters asked for) run as `subprocess.Popen`, which has the same
    interface."""
    if not preloadable(command):
        if namespaces_of is not None:
            command = ["nsenter", "-t", str(namespaces_of), "-n", "-u", "-i", "-m", *command]
        return subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            text=True,
        )
    return PreloadedProcess(command, env, namespaces_of, merge_stderr)


class PreloadedProcess:
    """A program the server forked: the part of `subprocess.Popen`'s interface the tests use
    (pid, returncode, poll, wait, communicate, kill), text output."""

    def __init__(
        self,
        command: list[str],
        env: dict[str, str],
        namespaces_of: int | None,
        merge_stderr: bool,
    ) -> None:
        out_read, out_write = os.pipe()
        err_read, err_write = (None, os.dup(out_write)) if merge_stderr else os.pipe()
        request = {
            "argv": command[1:],
            "env": env,
            "cwd": os.getcwd(),
            "namespaces_of": namespaces_of,
        }
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._conn.connect(server_address())
            socket.send_fds(self._conn, [json.dumps(request).encode()], [out_write, err_write])
        finally:
            os.close(out_write)
            os.close(err_write)
        reply = self._conn.recv(256).decode()
        if not reply.startswith("pid "):
            raise RuntimeError(f"the preloaded server did not start {command}: {reply!r}")
        self.pid = int(reply.split()[1])
        self.args = command
        self.returncode: int | None = None
        self._out, self._err = out_read, err_read
        self._pipes = {fd: bytearray() for fd in (out_read, err_read) if fd is not None}

    def poll(self) -> int | None:
        if self.returncode is None:
            self._conn.setblocking(False)
            try:
                reply = self._conn.recv(256)
            except BlockingIOError:
                return None
            self._take_status(reply)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                reply = self._conn.recv(256)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            self._take_status(reply)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Reads both outputs to their end and waits for the exit; raises TimeoutExpired after
        `timeout` (the output read so far is kept for the next call, as Popen does)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in self._pipes:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        self._pipes[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0.01))
        for fd in (self._out, self._err):
            if fd in self._pipes:
                os.close(fd)
        out, err = (
            None if fd is None else bytes(self._pipes.pop(fd, b"")).decode(errors="replace")
            for fd in (self._out, self._err)
        )
        self._pipes.clear()
        return out, err

    def kill(self) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _take_status(self, reply: bytes) -> None:
        text = reply.decode()
        if not text.startswith("exit "):
            raise RuntimeError(f"the preloaded server lost program {self.pid}: {text!r}")
        self.returncode = int(text.split()[1])
        self._conn.close()

    def __del__(self) -> None:
        for fd in self._pipes:
            os.close(fd)


def server_address() -> str:
    """The server's socket: the one this process's environment names, else one started now
    (and named in the environment, for the processes this one starts: a launcher that starts
    programs in turn uses the same server)."""
    global _server
    address = os.environ.get(ADDRESS_VARIABLE)
    if address and os.path.exists(address):
        return address
    address = os.path.join(tempfile.mkdtemp(prefix="c10d_func_preloaded_"), "server")
    _server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), address],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != ADDRESS_VARIABLE},
    )
    assert _server.stdout is not None
    ready = _server.stdout.readline()
    if ready != b"ready\n":
        raise RuntimeError(f"the preloaded server did not start: {ready!r}")
    os.environ[ADDRESS_VARIABLE] = address
    atexit.register(_stop_server)
    return address


def _stop_server() -> None:
    """Ends the server this process started (its standard input closes) and waits for it."""
    if _server is None:
        return
    assert _server.stdin is not None and _server.stdout is not None
    _server.stdin.close()
    try:
        _server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        _server.kill()
        _server.wait()
    _server.stdout.close()


# ------------------------------------------------------------------------------------- server


def _serve(address: str) -> tuple[dict[str, Any], list[int]] | None:
    """Forks a child per request until this process's standard input ends. Returns, in a
    child, its request and file descriptors; in the server, None once told to end."""
    import torch  # noqa: F401  (what every program imports first: why this process exists)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(256)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a wake-up on wake_read, reaped in the loop
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in selector.select():
            if key.fd == sys.stdin.fileno():
                if not os.read(key.fd, 4096):
                    return None  # the process that started the server is gone
            elif key.fd == wake_read:
                os.read(wake_read, 4096)
            else:
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST_BYTES, 2)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for other in (listener, conn, *children.values()):
                        other.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    return json.loads(message), fds
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"pid {pid}".encode())
                children[pid] = conn
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid)
            try:
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}".encode())
            except OSError:
                pass  # the caller is gone
            conn.close()


def _join_namespaces(pid: int) -> None:
    """Enters the network, UTS, IPC and mount namespaces of process `pid` (a test host's
    launcher), as `nsenter` would: every namespace is opened before the first is entered,
    while /proc/<pid>/ns is still this mount namespace's."""
    libc = ctypes.CDLL(None, use_errno=True)
    fds = [os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY) for name in NAMESPACES]
    for name, fd in zip(NAMESPACES, fds):
        if libc.setns(fd, 0) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} of process {pid}")
        os.close(fd)


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """Turns this forked child into `python argv[0] argv[1:]` with the caller's outputs,
    environment and working directory, then runs the program in a module `__main__` that stays
    in sys.modules, as the interpreter runs a script (its globals live until shutdown)."""
    import builtins
    import importlib.machinery
    import types

    out, err = fds
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    if request["namespaces_of"] is not None:
        _join_namespaces(request["namespaces_of"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    program = os.path.abspath(request["argv"][0])
    # sys.path as the interpreter makes it: the program's folder, then PYTHONPATH, then the
    # standard library and site-packages (what the server had after its own folder and
    # PYTHONPATH).
    inherited = [p for p in sys.path[1:] if p not in _SERVER_PYTHONPATH]
    sys.path[:] = [os.path.dirname(program), *_pythonpath(), *inherited]
    sys.argv[:] = request["argv"]
    main = types.ModuleType("__main__")
    main.__file__ = program
    main.__builtins__ = builtins
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", program)
    sys.modules["__main__"] = main
    with open(program, "rb") as source:
        code = compile(source.read(), program, "exec")
    exec(code, main.__dict__)  # noqa: S102  (what the interpreter does with a script)


def _pythonpath() -> list[str]:
    """The folders this process's PYTHONPATH names."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


_SERVER_PYTHONPATH = _pythonpath()

if __name__ == "__main__":
    served = _serve(sys.argv[1])
    if served is not None:
        _become(*served)
