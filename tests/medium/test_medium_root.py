"""Self-tests of the nftables medium on a container-less test bed (root).

Five plain netns on the medium bridge, laid out as the virtual mesh lays them
out (``meshsim.vmesh.testbed``, run ``mt``: ``msub-mt-n1..5``,
``msub-mt-medium``), all removed at the end even when a test fails. Traffic is
raw test frames (``mediumhelpers``), so each frame is one trial of the medium.

Statistical bounds are exact binomial tails with alpha = 1e-7 per assertion;
no test makes more than three such assertions, so a correct medium fails a
test with probability below 1e-6.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from mediumhelpers import (
    BROADCAST,
    Blaster,
    Receiver,
    binomial_bounds,
    frame_socket,
    mac_bytes,
    make_frame,
    send_frames,
    settle,
    socket_in,
    wait_for,
)

from meshsim.medium import DelayConfig, Medium, MediumError, htb, nft
from meshsim.medium.delay import Delayer
from meshsim.radio import LinearRamp
from meshsim.vmesh import testbed
from meshsim.vmesh.net import netns_exists
from meshsim.vmesh.plan import NodePlan, Plan

pytestmark = [pytest.mark.root, pytest.mark.timeout(300)]

ALPHA = 1e-7
RUN = "mt"


@pytest.fixture(scope="module")
def bed() -> Iterator[Plan]:
    plan = testbed.build(5, RUN)
    try:
        yield plan
    finally:
        Medium(plan.medium_netns, testbed.ports(plan)).remove()
        testbed.teardown(plan)
        assert not any(netns_exists(n.netns) for n in plan.nodes)


@pytest.fixture
def medium(bed: Plan) -> Iterator[Medium]:
    m = Medium(bed.medium_netns, testbed.ports(bed))
    m.install()
    try:
        yield m
    finally:
        m.remove()


def node(plan: Plan, i: int) -> NodePlan:
    return plan.nodes[i - 1]


def mac(plan: Plan, i: int) -> bytes:
    return mac_bytes(node(plan, i).mesh_mac)


def everyone(n: int, loss: float = 0.0) -> dict[tuple[int, int], float]:
    return {(a, b): loss for a in range(1, n + 1) for b in range(1, n + 1) if a != b}


def map_elements(plan: Plan, name: str = "links") -> dict[tuple[str, str], str]:
    out = subprocess.run(["ip", "netns", "exec", plan.medium_netns, "nft", "-j", "list", "map",
                          "bridge", nft.TABLE, name], check=True, capture_output=True,
                         text=True).stdout
    (entry,) = [e["map"] for e in json.loads(out)["nftables"] if "map" in e]
    result = {}
    for key, verdict in entry.get("elem", []):
        src, dst = key["concat"]
        result[(src, dst)] = (f"jump {verdict['jump']['target']}" if "jump" in verdict
                              else next(iter(verdict)) if isinstance(verdict, dict)
                              else str(verdict))
    return result


# ------------------------------------------------------------------- range


def test_an_out_of_range_pair_loses_every_frame_both_ways(bed: Plan, medium: Medium) -> None:
    links = everyone(5)
    del links[(1, 2)], links[(2, 1)]
    medium.set_links(links)
    rx = {i: Receiver(node(bed, i).netns) for i in (1, 2, 3)}
    tx1, tx2 = frame_socket(node(bed, 1).netns), frame_socket(node(bed, 2).netns)
    try:
        n = 500
        send_frames(tx1, BROADCAST, mac(bed, 1), 1, range(n))
        send_frames(tx2, BROADCAST, mac(bed, 2), 2, range(n))
        send_frames(tx1, mac(bed, 2), mac(bed, 1), 3, range(n))  # unicast 1 -> 2
        send_frames(tx2, mac(bed, 1), mac(bed, 2), 4, range(n))  # unicast 2 -> 1
        settle(rx.values())
        assert rx[2].seqs(mac(bed, 1), 1) == set() and rx[2].seqs(mac(bed, 1), 3) == set()
        assert rx[1].seqs(mac(bed, 2), 2) == set() and rx[1].seqs(mac(bed, 2), 4) == set()
        # the same frames reach an in-range node: the senders did send them
        assert len(rx[3].seqs(mac(bed, 1), 1)) == len(rx[3].seqs(mac(bed, 2), 2)) == n
    finally:
        for r in rx.values():
            r.close()
        tx1.close()
        tx2.close()


def test_links_are_directed(bed: Plan, medium: Medium) -> None:
    links = everyone(5)
    del links[(2, 1)]  # 1 hears nothing from 2; 2 hears 1
    medium.set_links(links)
    rx1, rx2 = Receiver(node(bed, 1).netns), Receiver(node(bed, 2).netns)
    tx1, tx2 = frame_socket(node(bed, 1).netns), frame_socket(node(bed, 2).netns)
    try:
        send_frames(tx1, BROADCAST, mac(bed, 1), 5, range(200))
        send_frames(tx2, BROADCAST, mac(bed, 2), 6, range(200))
        settle([rx1, rx2])
        assert len(rx2.seqs(mac(bed, 1), 5)) == 200
        assert rx1.seqs(mac(bed, 2), 6) == set()
    finally:
        for closable in (rx1, rx2, tx1, tx2):
            closable.close()


# -------------------------------------------------------------------- loss


@pytest.fixture(scope="module")
def lossy_run(bed: Plan) -> dict[str, object]:
    """4,000 broadcasts from node 1: to 2 without loss, to 3 with 30 %, to 4 with 50 %."""
    m = Medium(bed.medium_netns, testbed.ports(bed))
    m.install()
    links = everyone(5)
    links[(1, 3)], links[(1, 4)] = 0.3, 0.5
    m.set_links(links)
    rx = {i: Receiver(node(bed, i).netns) for i in (2, 3, 4)}
    tx = frame_socket(node(bed, 1).netns)
    n = 4000
    try:
        send_frames(tx, BROADCAST, mac(bed, 1), 7, range(n))
        settle(rx.values())
        got = {i: r.seqs(mac(bed, 1), 7) for i, r in rx.items()}
    finally:
        for r in rx.values():
            r.close()
        tx.close()
        m.remove()
    return {"n": n, "got": got}


def test_a_lossy_pair_loses_within_a_binomial_bound(lossy_run: dict[str, object]) -> None:
    n: int = lossy_run["n"]  # type: ignore[assignment]
    got: dict[int, set[int]] = lossy_run["got"]  # type: ignore[assignment]
    assert len(got[2]) == n, "frames lost on a loss-free pair: the losses below are not ours"
    for receiver, p in ((3, 0.3), (4, 0.5)):
        lost = n - len(got[receiver])
        lo, hi = binomial_bounds(n, p, ALPHA)
        print(f"loss {p:.0%}: lost {lost}/{n} = {lost / n:.4f}, bound [{lo}, {hi}]")
        assert lo <= lost <= hi


def test_broadcast_losses_at_two_receivers_are_independent(lossy_run: dict[str, object]) -> None:
    """Joint loss ~ Binomial(n, 0.3 * 0.5) if independent; one shared draw per frame
    would make it ~ Binomial(n, 0.3), far outside the bound (600 vs 1,200 of 4,000)."""
    n: int = lossy_run["n"]  # type: ignore[assignment]
    got: dict[int, set[int]] = lossy_run["got"]  # type: ignore[assignment]
    both = sum(1 for s in range(n) if s not in got[3] and s not in got[4])
    lo, hi = binomial_bounds(n, 0.15, ALPHA)
    l3, l4 = (n - len(got[3])) / n, (n - len(got[4])) / n
    print(f"joint loss {both}/{n} = {both / n:.4f} vs product of marginals {l3 * l4:.4f}, "
          f"bound [{lo}, {hi}]")
    assert lo <= both <= hi


# ------------------------------------------------------------ model -> map


def test_an_update_from_positions_writes_the_models_links(bed: Plan, medium: Medium) -> None:
    medium.model = LinearRamp(100.0, 0.0, 0.5)
    took = medium.update({1: (0.0, 0.0), 2: (40.0, 0.0), 3: (80.0, 0.0), 4: (130.0, 0.0),
                          5: (500.0, 0.0)})
    assert took > 0 and medium.last is not None and medium.last.pairs == 10
    # 1-2, 2-3 at 40 m: flat, 0 %; 1-3 at 80 m: 60 % (ramp 50..100 m); 3-4 at 50 m: 0 %;
    # 2-4 at 90 m: 80 %; 1-4 at 130 m, 5 anywhere: out of range
    want = {("n1", "n2"): "accept", ("n2", "n3"): "accept", ("n3", "n4"): "accept",
            ("n1", "n3"): "jump loss60", ("n2", "n4"): "jump loss80"}
    want |= {(b, a): v for (a, b), v in want.items()}
    assert map_elements(bed) == want


def test_set_links_rejects_bad_input(medium: Medium) -> None:
    with pytest.raises(Exception, match="no medium port for node 9"):
        medium.set_links({(1, 9): 0.0})
    with pytest.raises(Exception, match="probability"):
        medium.set_links({(1, 2): 1.5})
    with pytest.raises(Exception, match="needs a radio model"):
        medium.update({1: (0.0, 0.0)})


# --------------------------------------------------------------- atomicity


def fake_ports(n: int) -> dict[int, str]:
    """Ports of nodes that do not exist: nft keys are strings, so they make a large map
    (several ``add element`` statements per transaction) without building netns."""
    return {100 + i: f"x{i}" for i in range(n)}


def alternate(medium: Medium, tables: list[dict[tuple[int, int], float]], rounds: int) -> None:
    for k in range(rounds):
        medium.set_links(tables[k % 2])


def traffic_during(bed: Plan, update: object, rounds: int) -> dict[str, int]:
    rx = {i: Receiver(node(bed, i).netns) for i in (2, 3, 4)}
    tx = frame_socket(node(bed, 1).netns)
    try:
        with Blaster(tx, BROADCAST, mac(bed, 1), 8) as blaster:
            time.sleep(0.05)
            update(rounds)  # type: ignore[operator]
            time.sleep(0.05)
        settle(rx.values())
        return {"sent": blaster.sent, **{f"rx{i}": len(r.seqs(mac(bed, 1), 8))
                                         for i, r in rx.items()}}
    finally:
        for r in rx.values():
            r.close()
        tx.close()


def atomic_tables(bed: Plan) -> tuple[dict[int, str], list[dict[tuple[int, int], float]]]:
    ports = testbed.ports(bed) | fake_ports(100)
    filler = {(a, b): 0.1 for a in fake_ports(100) for b in fake_ports(100) if a != b}
    base = filler | {(1, 4): 0.0, (4, 1): 0.0}          # 1 -> 2 forbidden in both
    first = base | {(1, 3): 0.0}                        # 1 -> 3 open in one only
    second = {k: v for k, v in base.items() if k[0] % 2 == 0}  # and other entries change
    second[(1, 4)] = 0.0
    return ports, [first, second]


@pytest.mark.timeout(600)
def test_an_update_during_traffic_is_atomic(bed: Plan) -> None:
    ports, tables = atomic_tables(bed)
    m = Medium(bed.medium_netns, ports)
    m.install()
    try:
        m.set_links(tables[0])
        assert m.last is not None and m.last.pairs > 2 * nft.CHUNK  # a multi-statement file
        counts = traffic_during(bed, lambda r: alternate(m, tables, r), rounds=60)
    finally:
        m.remove()
    print(f"atomic: {counts}")
    assert counts["rx2"] == 0, "a pair forbidden before and after every update talked"
    assert counts["rx4"] == counts["sent"], "a pair open before and after an update lost frames"
    assert 0 < counts["rx3"] < counts["sent"], "the updates did not happen during the traffic"


@pytest.mark.timeout(600)
def test_a_non_atomic_update_would_be_caught(bed: Plan) -> None:
    """The check above can fail: replacing the table in separate nft runs (delete, then
    create, then fill) opens the bridge between them, and the forbidden pair talks."""
    ports, tables = atomic_tables(bed)
    m = Medium(bed.medium_netns, ports)
    m.install()

    def non_atomic(rounds: int) -> None:
        for k in range(rounds):
            nft.apply(bed.medium_netns, nft.render_remove())
            m.install()
            m.set_links(tables[k % 2])

    try:
        m.set_links(tables[0])
        counts = traffic_during(bed, non_atomic, rounds=30)
    finally:
        m.remove()
    print(f"non-atomic: {counts}")
    assert counts["rx2"] > 0


# ---------------------------------------------------------------- bandwidth


def test_htb_limits_what_a_node_transmits(bed: Plan, medium: Medium) -> None:
    medium.set_links(everyone(5))
    ns = node(bed, 1).netns
    assert htb.read_rate(ns, "mesh0") is None
    htb.set_rate(ns, "mesh0", 1_000_000)
    rx = Receiver(node(bed, 2).netns)
    tx = frame_socket(ns)
    try:
        assert htb.read_rate(ns, "mesh0") == 1_000_000
        frame = 1000
        started = time.monotonic()
        for seq in range(100):  # 100 kB at once: far beyond the 1,600-byte burst
            tx.send(make_frame(mac(bed, 2), mac(bed, 1), 9, seq, size=frame))
        assert htb.overlimits(ns, "mesh0") > 0
        settle([rx], quiet_s=0.5)
        assert len(rx.seqs(mac(bed, 1), 9)) == 100  # shaped, queued, none lost
        took = rx.last_rx - started
        print(f"HTB 1 Mbit/s: 100 x {frame} B delivered in {took:.3f} s "
              f"= {100 * frame * 8 / took / 1e6:.3f} Mbit/s")
    finally:
        rx.close()
        tx.close()
        assert htb.clear_rate(ns, "mesh0") is True
    assert htb.read_rate(ns, "mesh0") is None and htb.clear_rate(ns, "mesh0") is False


def test_htb_rate_set_twice_replaces_the_first(bed: Plan, medium: Medium) -> None:
    """A later scenario on the same devices sets the rate again (issue 15, item 5)."""
    ns = node(bed, 3).netns
    try:
        htb.set_rate(ns, "mesh0", 1_000_000)
        htb.set_rate(ns, "mesh0", 12_000)  # failed: tc cannot "change" an HTB root
        assert htb.read_rate(ns, "mesh0") == 12_000
        htb.set_rate(ns, "mesh0", 12_000)  # the same rate again is no error either
        assert htb.read_rate(ns, "mesh0") == 12_000
        qdiscs = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", "mesh0"],
                                capture_output=True, text=True, check=True).stdout
        assert sum(line.startswith("qdisc htb") for line in qdiscs.splitlines()) == 1, qdiscs
    finally:
        htb.clear_rate(ns, "mesh0")
    assert htb.read_rate(ns, "mesh0") is None


# -------------------------------------------------------------------- delay


def udp_rtts(bed: Plan, a: int, b: int, count: int) -> list[float]:
    """Round trips of UDP probes from node a to an echo socket on node b."""
    server = socket_in(node(bed, b).netns, socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((node(bed, b).mesh_ip, 0))
    server.settimeout(5.0)
    client = socket_in(node(bed, a).netns, socket.AF_INET, socket.SOCK_DGRAM)
    client.settimeout(5.0)
    rtts = []
    try:
        for k in range(count + 1):  # the first one also resolves ARP: not counted
            started = time.monotonic()
            client.sendto(k.to_bytes(4, "big"), server.getsockname())
            data, peer = server.recvfrom(64)
            server.sendto(data, peer)
            assert client.recv(64) == data
            if k:
                rtts.append(time.monotonic() - started)
    finally:
        server.close()
        client.close()
    return rtts


def test_per_pair_delay_adds_to_the_round_trip(bed: Plan, medium: Medium) -> None:
    medium.set_links(everyone(5))
    before = udp_rtts(bed, 1, 2, 10)
    medium.start_delay(DelayConfig(0.0, {(1, 2): 0.020, (2, 1): 0.005}))
    try:
        during = udp_rtts(bed, 1, 2, 20)
        other = udp_rtts(bed, 1, 3, 5)  # a pair without delay stays undelayed
    finally:
        stats = medium.stop_delay()
    after = udp_rtts(bed, 1, 2, 5)
    print(f"UDP RTT 1<->2: {min(before) * 1e3:.3f}/{max(before) * 1e3:.3f} ms without delay; "
          f"{min(during) * 1e3:.2f}/{sum(during) / len(during) * 1e3:.2f}/"
          f"{max(during) * 1e3:.2f} ms (min/avg/max) with 20 ms + 5 ms; delayer {stats}")
    assert min(during) >= 0.025  # nothing can come back before both holds end
    assert stats is not None and stats.held == stats.released
    # each direction held for its own delay; nothing else marked (1<->3 has no delay)
    assert set(stats.by_mark) == {20_000, 5_000}
    assert stats.by_mark[20_000] >= 21 and stats.by_mark[5_000] >= 21
    assert len(other) == 5 and len(after) == 5
    chains = subprocess.run(["ip", "netns", "exec", bed.medium_netns, "iptables", "-S"],
                            capture_output=True, text=True, check=True).stdout
    assert "MSUB-DELAY" not in chains
    assert "mark" not in subprocess.run(
        ["ip", "netns", "exec", bed.medium_netns, "nft", "list", "chain", "bridge", nft.TABLE,
         "forward"], capture_output=True, text=True, check=True).stdout


def running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for init counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_delayer_never_outlives_the_process_that_started_it(bed: Plan) -> None:
    """A runner that dies without stop_delay must not leave a delayer running."""
    code = ("import os, sys\n"
            "from meshsim.medium.delay import Delayer\n"
            "d = Delayer(sys.argv[1])\n"
            "d.start()\n"
            "print(d._proc.pid, flush=True)\n"
            "os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code, bed.medium_netns], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    pid = int(out.split()[0])
    try:
        assert wait_for(lambda: not running(pid), limit_s=10.0)
    finally:
        if running(pid):
            os.kill(pid, signal.SIGKILL)
        Delayer(bed.medium_netns).stop()  # the rules the dead runner left


def test_a_delayer_that_cannot_run_says_why_and_leaves_nothing(bed: Plan) -> None:
    broken = Delayer(bed.medium_netns, python="/usr/bin/python3")  # no meshsim there
    with pytest.raises(MediumError, match=r"delayer in msub-mt-medium exited with status 1: "
                                          r".*No module named 'meshsim'"):
        broken.start()
    assert not broken.running
    rules = subprocess.run(["ip", "netns", "exec", bed.medium_netns, "iptables", "-S"],
                           capture_output=True, text=True, check=True).stdout
    assert "MSUB-DELAY" not in rules


def test_remove_leaves_no_table(bed: Plan) -> None:
    m = Medium(bed.medium_netns, testbed.ports(bed))
    m.install()
    assert nft.table_exists(bed.medium_netns)
    assert m.remove() is True
    assert not nft.table_exists(bed.medium_netns)
    assert m.remove() is False
