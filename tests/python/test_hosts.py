"""Across hosts for real: ranks on test hosts made of network namespaces (tests/python/hosts.py),
each host with its own network, hostname, IPC namespace and /dev/shm, joined by a veth pair; the
world's store is on host 0's address (env://).

The locality decision meets real host identities: chunks inside one host run on shared memory;
chunks spanning hosts run hierarchically (shared memory inside each host, Gloo between hosts,
across the veth: Gloo binds to the interface that reaches the store, since the test hosts' names
resolve nowhere), or on Gloo alone where no host holds two of their members; shm asked for
across hosts is refused, naming the ranks elsewhere. Every op is checked against the reference,
and every reduction and dtype of the hierarchical paths at odd sizes and 1 MiB, in member orders
that follow and that alternate hosts, on even (2 + 2) and uneven (3 + 1) hosts; nothing is left
in either host's /dev/shm. A link cut mid-job fails every rank within C10D_FUNC_TIMEOUT; a host
whose ranks are killed fails the survivors at once. Either way the error names the missing ranks
(a roll call in the store), and nothing is left in /dev/shm. Strangers connecting to every
listening port of both hosts during the job change no result: the rail links refuse them. One
program with every collective runs compiled (Python and C++ wrappers) and from an AOTInductor
package on the world and on pairs that span the hosts, each output checked right after its wait.

Needs root (CI runs as root); skipped, with the reason, elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from error_text import reports_timeout
from every_collective import aoti_package, cross_host_pairs
from hosts import TestHosts, available, host_results
from worker_pool import SLOWDOWN, free_port

WHY_NOT = available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")


def rank_results(ranks: dict[int, tuple[int, str]]) -> dict[int, dict]:
    results = {}
    for rank, (code, out) in sorted(ranks.items()):
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert code == 0 and lines, f"rank {rank} exited {code}:\n{out[-4000:]}"
        results[rank] = json.loads(lines[-1][len("RESULT ") :])
    return results


@pytest.mark.parametrize("layout", [[2, 2], [3, 1]], ids=["two_plus_two", "three_plus_one"])
def test_every_op_picks_shm_inside_a_host_and_gloo_across(layout):
    hosts_of = [host for host, count in enumerate(layout) for _ in range(count)]
    with TestHosts(len(layout)) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            layout,
            ["every_op", ",".join(map(str, hosts_of))],
            # Every small collective wakes the progress thread, whatever the cores (the
            # three-host test leaves them to their waiters).
            env={"C10D_FUNC_TIMEOUT": "30", "C10D_FUNC_WAITER_FIRST": "0"},
        )
        ranks, leftovers = host_results(launchers)
    namespaces = subprocess.run(
        ["ip", "netns", "list"], check=True, capture_output=True, text=True
    ).stdout
    assert not any(name in namespaces for name in hosts.names), namespaces  # all removed
    results = rank_results(ranks)
    for rank, result in results.items():
        assert result["failures"] == [], result["failures"]
        served = result["served"]
        alone = layout[hosts_of[rank]] == 1
        expect_inside = "local" if alone else "shm"  # a chunk of one member copies locally
        assert served.get("inside each host", served.get("inside my host")) == expect_inside
        # Spanning hosts with two members on a host: hierarchical; one member per host: the
        # hosts' link beside Gloo.
        assert served["the world"] == "shm+gloo", served
        pair = [rank - rank % 2, rank - rank % 2 + 1]
        spans = hosts_of[pair[0]] != hosts_of[pair[1]]
        assert served["pairs"] == ("link+gloo" if spans else "shm"), (rank, served)
        forced = result["forced_shm"]
        assert "the shm transport needs every member of the group on one host" in forced, forced
        elsewhere = [r for r in range(len(hosts_of)) if hosts_of[r] != hosts_of[rank]]
        assert f"ranks {elsewhere} run on another host" in forced, forced
    assert leftovers == {host: [] for host in range(len(layout))}, leftovers


def test_three_hosts_reduce_every_dtype_through_links_and_gloo(tmp_path):
    # Between more than two hosts, a rail's link sends each buffer to every other host and every
    # member reduces in host order (the leaders' all_reduce up to 512 KiB, and the rails' pieces
    # up to 1 MiB); larger pieces go along the rail on Gloo's ring, unsegmented (pipelining is
    # between two hosts). all_gather's rail step goes over the links at any size. Host 0
    # forwards between the other two. Small functional collectives are left to their waiters
    # (C10D_FUNC_WAITER_FIRST=1, whatever the cores): one nobody waits still completes, run by
    # the progress thread once its grace has passed (on_test_hosts.unwaited_across_hosts).
    with TestHosts(3) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [2, 2, 2],
            ["reductions", "0,0,1,1,2,2"],
            env={
                "C10D_FUNC_TIMEOUT": "60",
                "C10D_FUNC_TEST_SYNC_DIR": str(tmp_path),
                "C10D_FUNC_WAITER_FIRST": "1",
            },
        )
        ranks, leftovers = host_results(launchers, timeout=240)
    for result in rank_results(ranks).values():
        assert result == {"failures": [], "served": ["shm+gloo"]}, result
    assert leftovers == {0: [], 1: [], 2: []}, leftovers


@pytest.mark.parametrize("hosts_count", [2, 3])
def test_one_member_per_host_reduces_every_dtype_over_the_hosts_link(hosts_count, tmp_path):
    # One member per host (torchrun --nproc-per-node 1): the hosts' own link carries all_reduce
    # (at every size between two hosts, up to 1 MiB between three; Gloo's ring above), all_gather
    # and, between two hosts, reduce_scatter (Gloo between three); every reduction and dtype,
    # in rank order and in an order that alternates hosts, against the reference. Small
    # all_reduces send this member's part in the call: a peer finishes while a member does not
    # wait, and unwaited ones run in issue order (on_test_hosts.unwaited_across_hosts).
    layout = [1] * hosts_count
    with TestHosts(hosts_count) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            layout,
            ["reductions", ",".join(map(str, range(hosts_count)))],
            env={"C10D_FUNC_TIMEOUT": "60", "C10D_FUNC_TEST_SYNC_DIR": str(tmp_path)},
        )
        ranks, leftovers = host_results(launchers, timeout=240)
    for result in rank_results(ranks).values():
        assert result == {"failures": [], "served": ["link+gloo"]}, result
    assert leftovers == {host: [] for host in range(hosts_count)}, leftovers


@pytest.mark.parametrize(
    "cpu_transport, served, layout",
    [(None, "shm+gloo", [2, 2]), ("gloo", "gloo", [2, 2]), (None, "shm+gloo", [3, 1])],
    ids=["hierarchical_by_default", "flat_gloo_when_asked", "hierarchical_on_uneven_hosts"],
)
def test_classic_calls_on_a_c10d_func_group_spanning_hosts(cpu_transport, served, layout):
    # Classic dist.* calls on a c10d_func group run on the same communicators as the functional
    # ops: hierarchical by default, flat Gloo under C10D_FUNC_CPU_TRANSPORT=gloo. On uneven
    # hosts the later members of the larger host have no rail, and torch's set_timeout reaches
    # them too.
    env = {"C10D_FUNC_TIMEOUT": "30", "TORCH_FR_BUFFER_SIZE": "200"}
    if cpu_transport:
        env["C10D_FUNC_CPU_TRANSPORT"] = cpu_transport
    hosts_of = ",".join(str(h) for h, count in enumerate(layout) for _ in range(count))
    with TestHosts(2) as hosts:
        launchers = hosts.launch("on_test_hosts.py", layout, ["classic", hosts_of], env=env)
        ranks, leftovers = host_results(launchers)
    for result in rank_results(ranks).values():
        assert result == {"failures": [], "served": [served]}, result
    assert leftovers == {0: [], 1: []}, leftovers


@pytest.mark.parametrize(
    "hosts_count, per_host",
    [(2, 2), (3, 2), (2, 1)],
    ids=["hierarchical", "three_hosts", "one_member_per_host"],
)
def test_rooted_collectives_whose_members_name_other_roots_fail_on_every_rank(
    hosts_count, per_host
):
    # reduce, gather and scatter run across hosts as an all_reduce, all_gather and broadcast,
    # which would compute with any root: the root is part of what the members compare (inside
    # a host in shared memory, between hosts in each message of the rails' links), so members
    # that disagree raise, each of them, in the call, well before the timeout, where Gloo's
    # pairs time out. A scatter runs as a broadcast (a large scatter or gather along the root's
    # rail), whose step between hosts carries a payload one way only: there every member shows
    # its header to every other (the rails off the root's one too), so two members that both
    # think they send (or receive) fail in the call instead of returning the wrong blocks.
    # Between three hosts a large reduce's rails run Gloo's ring, which compares nothing: the
    # rails' links compare the root before it.
    hosts_of = [h for h in range(hosts_count) for _ in range(per_host)]
    with TestHosts(hosts_count) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [per_host] * hosts_count,
            ["roots_disagree", ",".join(map(str, hosts_of))],
            env={"C10D_FUNC_TIMEOUT": "20"},
        )
        ranks, leftovers = host_results(launchers)
    for rank, result in rank_results(ranks).items():
        for op, error in result["errors"].items():
            assert error != "no error", (rank, op)
            assert not error.startswith("at the next"), (rank, op, error)
            assert (
                "another root" in error or "different collectives" in error or ("failed" in error)
            ), (rank, op, error[:600])
            # On the disagreement itself, not at the timeout: a member that fails on one peer's
            # header shows its own to the others first (three hosts: a rail member that agrees
            # with the peer that failed would wait for its payload).
            assert "did not take part" not in error, (rank, op, error[:600])
    assert leftovers == {host: [] for host in range(hosts_count)}, leftovers


def test_a_rail_without_its_link_takes_every_member_to_one_path():
    # One member forms no link (C10D_FUNC_HOST_LINKS=0): its rail runs on Gloo, rail 0 on its
    # link. Large gathers and scatters span every rail, so every member learns at formation
    # whether every rail has its link and takes Gloo's path with the others, where choosing by
    # its own rail would leave the members waiting on two paths until the timeout (20 s here).
    with TestHosts(2) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [2, 2],
            ["one_rail_unlinked", "0,0,1,1"],
            env={"C10D_FUNC_TIMEOUT": "20"},
        )
        ranks, leftovers = host_results(launchers)
    for result in rank_results(ranks).values():
        assert result == {"failures": []}, result
    assert leftovers == {0: [], 1: []}, leftovers


@pytest.mark.parametrize(
    "hosts_count, per_host, order",
    [
        (2, 2, "ordered"),
        (2, 2, "alternating"),
        (3, 2, "ordered"),
        (2, 1, "ordered"),
        (3, 1, "ordered"),
    ],
    ids=[
        "hierarchical",
        "hierarchical_alternating",
        "three_hosts",
        "one_member_per_host",
        "three_hosts_one_member_each",
    ],
)
def test_all_to_all_with_split_sizes_of_every_kind(hosts_count, per_host, order):
    # With split sizes, calls go the way calls without them do (the steps between hosts or
    # flat Gloo, by a size every member agrees on): equal on some members only, uneven with
    # empty parts, and given by some members while the others pass none (which torch's backends
    # accept; before, members with splits went to Gloo and the others to the steps between
    # hosts, and every member failed at the timeout), each against the reference. Splits that
    # do not pair up fail on the spot, naming the sizes: between hosts on both sides of the
    # rail's link, inside a host on every member of that host, and the other host's members at
    # once through the link (RailLink::refuse), none at the timeout (10 s here) and none after
    # a roll call (every member is there); parts whose sizes add up but differ one by one
    # (before, a silent wrong result) and large parts (before, each member at the timeout)
    # too. Between three hosts the rails first agree on the largest host's size.
    hosts_of = [h for h in range(hosts_count) for _ in range(per_host)]
    with TestHosts(hosts_count) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [per_host] * hosts_count,
            ["all_to_all_splits", ",".join(map(str, hosts_of)), order],
            env={"C10D_FUNC_TIMEOUT": "10"},
        )
        ranks, leftovers = host_results(launchers)
    results = rank_results(ranks)
    for result in results.values():
        assert result["failures"] == [], result["failures"]
    labels = {
        "across hosts",
        "across hosts, large",
        "across hosts, one host large",
        "across hosts, others empty",
    }
    if per_host == 2:
        labels |= {"inside a host", "across hosts, same total"}
    for label in labels:
        errors = {rank: result["errors"][label] for rank, result in results.items()}
        for rank, outcome in errors.items():
            assert outcome["elapsed"] < 5, (label, rank, outcome)  # not at the timeout
            assert "did not take part" not in outcome["error"], (label, rank, outcome)
            assert "roll call" not in outcome["error"], (label, rank, outcome)
        unpaired = [r for r, o in errors.items() if "do not pair up" in o["error"]]
        if label == "inside a host":
            # Every member of the first rank's host names the pair; the others' members hear
            # of it through their rails' links.
            first_host = [r for r, h in enumerate(hosts_of) if h == hosts_of[0]]
            assert sorted(unpaired) == first_host, errors
            for rank, outcome in errors.items():
                if rank not in first_host:
                    assert "before its step between hosts" in outcome["error"], (rank, outcome)
        elif per_host == 1:
            # One member per host: the hosts' link at every size, whose pair names the sizes
            # on both sides; the other members finish (with empty parts elsewhere, this member
            # shows its header to the rest and still finishes, not at the timeout).
            assert len(unpaired) >= 2, errors
            assert any("bytes of this all_to_all" in errors[r]["error"] for r in unpaired), errors
        elif label in ("across hosts", "across hosts, others empty"):
            # Both sides of the link that carries the extra row name it.
            assert len(unpaired) >= 2, errors
            assert any("bytes of this all_to_all" in errors[r]["error"] for r in unpaired), errors
        elif label != "across hosts, same total":
            # Large parts go to flat Gloo once the hosts have compared every pair between them,
            # so every member fails, none alone in Gloo until the timeout; with one host's count
            # above the steps' bound and the other's below, one host compares while the other
            # takes the steps, and both fail on the other's header (before, each waited at the
            # timeout, or Gloo aborted the process). Between three hosts all compare (they agree
            # on the largest count first), and the third hears of it from the other two.
            assert sorted(unpaired) == sorted(errors), errors
        else:
            # The rail's payload has the size its receiver expects, made of parts of other
            # sizes: both sides of that link name it (unchecked, the rows would land in the
            # wrong places of the receiver's output, with no error anywhere).
            assert len(unpaired) >= 2, errors
            assert all("in parts of other sizes" in errors[r]["error"] for r in unpaired), errors
    assert leftovers == {host: [] for host in range(hosts_count)}, leftovers


def test_every_collective_compiled_and_packaged_across_hosts(tmp_path_factory):
    # One program with every collective (every_collective.py), its outputs read right after
    # their waits, under inductor's Python wrapper, its C++ wrapper and as an AOTInductor package
    # exported here (no world in this process) and loaded by every rank: the world's collectives
    # run hierarchically (their steps between hosts on the rails' own threads), the pairs' on
    # the hosts' link, with 4 MiB per rank in flight when the next op reads them.
    hosts_of = [0, 0, 1, 1]
    pairs = cross_host_pairs(hosts_of)
    package = aoti_package(len(hosts_of), str(tmp_path_factory.getbasetemp()), pairs=pairs)
    with TestHosts(2) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [2, 2],
            ["compiled", ",".join(map(str, hosts_of)), package],
            env={"C10D_FUNC_TIMEOUT": "60"},
        )
        ranks, leftovers = host_results(launchers, timeout=600)
    for result in rank_results(ranks).values():
        assert result == {
            "failures": [],
            "served": {"world": "shm+gloo", "pairs": "link+gloo"},
        }, result
    assert leftovers == {0: [], 1: []}, leftovers


def test_strangers_at_every_listening_port_change_no_result(tmp_path):
    # A process on each host connects again and again to every listening port there but the
    # store's, during the formations and the collectives, and sends what one that found the port
    # could (programs/stranger.py). The rail links take only connections that present the
    # formation's secret from the store; the rest are closed and accepting goes on. Each rail
    # link's members connect 300 ms after the listeners open (a test-only delay), so that strangers
    # surely meet them. The groups form and run every API collective as in
    # test_every_op_picks_shm_inside_a_host_and_gloo_across, without its sweep of every reduction
    # and dtype: the strangers meet the links as they form, and the sweep runs over the links
    # those formations made.
    stop = tmp_path / "stop"
    store_port = free_port()
    env = {
        "C10D_FUNC_TIMEOUT": "60",
        "MASTER_PORT": str(store_port),
        "C10D_FUNC_TEST_RAIL_CONNECT_DELAY_MS": "300",
    }
    stranger = os.path.join(os.path.dirname(__file__), "programs", "stranger.py")
    with TestHosts(2) as hosts:
        strangers = [
            subprocess.Popen(
                ["ip", "netns", "exec", name, sys.executable, stranger, str(stop), str(store_port)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for name in hosts.names
        ]
        try:
            launchers = hosts.launch(
                "on_test_hosts.py", [2, 2], ["every_op", "0,0,1,1", "0"], env=env
            )
            ranks, leftovers = host_results(launchers, timeout=300)
        finally:
            stop.touch()
            reports = [s.communicate(timeout=30)[0] for s in strangers]
    for result in rank_results(ranks).values():
        assert result["failures"] == [], result["failures"]
        assert result["served"]["the world"] == "shm+gloo", result["served"]
    made = [json.loads(r[r.index("STRANGER ") + 9 :].splitlines()[0]) for r in reports]
    assert all(m["connections"] > 0 for m in made), (made, reports)
    refusals = [out for _, out in ranks.values() if "the rail link refused" in out]
    assert refusals, "no rail link saw a stranger: " + str(made)
    assert leftovers == {0: [], 1: []}, leftovers


@pytest.mark.parametrize("per_host", [2, 1], ids=["hierarchical", "one_member_per_host"])
def test_a_link_down_mid_job_fails_every_rank_within_the_timeout(per_host, tmp_path):
    # Host 1's first rank cuts the veth inside its host; the next collective spanning hosts must
    # fail on every rank of both hosts within C10D_FUNC_TIMEOUT, and leave no segment behind.
    timeout = 8
    hosts_of = [0] * per_host + [1] * per_host
    with TestHosts(2) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [per_host, per_host],
            ["link_down", ",".join(map(str, hosts_of))],
            env={
                "C10D_FUNC_TIMEOUT": str(timeout),
                "C10D_FUNC_TEST_LINK": hosts.links[0][1],
                "C10D_FUNC_TEST_SYNC_DIR": str(tmp_path),
            },
        )
        ranks, leftovers = host_results(launchers)
    for rank, result in rank_results(ranks).items():
        assert "c10d_func.all_reduce failed on group (tag='across'" in result["error"], result
        # Host 0 holds the store: it names who did not answer; host 1 cannot reach the store,
        # and names who is out of reach.
        elsewhere = [r for r, h in enumerate(hosts_of) if h != hosts_of[rank]]
        absent = f"rank {elsewhere[0]}" if len(elsewhere) == 1 else f"ranks {elsewhere}"
        missing = (
            f"{absent} did not answer a roll call"
            if hosts_of[rank] == 0
            else f"ranks {elsewhere} on other hosts are unreachable from here"
        )
        assert missing in result["error"], f"rank {rank}: {result}"
        # Within the timeout, as the error reports it (the harness scales it on slow runs).
        assert reports_timeout(result["error"], timeout * SLOWDOWN), f"rank {rank}: {result}"
    assert leftovers == {0: [], 1: []}, leftovers


@pytest.mark.parametrize(
    "numel", [1 << 24, 8], ids=["64MiB_issued", "small_through_the_first_ranks"]
)
def test_a_host_killed_fails_the_survivors_at_once_reporting_missing_members(numel, tmp_path):
    # Host 1's ranks die together (SIGKILL): with a 64 MiB all_reduce issued, or before a
    # small one that host 0's first rank takes between hosts while its second waits in shared
    # memory. Host 0's ranks raise, naming ranks 2 and 3, well before the timeout: a dead peer
    # is seen at once (the connection resets; the first rank tells the second through shared
    # memory). No segment is left on either host. The timeout is longer than the test's own bound
    # on the hosts (hosts.host_results): a failure that waited for it could not pass.
    timeout = 600
    with TestHosts(2) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [2, 2],
            ["host_killed", "0,0,1,1", str(numel)],
            env={"C10D_FUNC_TIMEOUT": str(timeout), "C10D_FUNC_TEST_SYNC_DIR": str(tmp_path)},
        )
        ranks, leftovers = host_results(launchers)
    assert [ranks[r][0] for r in (2, 3)] == [-9, -9], ranks
    survivors = rank_results({r: ranks[r] for r in (0, 1)})
    for rank, result in survivors.items():
        assert "c10d_func.all_reduce failed on group (tag='across'" in result["error"], result
        # The dead ranks are named. On a loaded machine the other survivor, busy failing too, may
        # also miss the roll call's 1 s (CI of 2026-11-29 saw "ranks [1, 2, 3]" once).
        unanswered = re.search(r"ranks \[([\d, ]+)\] did not answer a roll call", result["error"])
        assert unanswered, f"rank {rank}: {result}"
        named = {int(r) for r in unanswered.group(1).split(",")}
        assert {2, 3} <= named <= {1 - rank, 2, 3}, f"rank {rank}: {result}"
        assert "C10D_FUNC_TIMEOUT" not in result["error"], f"rank {rank}: {result}"
    if numel < 1 << 20:  # between hosts on the first ranks' link; the second rank told by the first
        # Rank 2 is gone before rank 0 sends: the link's send or receive sees it (a reset or a
        # closed connection), and says it exited.
        first = survivors[0]["error"]
        rail = "between hosts (rail 0's link): "
        assert rail in first, survivors
        seen = first[first.index(rail) :].split(";")[0]
        assert "rank 2" in seen and "exited" in seen, survivors
        assert f"rank 0 failed: {seen}" in survivors[1]["error"], survivors
    assert leftovers == {0: [], 1: []}, leftovers


@pytest.mark.parametrize(
    "cpu_transport, across, numel",
    [(None, 1, 1 << 24), (None, 1, 8), ("gloo", 0, 1 << 24)],
    ids=["one_member_per_host", "one_member_per_host_small", "gloo_asked_for"],
)
def test_a_host_killed_with_no_host_step_names_the_missing(cpu_transport, across, numel, tmp_path):
    # Where no step runs inside a host: a chunk with one member per host (the hosts' link beside
    # Gloo), or C10D_FUNC_CPU_TRANSPORT=gloo (Gloo alone, whose own error names no rank). A roll
    # call adds the ranks that are gone. Host 1's ranks die with a 64 MiB all_reduce issued and
    # unfinished, or (small) between collectives, before the survivors issue a small one. The
    # timeout is longer than the test's own bound on the hosts: a failure must not wait for it.
    timeout = 600
    env = {"C10D_FUNC_TIMEOUT": str(timeout), "C10D_FUNC_TEST_SYNC_DIR": str(tmp_path)}
    if cpu_transport:
        env["C10D_FUNC_CPU_TRANSPORT"] = cpu_transport
    with TestHosts(2) as hosts:
        launchers = hosts.launch(
            "on_test_hosts.py",
            [2, 2],
            ["host_killed", "0,0,1,1", str(numel), str(across)],
            env=env,
        )
        ranks, leftovers = host_results(launchers)
    assert [ranks[r][0] for r in (2, 3)] == [-9, -9], ranks
    for rank, result in rank_results({r: ranks[r] for r in (0, 1)}).items():
        assert "c10d_func.all_reduce failed on group (tag='across'" in result["error"], result
        assert "C10D_FUNC_TIMEOUT" not in result["error"], f"rank {rank}: {result}"
        if across:  # each survivor's partner on host 1: 0 with 2, 1 with 3
            assert f"rank {rank + 2} did not answer a roll call" in result["error"], result
            continue
        # The world on Gloo: both dead ranks named. A survivor still blocked in Gloo's ring
        # (sending to the other survivor, which failed first) may be named as well, as hung.
        named = re.search(r"ranks (\[[0-9, ]+\]) did not answer a roll call", result["error"])
        assert named and {2, 3} <= set(json.loads(named.group(1))), f"rank {rank}: {result}"
    assert leftovers == {0: [], 1: []}, leftovers
