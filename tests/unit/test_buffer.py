"""The store-carry-forward buffer: bounds, expiry, eviction policies, plain forms."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.api import Message, MessageId
from meshsub.core.buffer import (
    BufferEntry,
    BufferFormatError,
    BufferStore,
    DropPolicy,
    MemoryStore,
    ScfBuffer,
    entry_size,
    message_from_obj,
    message_to_obj,
)


def msg(seq: int, body: Any = None) -> Message:
    return Message(16, MessageId(1, 0, seq), body if body is not None else [seq])


def test_memory_store_is_a_buffer_store() -> None:
    store: BufferStore = MemoryStore()
    store.put(MessageId(1, 0, 1), [1])
    store.put(MessageId(1, 0, 2), [2])
    store.put(MessageId(1, 0, 1), [3])  # re-put moves to the end
    assert [k.seq for k, _ in store.iterate()] == [2, 1]
    assert store.get(MessageId(1, 0, 1)) == [3] and len(store) == 2
    assert store.delete(MessageId(1, 0, 1)) and not store.delete(MessageId(1, 0, 1))


def test_add_lookup_iterate_summary() -> None:
    buf = ScfBuffer(10)
    assert buf.add(msg(1), 0.0, 100.0) == (True, [])
    assert buf.add(msg(2), 1.0, 50.0) == (True, [])
    assert buf.add(msg(1), 2.0, 100.0) == (False, [])  # already held
    assert buf.get(MessageId(1, 0, 1)) == msg(1) and buf.get(MessageId(9, 0, 9)) is None
    assert MessageId(1, 0, 2) in buf and len(buf) == 2
    assert [m.id.seq for m in buf] == [1, 2]
    assert buf.summary_vector() == frozenset({MessageId(1, 0, 1), MessageId(1, 0, 2)})
    assert buf.next_expiry() == 50.0
    assert buf.discard(MessageId(1, 0, 2)) and not buf.discard(MessageId(1, 0, 2))
    assert buf.next_expiry() == 100.0


def test_expiry_is_reported_with_reason() -> None:
    buf = ScfBuffer(10)
    buf.add(msg(1), 0.0, 5.0)
    buf.add(msg(2), 0.0, 10.0)
    assert buf.expire(4.9) == []
    (gone,) = buf.expire(5.0)
    assert gone.reason == "expired" and gone.entry.message == msg(1)
    stored, dropped = buf.add(msg(3), 11.0, 20.0)  # add purges expired entries first
    assert stored and [d.entry.message.id.seq for d in dropped] == [2]
    stored, dropped = buf.add(msg(4), 11.0, 11.0)  # dead on arrival
    assert not stored and [d.reason for d in dropped] == ["expired"]
    assert buf.next_expiry() == 20.0


def test_drop_oldest() -> None:
    buf = ScfBuffer(2, DropPolicy.DROP_OLDEST)
    buf.add(msg(1), 0.0, 100.0)
    buf.add(msg(2), 1.0, 10.0)
    stored, dropped = buf.add(msg(3), 2.0, 50.0)
    assert stored and [(d.entry.message.id.seq, d.reason) for d in dropped] == [(1, "buffer_full")]
    assert [m.id.seq for m in buf] == [2, 3]


def test_drop_expiring() -> None:
    buf = ScfBuffer(2, DropPolicy.DROP_EXPIRING)
    buf.add(msg(1), 0.0, 100.0)
    buf.add(msg(2), 1.0, 10.0)
    stored, dropped = buf.add(msg(3), 2.0, 50.0)
    assert stored and [d.entry.message.id.seq for d in dropped] == [2]
    stored, dropped = buf.add(msg(4), 3.0, 20.0)  # the newcomer expires first: refused
    assert not stored and [d.entry.message.id.seq for d in dropped] == [4]
    assert {m.id.seq for m in buf} == {1, 3}


def test_drop_expiring_ties_go_to_the_oldest() -> None:
    buf = ScfBuffer(2, DropPolicy.DROP_EXPIRING)
    buf.add(msg(1), 0.0, 10.0)
    buf.add(msg(2), 1.0, 10.0)
    _, dropped = buf.add(msg(3), 2.0, 10.0)
    assert [d.entry.message.id.seq for d in dropped] == [1]


def test_drop_new() -> None:
    buf = ScfBuffer(1, DropPolicy.DROP_NEW)
    buf.add(msg(1), 0.0, 100.0)
    stored, dropped = buf.add(msg(2), 0.0, 100.0)
    assert not stored and [(d.entry.message.id.seq, d.reason) for d in dropped] == [
        (2, "buffer_full")]


def test_bad_construction() -> None:
    with pytest.raises(ValueError):
        ScfBuffer(0)
    with pytest.raises(ValueError):
        ScfBuffer(1, "random")  # type: ignore[arg-type]


def test_write_through_and_reload_from_store() -> None:
    store = MemoryStore()
    buf = ScfBuffer(5, store=store)
    buf.add(msg(1, {"k": [1, 2]}), 0.0, 100.0)
    buf.add(msg(2), 0.0, 30.0)
    buf.discard(MessageId(1, 0, 2))
    assert len(store) == 1
    store.put(MessageId(7, 0, 7), ["garbage"])
    store.put(MessageId(8, 0, 8), BufferEntry(msg(9), 0.0, 1.0).to_obj())  # key mismatch
    again = ScfBuffer(5, store=store)
    assert [m for m in again] == [msg(1, {"k": [1, 2]})]
    assert again.corrupt == 2 and len(store) == 1
    assert again.entries()[0] == BufferEntry(msg(1, {"k": [1, 2]}), 0.0, 100.0)


def test_heap_stays_bounded_under_churn() -> None:
    buf = ScfBuffer(4)
    for i in range(2000):
        buf.add(msg(i), float(i), float(i) + 1000.0)
    assert len(buf) == 4 and len(buf._expiry) <= 2 * 4 + 64 + 1
    assert buf.next_expiry() == 1996.0 + 1000.0


def test_message_plain_form_round_trip() -> None:
    m = Message(17, MessageId(2**32 - 1, 5, 2**40), [b"x", {"a": 1.5}], hop=3, ttl=9, flags=1,
                reliable_id=77)
    obj = msgpack.unpackb(msgpack.packb(message_to_obj(m)), strict_map_key=False)
    assert message_from_obj(obj) == m


@pytest.mark.parametrize("obj", [
    None, [], [16, [1, 0, 1], None, 0, 255, 0], [16, [1, 0], None, 0, 255, 0, None],
    [16, [1, 0, -1], None, 0, 255, 0, None], [True, [1, 0, 1], None, 0, 255, 0, None],
    [16, [2**32, 0, 1], None, 0, 255, 0, None], [16, [1, 0, 1], None, 0, 255, 0, "r"],
    [16, [1, 0, 1], None, 0, 2**16, 0, None],
])
def test_message_from_obj_rejects(obj: Any) -> None:
    with pytest.raises(BufferFormatError):
        message_from_obj(obj)


@pytest.mark.parametrize("obj", [None, [1, 2], [[16, [1, 0, 1], None, 0, 1, 0, None], "t", 1.0],
                                 [[16, [1, 0, 1], None, 0, 1, 0, None], 0.0, float("nan")]])
def test_entry_from_obj_rejects(obj: Any) -> None:
    with pytest.raises(BufferFormatError):
        BufferEntry.from_obj(obj)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(DropPolicy)), st.integers(1, 6),
       st.lists(st.tuples(st.integers(0, 30), st.floats(0.5, 20.0)), max_size=40))
def test_invariants_under_random_operations(policy: DropPolicy, capacity: int,
                                            ops: list[tuple[int, float]]) -> None:
    """Never over capacity, never holds an expired message, every loss is reported."""
    buf = ScfBuffer(capacity, policy)
    now = 0.0
    for seq, life in ops:
        now += 0.5
        before = buf.summary_vector()
        stored, dropped = buf.add(msg(seq), now, now + life)
        after = buf.summary_vector()
        reported = {d.entry.message.id for d in dropped}
        assert before - after <= reported  # whatever left was reported
        if not stored:  # already held, or reported as dropped
            assert msg(seq).id in after or msg(seq).id in reported
        assert len(after) <= capacity
        assert all(e.expires_at > now for e in buf.entries())
        assert {d.reason for d in dropped} <= {"expired", "buffer_full"}
        if any(d.reason == "buffer_full" for d in dropped):
            assert len(after) == capacity


# ---------------------------------------------------------------- limits (issue 25)


def own(seq: int, size: int = 10) -> Message:
    return Message(16, MessageId(1, 0, seq), [b"o" * size])


def remote(origin: int, seq: int, size: int = 10) -> Message:
    return Message(16, MessageId(origin, 0, seq), [b"r" * size])


def test_byte_cap_evicts_as_many_as_needed_and_refuses_the_too_large() -> None:
    size = entry_size(BufferEntry(remote(2, 0, 1000), 0.0, 10.0).to_obj())
    buf = ScfBuffer(100, max_bytes=3 * size, origin_share=1.0)
    for seq in range(3):
        assert buf.add(remote(2, seq, 1000), 0.0, 10.0)[0]
    stored, dropped = buf.add(remote(3, 9, 2000), 1.0, 10.0)  # needs two entries' room
    assert stored and [d.entry.message.id.seq for d in dropped] == [0, 1]
    assert buf.bytes <= buf.max_bytes and buf.bytes == sum(
        entry_size(e.to_obj()) for e in buf.entries())
    stored, dropped = buf.add(remote(3, 10, 4000), 1.0, 10.0)
    assert not stored and [d.reason for d in dropped] == ["too_large"]


def test_remaining_lifetime_is_capped_on_arrival() -> None:
    buf = ScfBuffer(10, max_lifetime=60.0)
    buf.add(remote(2, 1), 100.0, 1e12)
    assert buf.entries()[0].expires_at == 160.0 and buf.next_expiry() == 160.0


def test_own_events_are_never_evicted_for_remote_ones() -> None:
    buf = ScfBuffer(3, local=1)
    for seq in range(2):
        buf.add(own(seq), 0.0, 100.0)
    buf.add(remote(2, 0), 1.0, 100.0)
    stored, dropped = buf.add(remote(3, 0), 2.0, 100.0)  # the remote one makes room
    assert stored and [d.entry.message.id for d in dropped] == [MessageId(2, 0, 0)]
    stored, dropped = buf.add(remote(4, 0), 3.0, 100.0)
    assert stored and [d.entry.message.id for d in dropped] == [MessageId(3, 0, 0)]
    buf.add(own(2), 4.0, 100.0)  # an own event takes the remote one's place
    stored, dropped = buf.add(remote(5, 0), 5.0, 100.0)  # full of unacknowledged own events
    assert not stored and [d.reason for d in dropped] == ["buffer_refused"]
    assert buf.handed_on(MessageId(1, 0, 0)) and not buf.handed_on(MessageId(1, 0, 0))
    stored, dropped = buf.add(remote(5, 0), 6.0, 100.0)  # a handed-on one may go now
    assert stored and [d.entry.message.id for d in dropped] == [MessageId(1, 0, 0)]
    stored, dropped = buf.add(own(3), 7.0, 100.0)  # own for own: by policy
    assert stored and [d.entry.message.id for d in dropped] == [MessageId(5, 0, 0)]


def test_an_origin_over_its_share_pays_first_when_full() -> None:
    buf = ScfBuffer(8, origin_share=0.25)  # two messages per origin when full
    for seq in range(6):
        buf.add(remote(9, seq), float(seq), 100.0)  # one origin fills most of it
    buf.add(remote(2, 0), 6.0, 100.0)
    buf.add(remote(3, 0), 7.0, 100.0)
    stored, dropped = buf.add(remote(4, 0), 8.0, 100.0)
    assert stored and [d.entry.message.id for d in dropped] == [MessageId(9, 0, 0)]
    stored, dropped = buf.add(remote(9, 99), 9.0, 100.0)  # the hog replaces its own
    assert stored and [d.entry.message.id for d in dropped] == [MessageId(9, 0, 1)]


def test_handed_on_survives_a_rewrite_and_a_reload() -> None:
    store = MemoryStore()
    buf = ScfBuffer(5, store=store, local=1)
    buf.add(own(1), 0.0, 100.0)
    buf.handed_on(MessageId(1, 0, 1))
    buf.discard(MessageId(1, 0, 1))  # a protocol rewriting its bookkeeping
    buf.add(own(1, 11), 1.0, 100.0)
    assert not buf.protected(MessageId(1, 0, 1))
    again = ScfBuffer(5, store=store, local=1)
    assert again.entries()[0].handed_on and not again.protected(MessageId(1, 0, 1))


def test_a_reloaded_store_is_brought_within_todays_limits() -> None:
    store = MemoryStore()
    old = ScfBuffer(10, store=store, local=1)
    old.add(own(1), 0.0, 1e12)
    for seq in range(5):
        old.add(remote(2, seq), 0.0, 1e12)
    new = ScfBuffer(3, store=store, local=1, max_lifetime=60.0, origin_share=1.0)
    assert len(new) == 6  # as stored, until the first clock reading
    dropped = new.expire(10.0)
    assert [d.entry.message.id.seq for d in dropped] == [0, 1, 2]
    assert MessageId(1, 0, 1) in new and len(new) == 3 and len(store) == 3
    assert all(e.expires_at == 70.0 for e in new.entries())
