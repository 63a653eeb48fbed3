"""batman mode: recorded batctl JSON (this kernel has no batman-adv) -> one-hop candidates."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from meshsub.runtime.batman import (
    BatctlError,
    BatmanCandidate,
    BatmanPoller,
    candidate_addresses,
    eui64_link_local,
    one_hop_candidates,
    parse_dat_cache,
    parse_neighbors,
    parse_originators,
    parse_translation_global,
    run_batctl,
)

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_parse_neighbors_fields() -> None:
    rows = parse_neighbors(fixture("batctl_nj.json"))
    assert [r.address for r in rows] == ["02:aa:00:00:00:01", "02:bb:00:00:00:02",
                                         "02:dd:00:00:00:04"]
    assert rows[0].hard_ifname == "mesh0" and rows[0].last_seen_ms == 708
    assert rows[0].throughput_kbps is None
    v = parse_neighbors(fixture("batctl_v_nj.json"))
    assert v[0].throughput_kbps == 24000


def test_parse_originators_best_and_tq() -> None:
    rows = parse_originators(fixture("batctl_oj.json"))
    assert len(rows) == 5
    best_a = [r for r in rows if r.originator == "02:aa:00:00:00:01" and r.best]
    assert len(best_a) == 1 and best_a[0].tq == 251 and best_a[0].next_hop == best_a[0].originator
    assert sum(1 for r in rows if not r.best) == 1


def test_translation_skips_multicast_and_non_best() -> None:
    tt = parse_translation_global(fixture("batctl_tgj.json"))
    assert tt["02:aa:00:00:00:01"] == {"3e:aa:94:68:80:01"}  # 33:33:... is a multicast entry
    assert tt["02:bb:00:00:00:02"] == {"3e:bb:94:68:80:02"}
    assert tt["02:cc:00:00:00:03"] == {"3e:cc:94:68:80:03"}  # the roaming non-best dropped


def test_dat_cache_counts_bad_rows() -> None:
    counters: Counter[str] = Counter()
    dat = parse_dat_cache(fixture("batctl_dcj.json"), counters)
    assert dat == {"3e:aa:94:68:80:01": "10.42.0.1", "3e:cc:94:68:80:03": "10.42.0.3"}
    assert counters["bad_dat_row"] == 1


def test_eui64_link_local() -> None:
    # RFC 4291 appendix A: flip the universal/local bit, insert ff:fe
    assert eui64_link_local("3e:aa:94:68:80:01") == "fe80::3caa:94ff:fe68:8001"
    assert eui64_link_local("00:11:22:33:44:55") == "fe80::211:22ff:fe33:4455"


def candidates(family: str) -> list[BatmanCandidate]:
    return one_hop_candidates(
        parse_neighbors(fixture("batctl_nj.json")),
        parse_originators(fixture("batctl_oj.json")),
        parse_translation_global(fixture("batctl_tgj.json")),
        parse_dat_cache(fixture("batctl_dcj.json")),
        family=family,
    )


def test_one_hop_candidates_ipv4() -> None:
    got = candidates("ipv4")
    # C is two hops (via A); D is stale (96 s) -> only A and B are one hop away
    assert [c.originator for c in got] == ["02:aa:00:00:00:01", "02:bb:00:00:00:02"]
    a, b = got
    assert a.addresses == ("10.42.0.1",) and a.tq == 251
    assert a.link_quality == pytest.approx(251 / 255)
    assert b.addresses == ()  # not yet in the distributed ARP table: unresolved


def test_candidate_addresses_for_discovery_and_link() -> None:
    assert candidate_addresses(candidates("ipv4"), 4790) == [("10.42.0.1", 4790)]
    assert candidate_addresses(candidates("ipv6"), 4790) == [
        ("fe80::3caa:94ff:fe68:8001", 4790), ("fe80::3cbb:94ff:fe68:8002", 4790)]


def test_one_hop_candidates_ipv6() -> None:
    got = candidates("ipv6")
    assert [c.addresses for c in got] == [("fe80::3caa:94ff:fe68:8001",),
                                         ("fe80::3cbb:94ff:fe68:8002",)]


def test_batman_v_throughput() -> None:
    got = one_hop_candidates(parse_neighbors(fixture("batctl_v_nj.json")),
                             parse_originators(fixture("batctl_v_oj.json")), {}, {})
    assert [(c.originator, c.throughput_kbps, c.tq) for c in got] == [
        ("02:aa:00:00:00:01", 24000, None), ("02:bb:00:00:00:02", 16100, None)]


@pytest.mark.parametrize("text", ["", "{}", "not json", '{"a": 1}'])
def test_bad_output_is_a_clear_error(text: str) -> None:
    with pytest.raises(BatctlError, match="neighbors_json"):
        parse_neighbors(text)


def test_malformed_rows_are_counted_not_fatal() -> None:
    counters: Counter[str] = Counter()
    rows = parse_originators('[1, {"orig_address": "zz"}, {"orig_address": "02:aa:00:00:00:01",'
                             ' "neigh_address": "02:aa:00:00:00:01", "last_seen_msecs": 5,'
                             ' "tq": 999, "best": true}]', counters)
    assert counters["bad_originator_row"] == 2
    assert len(rows) == 1 and rows[0].tq is None  # tq out of 0..255 is ignored


async def test_poller_with_recorded_outputs() -> None:
    calls: list[list[str]] = []
    files = {"neighbors_json": "batctl_nj.json", "originators_json": "batctl_oj.json",
             "transtable_global_json": "batctl_tgj.json", "dat_cache_json": "batctl_dcj.json"}

    async def runner(args: list[str]) -> str:
        calls.append(args)
        return fixture(files[args[-1]])

    got: list[list[BatmanCandidate]] = []
    poller = BatmanPoller(mesh_interface="bat0", interval=60, on_candidates=got.append,
                          runner=runner)
    await poller.start()
    for _ in range(100):
        if got:
            break
        await asyncio.sleep(0.01)
    await poller.stop()
    assert calls[0] == ["batctl", "meshif", "bat0", "neighbors_json"]
    assert [c.originator for c in got[0]] == ["02:aa:00:00:00:01", "02:bb:00:00:00:02"]
    status = poller.status()
    assert status["counters"]["unresolved"] == 1 and status["last_error"] is None


async def test_poller_reports_batctl_failure() -> None:
    async def runner(args: list[str]) -> str:
        raise BatctlError("batctl not found: install batctl (apt install batctl)")

    poller = BatmanPoller(on_candidates=lambda c: None, runner=runner)
    with pytest.raises(BatctlError):
        await poller.poll_once()
    await poller.start()
    for _ in range(100):
        if poller.counters["errors"]:
            break
        await asyncio.sleep(0.01)
    await poller.stop()
    assert "not found" in (poller.last_error or "")


async def test_run_batctl_missing_binary_and_failure() -> None:
    with pytest.raises(BatctlError, match="not found"):
        await run_batctl(["msub-no-such-batctl", "meshif", "bat0", "nj"])
    with pytest.raises(BatctlError, match="exit 3"):
        await run_batctl(["sh", "-c", "echo 'Error - mesh iface not found' >&2; exit 3"])
    assert await run_batctl(["echo", "[]"]) == "[]\n"
