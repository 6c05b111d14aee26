"""A stranger on a test host (test_hosts.py): until STOP_FILE exists, connects again and again
to every TCP port listening on this host except the store's, and sends what a process that
found the port could: a rail-link hello with c10d_func's magic but a guessed secret, random
bytes, a few bytes then nothing, or nothing at all (the connection held open a while). None of
it starts with a small integer, which Gloo's listener would take for a pair's sequence number
(docs/security.md: what Gloo leaves exposed). Prints "STRANGER <json>" when it stops: how many
connections it made and to which ports.

    stranger.py STOP_FILE STORE_PORT
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time


def listening_ports() -> set[tuple[int, str, int]]:
    """(family, address, port) of every listening TCP socket of this network namespace."""
    found = set()
    for path, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(path) as table:
                lines = table.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            hex_address, hex_port = fields[1].split(":")
            # The kernel prints each 32-bit word of the address in host (little-endian) order.
            raw = b"".join(
                bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8)
            )
            address = socket.inet_ntop(family, raw)
            if address in ("0.0.0.0", "::"):
                address = "127.0.0.1" if family == socket.AF_INET else "::1"
            found.add((family, address, int(hex_port, 16)))
    return found


def payload(kind: int) -> bytes:
    if kind == 0:  # a well-formed hello of the right protocol with a guessed secret
        return b"c10dRL02" + struct.pack("<qQ", 1, 0) + os.urandom(32)
    if kind == 1:  # random bytes (their first 8 are a random sequence number to Gloo)
        return os.urandom(56)
    if kind == 2:  # a truncated hello
        return b"c10dRL02" + os.urandom(5)
    return b""  # nothing: held open


def main() -> None:
    stop_file, store_port = sys.argv[1], int(sys.argv[2])
    made, ports, held = 0, set(), []
    kind = 0
    while not os.path.exists(stop_file):
        for family, address, port in sorted(listening_ports()):
            if port == store_port:
                continue
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.settimeout(0.2)
                sock.connect((address, port))
            except OSError:
                continue
            made += 1
            ports.add(port)
            try:
                sock.sendall(payload(kind))
            except OSError:
                pass
            if kind == 3:
                held.append((time.monotonic(), sock))
            else:
                sock.close()
            kind = (kind + 1) % 4
        # Held connections last a second: long enough to sit in an accept loop.
        now = time.monotonic()
        for opened, sock in [h for h in held if now - h[0] > 1.0]:
            sock.close()
        held = [h for h in held if now - h[0] <= 1.0]
        time.sleep(0.002)
    print("STRANGER " + json.dumps({"connections": made, "ports": sorted(ports)}), flush=True)


if __name__ == "__main__":
    main()
