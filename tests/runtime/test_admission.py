"""Admission before the HMAC: the kernel prefix filter, per-source failure budgets, and
one summary record per interval instead of one per refused frame (issue 25 item 4)."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.api import Message, MessageId
from meshsub.runtime.admission import Admission, attach_filter, prefix_filter, run_filter
from meshsub.wire import FrameCodec, KeyRing
from meshsub.wire.frame import MIN_FRAME_BYTES, VERSION

KEY_IDS = (1, 7)
UDP_HEADER = b"\0" * 8


def python_rule(data: bytes) -> bool:
    return (len(data) >= MIN_FRAME_BYTES and data[0] == VERSION and data[1] in (0, 1)
            and data[2] in KEY_IDS)


@settings(max_examples=400, deadline=None)
@given(st.one_of(
    st.binary(max_size=40),
    st.tuples(st.sampled_from([VERSION, 0, 2, 255]), st.sampled_from([0, 1, 2, 0x81]),
              st.sampled_from([0, 1, 7, 8, 255]), st.binary(max_size=30)).map(
        lambda t: bytes(t[:3]) + t[3]),
))
def test_the_bpf_program_is_the_python_rule(data: bytes) -> None:
    assert run_filter(prefix_filter(KEY_IDS), UDP_HEADER + data) == python_rule(data)
    admission = Admission(KEY_IDS, record=lambda *_: None)
    assert admission.admit(data, "10.0.0.9", 0.0) == python_rule(data)


def test_the_kernel_runs_the_filter() -> None:
    frame = FrameCodec(5, 1, KeyRing.single(b"k" * 32, 7)).encode(
        1, Message(16, MessageId(5, 1, 1), [1]))[0]
    sent = [b"\xffnot ours at all, long enough to pass the length test", frame[:10],
            frame[:2] + b"\x09" + frame[3:], frame]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        rx.bind(("127.0.0.1", 0))
        attach_filter(rx, KEY_IDS)
        for data in sent:
            tx.sendto(data, rx.getsockname())
        rx.settimeout(2.0)
        assert rx.recv(2048) == frame  # only the frame of ours got through
        rx.settimeout(0.2)
        with pytest.raises(TimeoutError):
            rx.recv(2048)


def test_too_many_key_ids_for_one_filter() -> None:
    with pytest.raises(ValueError):
        prefix_filter(range(250))
    assert run_filter(prefix_filter(range(240)), UDP_HEADER + bytes([VERSION, 0, 239]) + b"x" * 30)


def test_failure_budget_per_source_stops_the_hmac_then_refills() -> None:
    records: list[tuple[str, Any]] = []
    adm = Admission(KEY_IDS, record=lambda e, a: records.append((e, a)), fail_rate=10.0,
                    fail_burst=5.0)
    frame = bytes([VERSION, 0, 1]) + b"x" * 40
    for _ in range(5):  # the burst: each verified, each failed
        assert adm.admit(frame, "10.0.0.66", 100.0)
        adm.refused("bad_tag", "10.0.0.66", 100.0)
    assert not adm.admit(frame, "10.0.0.66", 100.0)  # no HMAC for this source now
    assert adm.admit(frame, "10.0.0.2", 100.0)  # another source is not affected
    assert adm.throttled(100.0) == ["10.0.0.66"]
    assert adm.admit(frame, "10.0.0.66", 100.2)  # 0.2 s at 10/s: tries again
    adm.refused("replay", "10.0.0.2", 100.2)  # a replay spends no budget (insider-only)
    assert adm.throttled(100.2) == []
    assert adm.counters["budget"] == 1 and adm.refusals["bad_tag"] == 5


def test_one_summary_record_per_interval_however_many_frames() -> None:
    records: list[tuple[str, Any]] = []
    adm = Admission(KEY_IDS, record=lambda e, a: records.append((e, dict(a))), summary_s=10.0)
    for i in range(10_000):
        t = 1000.0 + i / 1000
        if adm.admit(b"\xffjunk" * 10, "10.0.0.66", t):
            adm.refused("bad_tag", "10.0.0.66", t)
        adm.tick(t)
    adm.tick(1010.0)
    assert records == [("counter", {"reason": "frames_refused", "bytes": 10_000})]
    adm.tick(2000.0)  # nothing refused since: nothing written
    assert len(records) == 1


def test_source_table_is_bounded() -> None:
    adm = Admission(KEY_IDS, record=lambda *_: None, max_sources=50)
    start = time.monotonic()
    for i in range(1000):
        adm.refused("bad_tag", f"10.0.{i // 250}.{i % 250}", start)
    assert adm.status(start)["sources_tracked"] == 50
    assert adm.counters["sources_forgotten"] == 950
