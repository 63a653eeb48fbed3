"""The SQLite state: durability across reopen, bounds, migrations, corrupt files."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from meshsub.core.api import Message, MessageId
from meshsub.core.buffer import BufferEntry, MemoryStore, ScfBuffer
from meshsub.core.syntax import parse_event
from meshsub.runtime.store import (
    DB_NAME,
    SCHEMA_VERSION,
    WAL_LIMIT_BYTES,
    Ingress,
    LocalPublisher,
    OutboxFullError,
    SqliteBufferStore,
    Store,
    StoreError,
    Undelivered,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.in_state_dir(tmp_path)
    yield s
    s.close()


def test_pragmas_and_schema(store: Store) -> None:
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert store.schema_version == SCHEMA_VERSION
    with store.transaction(durable=False) as db:
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL inside
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again
    with pytest.raises(RuntimeError), store.transaction(durable=False):
        raise RuntimeError("rolled back")
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2


def test_epoch_increments_across_reopen(tmp_path: Path) -> None:
    clock = [0.0]
    with Store.in_state_dir(tmp_path, clock=lambda: clock[0]) as s:
        assert s.epoch == 0
        assert s.next_epoch() == 1
        assert s.next_epoch() == 2
    with Store.in_state_dir(tmp_path, clock=lambda: clock[0]) as s:
        assert s.epoch == 2
        assert s.next_epoch() == 3


def test_epoch_is_seeded_from_the_clock_so_lost_state_never_goes_back(tmp_path: Path) -> None:
    """Issue 25 item 3: a re-imaged node (empty state directory) must start above the
    epochs its neighbours saw, or they drop everything it sends as a replay."""
    with Store.in_state_dir(tmp_path / "old", clock=lambda: 1_764_000_000.9) as s:
        first = s.next_epoch()
        assert first == 1_764_000_000 and s.next_epoch() == first + 1  # same second
    with Store.in_state_dir(tmp_path / "reimaged", clock=lambda: 1_764_000_060.0) as s:
        assert s.next_epoch() > first + 1


def test_wal_is_kept_small(store: Store) -> None:
    assert store._db.execute("PRAGMA journal_size_limit").fetchone()[0] == WAL_LIMIT_BYTES
    assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 256


def test_replay_states_roundtrip_full_u64_range_and_stay_bounded(tmp_path: Path) -> None:
    top = 2**64 - 1
    with Store.in_state_dir(tmp_path) as s:
        s.save_replay_states({1: (5, 10, 100.0), 2: (top, top, 50.0)}, limit=10)
        s.save_replay_states({1: (6, 1, 200.0)}, limit=10)
        s.save_replay_states({n: (1, 1, float(n)) for n in range(10, 20)}, limit=3)
    with Store.in_state_dir(tmp_path) as s:
        assert s.replay_states() == {1: (6, 1, 200.0), 2: (top, top, 50.0), 19: (1, 1, 19.0)}
        assert s.disk_bytes() > 0


def test_feed_cursor_survives_reopen(tmp_path: Path) -> None:
    with Store.in_state_dir(tmp_path) as s:
        assert s.feed_cursor() is None
        s.save_feed_cursor(3, 7, 4096)
        s.save_feed_cursor(4, 1, 120)
        assert s.epoch == 0  # the cursor lives beside the epoch, not on it
    with Store.in_state_dir(tmp_path) as s:
        assert s.feed_cursor() == (4, 1, 120)


def test_subscriptions_roundtrip(tmp_path: Path) -> None:
    with Store.in_state_dir(tmp_path) as s:
        s.put_subscription("a", "sensors/# x>1")
        s.put_subscription("b", "t y=2", source="ctl")
        s.put_subscription("a", "sensors/# x>2")  # replaces
        assert s.delete_subscription("zzz") is False
    with Store.in_state_dir(tmp_path) as s:
        assert s.subscriptions() == {"a": "sensors/# x>2", "b": "t y=2"}
        assert s.subscriptions(source="mqtt") == {"a": "sensors/# x>2"}
        assert s.delete_subscription("a") is True
        assert s.subscriptions() == {"b": "t y=2"}


def test_outbox_order_remove_and_ingress(store: Store) -> None:
    ids = [MessageId(7, 1, n) for n in range(1, 4)]
    ing = Ingress(5, b"d" * 16)
    store.outbox_add([(ids[0], "t a=1", ing), (ids[1], "t a=2", None), (ids[2], "t a=3", None)])
    assert [e.event_id for e in store.outbox_pending()] == ids
    assert store.ingress_seen(ing) == ids[0]
    assert store.ingress_seen(Ingress(5, b"x" * 16)) is None
    assert store.outbox_remove(ids[1]) is True
    assert store.outbox_remove(ids[1]) is False
    assert [e.event for e in store.outbox_pending()] == ["t a=1", "t a=3"]
    assert store.outbox_len() == 2


def test_outbox_add_is_atomic(store: Store) -> None:
    mid = MessageId(1, 1, 1)
    store.outbox_add([(mid, "t", None)])
    with pytest.raises(sqlite3.IntegrityError):  # duplicate id in the second batch
        store.outbox_add([(MessageId(1, 1, 2), "t", None), (mid, "t", None)])
    assert store.outbox_len() == 1


def test_origin_states(store: Store) -> None:
    store.save_origin_states({1: (3, 10), 2: (1, 5)})
    store.save_origin_states({1: (4, 0)})
    assert store.origin_states() == {1: (4, 0), 2: (1, 5)}


def test_delivered_cache_is_bounded(tmp_path: Path) -> None:
    with Store.in_state_dir(tmp_path, delivered_capacity=10) as s:
        pairs = [(MessageId(1, 1, n), "s") for n in range(25)]
        s.delivered_add(pairs[:20])
        s.delivered_add(pairs[20:])
        s.delivered_add(pairs[24:])  # already there: ignored
        assert s.delivered_len() == 10
        assert not s.delivered_seen(*pairs[14])
        assert s.delivered_seen(*pairs[15])
        assert s.delivered_seen(*pairs[24])
        assert not s.delivered_seen(MessageId(1, 1, 24), "other")


def _held(n: int, sub: str = "app/s", body: int = 10) -> Undelivered:
    return Undelivered(MessageId(9, 1, n), sub, f"meshsub/deliver/{sub}/t", b"x" * body)


def test_undelivered_deliveries_survive_a_restart_in_order(tmp_path: Path) -> None:
    items = [_held(n) for n in (3, 1, 2)] + [_held(1, "app/other")]
    with Store.in_state_dir(tmp_path) as s:
        assert s.undelivered() == []
        s.undelivered_add(items[:2])
        s.undelivered_add(items[2:])
        s.undelivered_add(items[1:2])  # already kept: neither twice nor moved
    with Store.in_state_dir(tmp_path) as s:
        assert s.undelivered() == items  # queue order, payloads byte for byte
        # acknowledged by the broker: forgotten in the delivered commit, the rest stays
        s.delivered_add([(MessageId(9, 1, 1), "app/s")])
        assert s.undelivered() == [items[0], items[2], items[3]]
        # dropped at the bound: forgotten in the commit that keeps the newcomer
        s.undelivered_add([_held(7)], forget=[(items[0].event_id, items[0].sub_id)])
        assert s.undelivered() == [items[2], items[3], _held(7)]
        s.undelivered_add([], forget=[(u.event_id, u.sub_id) for u in s.undelivered()])
        assert s.undelivered() == []


def test_unreadable_undelivered_rows_are_deleted_and_counted_not_left_outside_the_bound(
        tmp_path: Path) -> None:
    with Store.in_state_dir(tmp_path) as s:
        s.undelivered_add([_held(1), _held(2), _held(3)])
        s._db.execute("UPDATE undelivered SET event_id='not-an-id' WHERE sub_id='app/s' "
                      "AND event_id=?", (str(MessageId(9, 1, 2)),))
        s._db.execute("UPDATE undelivered SET payload='text, not bytes' WHERE event_id=?",
                      (str(MessageId(9, 1, 3)),))
        s._db.commit()
    with Store.in_state_dir(tmp_path) as s:
        assert s.undelivered() == [_held(1)] and s.undelivered_unreadable == 2
        rows = s._db.execute("SELECT COUNT(*) FROM undelivered").fetchone()[0]
        assert rows == 1  # deleted, so they hold no room the owner cannot free
        assert s.undelivered() == [_held(1)] and s.undelivered_unreadable == 2


def test_a_batch_is_one_commit_and_undone_together(store: Store) -> None:
    """The node's batch: the buffer's mark and the kept delivery commit together, a
    failing block is undone alone, and a batch that ends in an exception leaves nothing."""
    buf = store.buffer()
    commits = store.commits
    with store.batch():
        buf.put(MessageId(9, 1, 1), [1, "a"])
        store.undelivered_add([_held(1)])
        with pytest.raises(ZeroDivisionError), store.transaction(durable=False) as db:
            db.execute("DELETE FROM undelivered")
            raise ZeroDivisionError
        assert store.undelivered() == [_held(1)]  # the block alone was undone
    assert store.commits == commits + 1
    assert store.undelivered() == [_held(1)] and len(buf) == 1
    with pytest.raises(RuntimeError), store.batch():
        buf.put(MessageId(9, 1, 2), [1, "b"])
        store.undelivered_add([_held(2)])
        raise RuntimeError
    assert store.undelivered() == [_held(1)] and len(buf) == 1
    with store.batch():  # nothing written: no transaction at all
        assert store.undelivered() == [_held(1)]
    assert store.commits == commits + 1
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again


def test_a_durable_block_in_a_batch_commits_it_at_once(tmp_path: Path) -> None:
    """A promise made inside a batch (a subscription) is committed when its block ends,
    with everything the batch wrote before it; the rest commits at the batch's end."""
    with Store.in_state_dir(tmp_path) as s:
        with s.batch():
            s.undelivered_add([_held(1)])
            s.put_subscription("a", "t")
            with Store.in_state_dir(tmp_path) as other:  # another connection sees it
                assert other.subscriptions() == {"a": "t"}
                assert other.undelivered() == [_held(1)]
            s.undelivered_add([_held(2)])
        assert s.undelivered() == [_held(1), _held(2)]


def test_a_batch_survives_sigkill_after_it_ends(tmp_path: Path) -> None:
    """A child marks an event seen and keeps its delivery in one batch, then is
    SIGKILLed at once (nothing flushed, no close): both are there after."""
    script = textwrap.dedent(f"""
        import os, signal
        from meshsub.core.api import MessageId
        from meshsub.runtime.store import Store, Undelivered
        s = Store.in_state_dir({str(tmp_path)!r})
        with s.batch():
            s.buffer().put(MessageId(9, 1, 1), [1, "a"])
            s.undelivered_add([Undelivered(MessageId(9, 1, 1), "app/s", "t", b"x")])
        with s.batch():  # an open batch dies with the process: nothing of it
            s.buffer().put(MessageId(9, 1, 2), [1, "b"])
            s.undelivered_add([Undelivered(MessageId(9, 1, 2), "app/s", "t", b"y")])
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert proc.returncode == -9, proc.stderr
    with Store.in_state_dir(tmp_path) as s:
        assert s.undelivered() == [Undelivered(MessageId(9, 1, 1), "app/s", "t", b"x")]
        assert [k for k, _ in s.buffer().iterate()] == [MessageId(9, 1, 1)]


def test_a_version_2_database_gains_the_undelivered_table(tmp_path: Path) -> None:
    with Store.in_state_dir(tmp_path) as s:
        s.put_subscription("a", "t")
        s._db.executescript("DROP TABLE undelivered; PRAGMA user_version=2;")
    with Store.in_state_dir(tmp_path) as s:
        assert s.schema_version == SCHEMA_VERSION == 3
        assert s.subscriptions() == {"a": "t"}
        s.undelivered_add([_held(1)])
        assert s.undelivered() == [_held(1)]


def test_buffer_store_follows_the_protocol(store: Store) -> None:
    buf = store.buffer()
    mem = MemoryStore()
    for target in (buf, mem):
        target.put(MessageId(1, 1, 1), [1, "a"])
        target.put(MessageId(1, 1, 2), [2, b"\x00"])
        target.put(MessageId(1, 1, 1), [3])  # re-put moves to the end
        assert target.delete(MessageId(9, 9, 9)) is False
    assert list(buf.iterate()) == list(mem.iterate())
    assert buf.get(MessageId(1, 1, 1)) == [3]
    assert buf.get(MessageId(5, 5, 5)) is None
    assert len(buf) == 2
    assert buf.delete(MessageId(1, 1, 2)) is True
    assert len(buf) == 1
    with pytest.raises(TypeError):
        buf.put(MessageId(1, 1, 3), [object()])


def test_scf_buffer_survives_reopen(tmp_path: Path) -> None:
    msg = Message(type=20, id=MessageId(3, 1, 9), body={"k": [1, 2]}, hop=2, ttl=5)
    with Store.in_state_dir(tmp_path) as s:
        buffer = ScfBuffer(4, store=s.buffer())
        assert buffer.add(msg, now=1.0, expires_at=100.0)[0]
    with Store.in_state_dir(tmp_path) as s:
        again = ScfBuffer(4, store=s.buffer())
        assert again.entry(msg.id) == BufferEntry(msg, 1.0, 100.0)


def test_buffer_store_skips_corrupt_values(store: Store) -> None:
    store._db.execute("INSERT INTO buffer (key, value, ord) VALUES ('1-1-1', x'c1', 1)")
    store._db.execute("INSERT INTO buffer (key, value, ord) VALUES ('garbage', x'90', 2)")
    buf = SqliteBufferStore(store)
    assert list(buf.iterate()) == []
    assert buf.corrupt == 2


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / DB_NAME).write_bytes(b"this is not a database, it is a text file " * 200)
    with pytest.raises(StoreError, match=r"unreadable|corrupt") as info:
        Store.in_state_dir(tmp_path)
    assert "\n" not in str(info.value)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    with Store.in_state_dir(tmp_path) as s:
        s._db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer"):
        Store.in_state_dir(tmp_path)


def test_unusable_state_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="state directory"):
        Store.in_state_dir(blocker / "sub")


class _Feed:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.got: list[tuple[str, MessageId]] = []

    def __call__(self, event: object, event_id: MessageId) -> None:
        if self.fail:
            raise RuntimeError("node broke")
        self.got.append((str(event), event_id))


def _ids(epoch: int) -> object:
    seq = iter(range(1, 1000))
    return lambda: MessageId(42, epoch, next(seq))


def test_publisher_feeds_then_forgets(store: Store) -> None:
    feed = _Feed()
    pub = LocalPublisher(store, _ids(1), feed)  # type: ignore[arg-type]
    event_id = pub.publish(parse_event("t a=1"))
    assert event_id == MessageId(42, 1, 1)
    assert [i for _, i in feed.got] == [event_id]
    assert store.outbox_len() == 0


def test_publisher_keeps_unfed_events_and_refeeds_after_restart(tmp_path: Path) -> None:
    with Store.in_state_dir(tmp_path) as s:
        pub = LocalPublisher(s, _ids(1), _Feed(fail=True))  # type: ignore[arg-type]
        first = pub.publish(parse_event("t a=1"))
        pub.persist([(parse_event("t a=2"), None)])
        assert pub.feed_errors == 1
        assert s.outbox_len() == 2
    with Store.in_state_dir(tmp_path) as s:
        feed = _Feed()
        pub = LocalPublisher(s, _ids(2), feed)  # type: ignore[arg-type]
        assert pub.refeed_pending() == 2
        assert feed.got[0][1] == first  # the original id, so receivers dedupe resends
        assert s.outbox_len() == 0


def test_publisher_outbox_limit(store: Store) -> None:
    pub = LocalPublisher(store, _ids(1), _Feed(fail=True), limit=2)  # type: ignore[arg-type]
    pub.persist([(parse_event("t a=1"), None), (parse_event("t a=2"), None)])
    with pytest.raises(OutboxFullError):
        pub.persist([(parse_event("t a=3"), None)])
    assert store.outbox_len() == 2


def test_outbox_survives_sigkill(tmp_path: Path) -> None:
    """A child persists an event and is SIGKILLed at once; the entry is there after."""
    script = textwrap.dedent(f"""
        import os, signal
        from meshsub.core.api import MessageId
        from meshsub.runtime.store import Store
        s = Store.in_state_dir({str(tmp_path)!r})
        s.outbox_add([(MessageId(1, 1, 1), "t a=1", None)])
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert proc.returncode == -9, proc.stderr
    with Store.in_state_dir(tmp_path) as s:
        assert [e.event for e in s.outbox_pending()] == ["t a=1"]


def test_feed_many_keeps_only_the_failed(store: Store) -> None:
    got: list[MessageId] = []

    def feed(event: object, event_id: MessageId) -> None:
        if event_id.seq == 2:
            raise RuntimeError("protocol refused")
        got.append(event_id)

    pub = LocalPublisher(store, _ids(1), feed)  # type: ignore[arg-type]
    events = [parse_event(f"t a={n}") for n in range(3)]
    ids = pub.persist([(e, None) for e in events])
    assert pub.feed_many(list(zip(events, ids, strict=True))) == 2
    assert got == [ids[0], ids[2]]
    assert [e.event_id for e in store.outbox_pending()] == [ids[1]]
    assert (pub.fed, pub.feed_errors) == (2, 1)


def test_state_on_disk_stays_within_the_buffer_cap(tmp_path: Path) -> None:
    """Issue 25 item 2: the victim's SQLite grew to 58.8 MB + 4.2 MB WAL under junk. The
    byte cap bounds the buffer table, the WAL is checkpointed at ~1 MB and truncated."""
    cap = 2_000_000
    with Store.in_state_dir(tmp_path) as s:
        buf = ScfBuffer(1000, store=s.buffer(), max_bytes=cap, origin_share=1.0)
        for seq in range(150):  # 15 MB offered
            buf.add(Message(16, MessageId(9, 1, seq), [b"j" * 100_000]), float(seq), 1e12)
        assert buf.bytes <= cap and len(s.buffer()) == len(buf)
        assert s.disk_bytes() <= cap + 2 * WAL_LIMIT_BYTES


def test_a_buffer_on_disk_keeps_the_bodies_out_of_memory(tmp_path: Path) -> None:
    """Issue 25 item 2: a victim's RSS went 45.0 -> 66.8 MB under an insider's junk, most
    of it the 16 MB of decoded bodies the buffer's index kept beside the SQLite copy. On
    the SQLite store the index holds no body: the Python heap grows by the index only,
    and every body comes back intact when a protocol asks for it."""
    import gc
    import tracemalloc

    import msgpack

    def fresh(seq: int) -> list[str]:  # decoded from the wire: objects of its own
        return list(msgpack.unpackb(msgpack.packb([f"{seq}:{i}" + "x" * 1000
                                                   for i in range(50)])))

    with Store.in_state_dir(tmp_path) as s:
        buf = ScfBuffer(1000, store=s.buffer(), max_bytes=16_000_000, origin_share=1.0)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for seq in range(120):  # 6 MB of bodies
                buf.add(Message(16, MessageId(9, 1, seq), fresh(seq)), 0.0, 100.0)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert len(buf) == 120 and buf.bytes > 6_000_000
        assert grown < 600_000, f"the index grew the heap by {grown} bytes"
        assert buf.get(MessageId(9, 1, 7)) == Message(16, MessageId(9, 1, 7), fresh(7))
        assert [m.body for m in buf][119] == fresh(119)
        # bookkeeping changes keep the stored body
        buf2 = ScfBuffer(1000, store=s.buffer(), max_bytes=16_000_000, local=9,
                         max_lifetime=10.0)
        assert buf2.expire(1.0) == [] and buf2.handed_on(MessageId(9, 1, 3))
        entry = buf2.entry(MessageId(9, 1, 3))
        assert entry is not None and entry.handed_on and entry.expires_at == 11.0
        assert entry.message.body == fresh(3)
        # a body lost from the database is a counted drop, never a body-less message
        s._db.execute("DELETE FROM buffer WHERE key=?", (str(MessageId(9, 1, 5)),))
        assert buf2.get(MessageId(9, 1, 5)) is None and buf2.corrupt == 1
        assert len(buf2) == 119


def test_the_log_is_checkpointed_from_another_thread_and_restarts(store: Store) -> None:
    """The node checkpoints in a worker thread (its own connection), so SQLite's own
    checkpoint, two fsyncs in the committing thread (the event loop), is not reached."""
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(1) as worker:
        for i in range(30):
            store.put_subscription(f"s{i}", "a/b x=1")
        busy, frames, done = worker.submit(store.checkpoint_wal).result()
        assert busy == 0 and frames == done > 0
        store.put_subscription("next", "a/b x=2")  # the next writer starts the log again
        assert worker.submit(store.checkpoint_wal).result()[1] < frames
    assert store.commits >= 31
    assert store.subscriptions()["next"] == "a/b x=2"
