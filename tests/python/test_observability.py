"""torch's own debugging tools see every c10d_func collective (docs/observability.md).

- the flight recorder: the same calls on a Gloo group and a c10d_func group, and through the
  functional ops (eager and compiled), all show in _dump_fr_trace_json() with torch's fields;
  a rank that skips a collective makes every rank dump, and torch's analyzer names it;
- torch.profiler: each collective is an event "<transport>:<op>" where it runs, with torch's
  "record_param_comms" comms metadata where it is issued;
- c10d_func.groups() counts collectives, bytes, time busy and the last error;
- TORCH_DISTRIBUTED_DEBUG=DETAIL turns on c10d_func's cross-rank check (test_errors.py).
Each on 2 and 4 ranks, with the shared-memory and the Gloo CPU transport.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid

import c10d_func
import pytest
import torch
import torch.distributed as dist
from conftest import get_pool
from test_collectives import assert_no_failures
from worker_pool import TESTS_DIR, finish_ranks, free_port, launch_ranks

FR_ENV = {"TORCH_FR_BUFFER_SIZE": "2000"}
# The name of the transport as c10d_func.groups() and the profiler events give it.
TRANSPORT_NAMES = {"shm": "shm", "gloo": "gloo"}


def setup_gloo_world(rank: int, world_size: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def observed_pool(transport: str, world_size: int):
    env = {
        **FR_ENV,
        "C10D_FUNC_CPU_TRANSPORT": transport,
        "C10D_FUNC_TEST_SETUP": "test_observability:setup_gloo_world",
    }
    return get_pool(world_size, env)


CASES = [(t, n) for t in ("shm", "gloo") for n in (2, 4)]
IDS = [f"{t}-ws{n}" for t, n in CASES]


def fr_entries(group_name: str) -> tuple[list[dict], dict]:
    dump = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(True, False))
    entries = [e for e in dump["entries"] if e["process_group"][0] == group_name]
    return entries, dump["pg_config"].get(group_name, {})


def classic_calls(rank: int, world_size: int, group: dist.ProcessGroup) -> None:
    """The same classic calls on any backend: all_reduce, all_gather, broadcast, a message each
    way (the second received from any source)."""
    t = torch.full((4, 2), float(rank + 1))
    dist.all_reduce(t, group=group)
    assert t.eq(world_size * (world_size + 1) / 2).all()
    out = torch.empty(world_size * 3)
    dist.all_gather_into_tensor(out, torch.full((3,), float(rank)), group=group)
    assert out.tolist() == [float(r) for r in range(world_size) for _ in range(3)]
    b = torch.full((5,), float(rank))
    dist.broadcast(b, src=0, group=group)
    assert b.eq(0).all()
    if rank == 0:
        dist.send(torch.arange(6.0), dst=1, group=group)
    elif rank == 1:
        got = torch.empty(6)
        dist.recv(got, src=0, group=group)
        assert got.tolist() == list(range(6))
    # And one back, received from any source.
    if rank == 1:
        dist.send(torch.arange(3.0), dst=0, group=group, tag=4)
    elif rank == 0:
        got = torch.empty(3)
        assert dist.recv(got, group=group, tag=4) == 1
        assert got.tolist() == list(range(3))


def body_flight_recorder(rank: int, world_size: int, transport: str, tag: str) -> list[str]:
    failures: list[str] = []
    gloo = dist.new_group(backend="gloo")
    func = dist.new_group(backend="c10d_func")
    for group in (gloo, func):
        classic_calls(rank, world_size, group)

    # torch's Gloo records its collectives; c10d_func's group shows the same calls.
    gloo_names = [e["profiling_name"] for e in fr_entries(gloo.group_name)[0]]
    entries, config = fr_entries(func.group_name)
    names = [e["profiling_name"] for e in entries]
    expected = ["gloo:all_reduce", "gloo:all_gather", "gloo:broadcast"]
    if rank == 0:
        expected += ["gloo:send 0->1", "gloo:recvAnySource"]  # torch's name, as Gloo's
    elif rank == 1:
        expected += ["gloo:recv 1<-0", "gloo:send 1->0"]
    if names != expected:
        failures.append(f"rank {rank}: c10d_func group recorded {names}, expected {expected}")
    if gloo_names[:3] != expected[:3]:
        failures.append(f"rank {rank}: the Gloo group recorded {gloo_names}")
    if config.get("ranks") != str(list(range(world_size))):
        failures.append(f"rank {rank}: pg_config {config}")
    collectives = [e for e in entries if not e["is_p2p"]]
    if [e["collective_seq_id"] for e in collectives] != [1, 2, 3]:
        failures.append(f"rank {rank}: sequence ids {[e['collective_seq_id'] for e in entries]}")
    if entries and entries[0]["input_sizes"] != [[8]] or entries[0]["input_dtypes"] != ["Float"]:
        failures.append(f"rank {rank}: all_reduce recorded {entries[0]}")
    if entries[1]["output_sizes"] != [[world_size * 3]]:
        failures.append(f"rank {rank}: all_gather recorded {entries[1]}")
    for e in entries:
        if e["state"] != "completed" or not e["retired"] or e.get("duration_ms") is None:
            failures.append(f"rank {rank}: {e['profiling_name']} left as {e}")
        if e["process_group"][1] != f"c10d_func {transport}" and not e["is_p2p"]:
            failures.append(f"rank {rank}: description {e['process_group']}")

    # Functional ops, eager and compiled, on a group of their own.
    ranks = list(range(world_size))
    x = c10d_func.functional.all_reduce(torch.ones(3), "sum", ranks, tag=tag)
    assert x.wait().eq(world_size).all()

    @torch.compile(fullgraph=True)
    def compiled(t: torch.Tensor) -> torch.Tensor:
        return c10d_func.functional.all_gather_tensor(t * 2, 0, ranks, tag=tag)

    y = compiled(torch.full((2,), float(rank)))
    assert y.tolist() == [2.0 * r for r in range(world_size) for _ in range(2)]
    name = f"c10d_func/cpu/{tag}/{ranks}"
    entries, config = fr_entries(name)
    names = [e["profiling_name"] for e in entries]
    if names != ["gloo:all_reduce", "gloo:all_gather"]:
        failures.append(f"rank {rank}: functional ops recorded {names} under {name}")
    if config.get("ranks") != str(ranks):
        failures.append(f"rank {rank}: functional group config {config}")

    # Functional messages, under the functional group's name with their own sequence.
    if rank in (0, 1):
        if rank == 0:
            c10d_func.messages.isend(torch.ones(5), 1, ranks, tag=tag).wait()
        else:
            c10d_func.messages.irecv(torch.empty(5), 0, ranks, tag=tag).wait()
        p2p = [e for e in fr_entries(name)[0] if e["is_p2p"]]
        want = "gloo:send 0->1" if rank == 0 else "gloo:recv 1<-0"
        if [e["profiling_name"] for e in p2p] != [want] or p2p[0]["p2p_seq_id"] != 1:
            failures.append(f"rank {rank}: functional messages recorded {p2p}")

    # A torch ProcessGroup bound to the functional ops (group=): observed like the others.
    y = c10d_func.functional.all_reduce(torch.ones(2), "sum", gloo)
    assert y.wait().eq(world_size).all()
    bound = [
        e
        for e in json.loads(torch._C._distributed_c10d._dump_fr_trace_json(True, False))["entries"]
        if e["process_group"][0] == f"c10d_func/cpu/ptd:{gloo.group_name}/{ranks}"
    ]
    if [e["profiling_name"] for e in bound] != ["gloo:all_reduce"]:
        failures.append(f"rank {rank}: the bound Gloo group recorded {bound}")
    dist.destroy_process_group(func)
    dist.destroy_process_group(gloo)
    return failures


@pytest.mark.parametrize(("transport", "world_size"), CASES, ids=IDS)
def test_flight_recorder_records_every_call(transport, world_size):
    pool = observed_pool(transport, world_size)
    tag = f"fr-{uuid.uuid4().hex[:8]}"
    assert_no_failures(pool.run(body_flight_recorder, transport, tag))


def body_profiler(rank: int, world_size: int, transport: str, tag: str, trace_dir: str) -> list:
    func = dist.new_group(backend="c10d_func")
    ranks = list(range(world_size))
    big = torch.ones(1 << 18)  # in flight when the call returns (a progress thread runs it)

    @torch.compile(fullgraph=True)
    def compiled(t: torch.Tensor) -> torch.Tensor:
        return c10d_func.functional.all_reduce(t + 1, "sum", ranks, tag=tag) * 2

    compiled(torch.zeros(4))  # compiled before the profiler starts
    peer = 1 - rank if rank < 2 else None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        dist.all_reduce(big, group=func)
        eager = c10d_func.functional.all_reduce(torch.ones(1 << 18), "sum", ranks, tag=tag)
        eager.wait()
        out = compiled(torch.zeros(4))
        # Messages: the first forms its channel on the channel's thread, the later ones are
        # issued by the caller; each is seen where it runs either way.
        for _ in range(3) if peer is not None else ():
            t = torch.zeros(3)
            if rank == 0:
                dist.send(t, peer, group=func)
                dist.recv(t, peer, group=func)
            else:
                dist.recv(t, peer, group=func)
                dist.send(t, peer, group=func)
    assert out.eq(2 * world_size).all()
    path = os.path.join(trace_dir, f"trace_{rank}.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    collective = f"{TRANSPORT_NAMES[transport]}:all_reduce"
    ran = [e for e in events if e["name"] == collective]
    every_comms = [e["args"] for e in events if e["name"] == "record_param_comms"]
    comms = [a for a in every_comms if a.get("Collective name") not in ("send", "recv")]
    groups = [a.get("Process Group Name") for a in comms]
    failures = []
    # Gloo's own event for the Gloo transport, c10d_func's for shm: one per collective at least.
    if len(ran) < 3:
        failures.append(f"rank {rank}: {len(ran)} events {collective!r}")
    if peer is not None:
        names = [e["name"] for e in events]
        if transport == "gloo":  # Gloo's own event for each message's transfer
            seen = {"gloo:broadcast": names.count("gloo:broadcast")}
            wanted = {"gloo:broadcast": 6}
        else:
            sends, recvs = f"c10d_func:send {rank}->{peer}", f"c10d_func:recv {rank}<-{peer}"
            seen = {sends: names.count(sends), recvs: names.count(recvs)}
            wanted = {sends: 3, recvs: 3}
        if any(seen[name] < count for name, count in wanted.items()):
            failures.append(f"rank {rank}: message events {seen}, wanted {wanted}")
        # torch's metadata names a message's peer, as torch's NCCL records its p2p.
        for op, key in (("send", "Dst Rank"), ("recv", "Src Rank")):
            records = [a for a in every_comms if a.get("Collective name") == op]
            if len(records) != 3 or any(
                a.get(key) != peer or a.get("Process Group Name") != func.group_name
                for a in records
            ):
                failures.append(f"rank {rank}: {op} metadata {records}")
    if groups.count(func.group_name) != 1 or groups.count(f"c10d_func/cpu/{tag}/{ranks}") != 2:
        failures.append(f"rank {rank}: record_param_comms of groups {groups}")
    for args in comms:
        if args.get("Collective name") != "all_reduce" or args.get("Group size") != world_size:
            failures.append(f"rank {rank}: comms metadata {args}")
        if args.get("Process Group Ranks") != str(ranks) or args.get("dtype") != "Float":
            failures.append(f"rank {rank}: comms metadata {args}")
    # A call's event has ended when its wait returns: a profiler stopped right after the call
    # holds it every time (torch 2.11's Gloo ends its event after its future wakes the waiter:
    # it was missing in about one profile in ten there).
    missing = 0
    for _ in range(20):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as each:
            dist.all_reduce(big, group=func)
        missing += collective not in {e.name for e in each.events()}
    if missing:
        failures.append(f"rank {rank}: {missing} of 20 profiles of one call lack {collective!r}")
    dist.destroy_process_group(func)
    return failures


@pytest.mark.parametrize(("transport", "world_size"), CASES, ids=IDS)
def test_profiler_shows_each_collective_where_it_runs(transport, world_size, tmp_path):
    pool = observed_pool(transport, world_size)
    tag = f"prof-{uuid.uuid4().hex[:8]}"
    assert_no_failures(pool.run(body_profiler, transport, tag, str(tmp_path)))


def body_counters(rank: int, world_size: int, tag: str) -> list[str]:
    ranks = list(range(world_size))
    for _ in range(5):
        c10d_func.functional.all_reduce(torch.ones(256), "sum", ranks, tag=tag).wait()
    c10d_func.functional.all_gather_tensor(torch.ones(16), 0, ranks, tag=tag).wait()
    (info,) = [g for g in c10d_func.groups() if g["tag"] == tag]
    activity = info["activity"]
    failures = []
    expected_bytes = 5 * 256 * 4 + world_size * 16 * 4
    if activity["collectives"] != 6 or activity["bytes"] != expected_bytes:
        failures.append(f"rank {rank}: {activity}, expected 6 collectives, {expected_bytes} B")
    if not 0 < activity["busy_seconds"] < 60 or activity["last_error"] is not None:
        failures.append(f"rank {rank}: {activity}")
    return failures


@pytest.mark.parametrize(("transport", "world_size"), CASES, ids=IDS)
def test_groups_count_what_each_communicator_did(transport, world_size):
    pool = observed_pool(transport, world_size)
    tag = f"count-{uuid.uuid4().hex[:8]}"
    assert_no_failures(pool.run(body_counters, tag))


@pytest.mark.parametrize("mode", ["backend", "functional"])
@pytest.mark.parametrize(("transport", "world_size"), CASES, ids=IDS)
def test_skipped_collective_is_named_by_torch_analyzer(transport, world_size, mode):
    with tempfile.TemporaryDirectory() as dumps:
        env = {
            **FR_ENV,
            "TORCH_FR_DUMP_TEMP_FILE": os.path.join(dumps, "fr_"),
            "C10D_FUNC_CPU_TRANSPORT": transport,
            "C10D_FUNC_TIMEOUT": "3",
        }
        program = os.path.join(TESTS_DIR, "programs", "skips_a_collective.py")
        procs = launch_ranks([sys.executable, program, mode], world_size, env=env)
        results = finish_ranks(procs, timeout=90)
        for rank, (code, out, err) in enumerate(results):
            assert code == 0 and "dumped" in out, (rank, out, err[-2000:])
            if rank != world_size - 1:
                assert f"rank {world_size - 1}" in out, out  # c10d_func's own message names it
        # torch's analyzer, run by rank 0 on every rank's dump.
        _, out, err = results[0]
        report = out + err
        if torch.torch_version.TorchVersion(torch.__version__) < (2, 14):
            # torch 2.11's analyzer reads NCCL and XCCL entries only; it stops at the first
            # entry's name, as it does on torch's own Gloo's dumps.
            assert "name formatting error? gloo != 'nccl' or 'xccl'" in report, report
            return
        assert "Not all ranks joining collective, sequence number: 3" in report, report
        assert f"missing ranks: {{{world_size - 1}}}" in report, report
        assert "collective: gloo:all_reduce" in report, report


def test_recording_waits_for_the_env():
    """Without TORCH_FR_BUFFER_SIZE nothing of c10d_func's is recorded (recording costs a few
    microseconds per collective; docs/observability.md)."""
    code = (
        "import json, c10d_func, torch\n"
        "x = torch.ops.c10d_func.all_reduce(torch.ones(2), 'sum', '', [0], 1)\n"
        "torch.ops.c10d_func.wait_tensor(x)\n"
        "d = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(True, False))\n"
        "print(len(d.get('entries', [])))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_FR")}
    env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    off, on = run({}), run(FR_ENV)
    assert off.stdout.strip() == "0", off.stderr
    assert on.stdout.strip() == "1", on.stderr
