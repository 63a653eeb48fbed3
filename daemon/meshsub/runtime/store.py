"""Durable node state in one SQLite file in the state directory.

What lives here is what must survive a restart (or a SIGKILL, or a pulled
power plug): local subscriptions, the outbox of accepted local publications,
the boot epoch, per-origin sequence state, the replay state of every
transmitter heard (so a frame captured before a restart is still a replay
after it), the delivered-ids cache, the deliveries to local MQTT subscribers the broker has
not acknowledged yet (``undelivered``), the store-carry-forward buffer, and how far
the broker acknowledged the live telemetry feed.

Size: every table is bounded by its owner (the buffer by its byte cap, the
replay table by its transmitter limit, the delivered cache by its capacity, the
undelivered deliveries by the MQTT bridge's entries and bytes),
and the write-ahead log is checkpointed every ``WAL_CHECKPOINT_PAGES`` pages
and truncated to ``WAL_LIMIT_BYTES``, so the files stay within those bounds.

Durability: WAL journal. Commits that make a promise are fsynced
(``synchronous=FULL``): accepted publications (the outbox: "an event the broker
saw acknowledged is not lost" must hold across a pulled plug, and a Pi in the
field loses power), subscriptions and the boot epoch (a reused epoch would
reuse message ids). Bookkeeping that follows such a commit (outbox removal,
delivered ids, origin state, the buffer) uses ``NORMAL``: it survives a
process crash, and a power cut loses at most the newest of it, which costs a
re-feed or a duplicate, never an event; and the event loop does not wait for
the disk on every buffer update. Callers batch (one commit per MQTT batch; the
node's ``batch``: one per protocol input or drain of the link's socket).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from meshsub.core.api import MessageId
from meshsub.core.buffer import StoredValue
from meshsub.core.content import Event
from meshsub.core.syntax import format_event, parse_event
from meshsub.wire.replay import ReplayWindow

DB_NAME = "meshsub.db"
SCHEMA_VERSION = 3
WAL_CHECKPOINT_PAGES = 256
"""Checkpoint the write-ahead log at about 1 MB (SQLite's default is 4 MB)."""
WAL_LIMIT_BYTES = 1_048_576
"""Truncate the write-ahead log to this size after a checkpoint (SQLite keeps it)."""
_U64_HALF = 1 << 63

# Each entry migrates from version (index) to version (index + 1).
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
    CREATE TABLE subscriptions (
        sub_id TEXT PRIMARY KEY,
        expression TEXT NOT NULL,
        source TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE TABLE outbox (
        ord INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL UNIQUE,
        event TEXT NOT NULL,
        accepted REAL NOT NULL
    );
    CREATE TABLE ingress (
        mid INTEGER PRIMARY KEY,
        digest BLOB NOT NULL,
        event_id TEXT NOT NULL
    );
    CREATE TABLE origins (
        origin INTEGER PRIMARY KEY,
        epoch INTEGER NOT NULL,
        seq INTEGER NOT NULL
    );
    CREATE TABLE delivered (
        ord INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL,
        sub_id TEXT NOT NULL,
        UNIQUE (event_id, sub_id)
    );
    CREATE TABLE buffer (
        key TEXT PRIMARY KEY,
        value BLOB NOT NULL,
        ord INTEGER NOT NULL
    );
    """,
    """
    CREATE TABLE replay (
        transmitter INTEGER PRIMARY KEY,
        epoch INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        heard REAL NOT NULL
    );
    """,
    """
    CREATE TABLE undelivered (
        ord INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL,
        sub_id TEXT NOT NULL,
        topic TEXT NOT NULL,
        payload BLOB NOT NULL,
        UNIQUE (event_id, sub_id)
    );
    """,
)


class StoreError(Exception):
    """The state database cannot be used; the message is one line for operators."""


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An accepted local publication not yet handed to the protocol."""

    event_id: MessageId
    event: str
    """The event in the core text syntax (``format_event``)."""
    accepted: float
    """Wall-clock time the daemon accepted it (seconds since the epoch)."""


@dataclass(frozen=True, slots=True)
class Ingress:
    """The MQTT packet an outbox entry came from, to recognise a redelivery."""

    mid: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class Undelivered:
    """A delivery to a local MQTT subscriber the broker has not acknowledged yet, kept
    from the moment its event was marked seen: a start publishes those left over ahead
    of anything new."""

    event_id: MessageId
    sub_id: str
    topic: str
    """The MQTT topic (``<p>/deliver/<sub_id>/<event topic>``)."""
    payload: bytes
    """The delivery's JSON object as it was to be published."""

    @property
    def size(self) -> int:
        """Bytes it takes against the byte bound (topic and payload)."""
        return len(self.topic.encode()) + len(self.payload)


class Store:
    """The node's SQLite state; every method is a short synchronous transaction."""

    def __init__(
        self,
        path: Path,
        *,
        delivered_capacity: int = 65536,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if delivered_capacity < 1:
            raise ValueError("delivered_capacity must be at least 1")
        self.path = Path(path)
        self.delivered_capacity = delivered_capacity
        self._clock = clock
        self._checkpointer: sqlite3.Connection | None = None
        self.commits = 0
        """Transactions committed (a checkpointer skips its turn when nothing changed)."""
        self.undelivered_unreadable = 0
        """Rows of ``undelivered`` that could not be read back (a foreign or damaged
        database) and were deleted: the owner counts them as dropped deliveries."""
        self._batch_depth = 0
        self._batch_open = False
        self._db = self._open()

    @classmethod
    def in_state_dir(cls, state_dir: Path, **kwargs: Any) -> Store:
        """Open (creating if needed) ``<state_dir>/meshsub.db``."""
        try:
            Path(state_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"state directory {state_dir}: {exc.strerror or exc}") from None
        return cls(Path(state_dir) / DB_NAME, **kwargs)

    # ------------------------------------------------------------ lifecycle

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        except sqlite3.Error as exc:
            raise StoreError(f"state database {self.path}: {exc}") from None
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
            db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            check = db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise StoreError(f"state database {self.path} is corrupt: {check and check[0]}")
            self._migrate(db)
        except sqlite3.Error as exc:
            db.close()
            raise StoreError(f"state database {self.path} is unreadable: {exc}") from None
        except StoreError:
            db.close()
            raise
        return db

    def _migrate(self, db: sqlite3.Connection) -> None:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"state database {self.path} has schema version {version}, newer than "
                f"this meshsubd supports ({SCHEMA_VERSION})"
            )
        while version < SCHEMA_VERSION:
            script = _MIGRATIONS[version]
            version += 1
            # executescript commits first; the version bump is part of the script
            db.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={version};\nCOMMIT;")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        if self._checkpointer is not None:
            with contextlib.suppress(sqlite3.Error):
                self._checkpointer.close()
            self._checkpointer = None

    def checkpoint_wal(self) -> tuple[int, int, int]:
        """Copy the write-ahead log into the database (SQLite's PASSIVE checkpoint: it
        never waits for, nor blocks, the node's own connection); (busy, frames in the log,
        frames checkpointed).

        Meant for a worker thread, on a connection of its own: a checkpoint fsyncs the
        log and the database (tens of milliseconds on a busy disk), and the one SQLite
        runs by itself every ``WAL_CHECKPOINT_PAGES`` pages runs in the committing
        thread, the event loop. Checkpointed often enough, the log restarts before it
        reaches that size and the loop never waits for one. Raises ``sqlite3.Error``.
        """
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(self.path, isolation_level=None, timeout=0.0,
                                                 check_same_thread=False)
        (row,) = self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        return int(row[0]), int(row[1]), int(row[2])

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One atomic commit around the block (nesting is not supported, except in a
        ``batch``).

        ``durable`` commits are fsynced (``synchronous=FULL``). The others use
        ``NORMAL``: they survive a process crash, and a power cut can only lose
        a suffix of them, because WAL commits are ordered and the next durable
        commit syncs everything before it. That is safe wherever the change
        follows a durable one it depends on (an outbox entry is removed only
        after it was fed; losing the removal means a harmless re-feed) and
        keeps the event loop from waiting on the disk for every small update.

        Inside ``batch`` the block is a savepoint of the batch's one transaction: an
        exception undoes that block alone, and the batch commits everything at its end.
        A ``durable`` block there commits the batch so far at once and fsyncs the log,
        because its caller makes a promise when it returns.
        """
        if self._batch_depth:
            yield from self._in_batch(durable)
            return
        try:
            if not durable:
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"state database {self.path}: {exc}") from None
        try:
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._commit()
        finally:
            if not durable:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("PRAGMA synchronous=FULL")

    def _commit(self) -> None:
        try:
            self._db.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise StoreError(f"state database {self.path}: commit failed: {exc}") from None

    def _in_batch(self, durable: bool) -> Iterator[sqlite3.Connection]:
        """``transaction``'s block inside a batch (a generator: the context's body)."""
        try:
            if not self._batch_open:
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("BEGIN IMMEDIATE")
                self._batch_open = True
            self._db.execute("SAVEPOINT block")
        except sqlite3.Error as exc:
            if not self._db.in_transaction:
                self._normal_off()
            raise StoreError(f"state database {self.path}: {exc}") from None
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK TO block")
            self._db.execute("RELEASE block")
            raise
        self._db.execute("RELEASE block")
        if durable:
            self._end_batch(durable=True)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group every ``transaction`` of the block into one commit (``NORMAL``), made at
        its end; nothing is written (not even ``BEGIN``) when no block writes.

        The node runs each input of its protocol (and each drain of the link's socket)
        in one batch: the marks that make an event seen (the store-carry-forward
        buffer) and the row that keeps its delivery to a local MQTT subscriber
        (``undelivered_add``) are then one commit, made before the bridge can publish
        the delivery; neither exists without the other after a crash. Raises
        ``StoreError`` at the end if the commit fails (everything in it is undone).
        Nested batches join the outermost.
        """
        self._batch_depth += 1
        try:
            yield
        except BaseException:
            self._batch_depth -= 1
            if not self._batch_depth and self._batch_open:
                self._batch_open = False
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                self._normal_off()
            raise
        self._batch_depth -= 1
        if not self._batch_depth and self._batch_open:
            self._end_batch(durable=False)

    def _end_batch(self, *, durable: bool) -> None:
        """Commit the batch so far; ``durable``: then fsync the log (SQLite refuses a
        change of ``synchronous`` inside a transaction, so the sync is ``sync_wal``'s)."""
        self._batch_open = False
        try:
            self._commit()
        finally:
            self._normal_off()
        if durable:
            try:
                self.sync_wal()
            except OSError as exc:
                raise StoreError(f"state database {self.path}: sync failed: {exc}") from None

    def _normal_off(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA synchronous=FULL")

    def sync_wal(self) -> None:
        """Make every commit written so far durable: fsync the write-ahead log.

        Safe from another thread (it does not use the SQLite connection): a
        commit's bytes are in the WAL file once ``COMMIT`` returned, whatever
        ``synchronous`` said; a checkpoint syncs the WAL before it copies
        anything into the database. Raises ``OSError``.
        """
        try:
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
        except FileNotFoundError:  # no WAL (yet): every commit is in the database file
            fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    # ---------------------------------------------------------------- epoch

    def next_epoch(self) -> int:
        """The boot epoch of this start (call once per daemon start), persisted.

        Above every earlier epoch of this database, and never below the
        real-time clock in whole seconds: a node whose state is lost
        (re-imaged, a new SD card) still starts above the epochs its
        neighbours remember, so they hear it again at its first frame instead
        of refusing everything it sends as a replay. (A clock that runs behind
        the node's earlier boots cannot give that; the daemon warns about one
        that reads before it was built.)
        """
        with self.transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key='epoch'").fetchone()
            epoch = max((int(row[0]) if row else 0) + 1, int(self._clock()))
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('epoch', ?)", (epoch,))
        return epoch

    @property
    def epoch(self) -> int:
        """The current boot epoch (0 before the first ``next_epoch``)."""
        row = self._db.execute("SELECT value FROM meta WHERE key='epoch'").fetchone()
        return int(row[0]) if row else 0

    # ------------------------------------------------------ telemetry feed

    _FEED_KEYS = ("feed_epoch", "feed_file", "feed_offset")

    def feed_cursor(self) -> tuple[int, int, int] | None:
        """(epoch, file number, byte offset) in the spool up to which the broker
        acknowledged the live telemetry feed; None if it never shipped anything."""
        rows = dict(self._db.execute(
            "SELECT key, value FROM meta WHERE key IN (?, ?, ?)", self._FEED_KEYS))
        if len(rows) != 3:
            return None
        epoch, n, offset = (int(rows[k]) for k in self._FEED_KEYS)
        return epoch, n, offset

    def save_feed_cursor(self, epoch: int, n: int, offset: int) -> None:
        """Bookkeeping (not fsynced): losing the newest cursor only re-sends records,
        which the collector recognises by their numbers."""
        with self.transaction(durable=False) as db:
            db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                           zip(self._FEED_KEYS, (epoch, n, offset), strict=True))

    # -------------------------------------------------------- subscriptions

    def put_subscription(self, sub_id: str, expression: str, source: str = "mqtt") -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT INTO subscriptions (sub_id, expression, source, created) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(sub_id) DO UPDATE SET "
                "expression=excluded.expression, source=excluded.source",
                (sub_id, expression, source, self._clock()),
            )

    def delete_subscription(self, sub_id: str) -> bool:
        """Forget ``sub_id``; True if it existed."""
        with self.transaction() as db:
            cur = db.execute("DELETE FROM subscriptions WHERE sub_id=?", (sub_id,))
        return cur.rowcount > 0

    def subscriptions(self, source: str | None = None) -> dict[str, str]:
        """sub_id -> expression (text syntax), optionally of one source only."""
        if source is None:
            rows = self._db.execute("SELECT sub_id, expression FROM subscriptions ORDER BY sub_id")
        else:
            rows = self._db.execute(
                "SELECT sub_id, expression FROM subscriptions WHERE source=? ORDER BY sub_id",
                (source,),
            )
        return {str(a): str(b) for a, b in rows}

    # --------------------------------------------------------------- outbox

    def outbox_add(
        self, entries: Sequence[tuple[MessageId, str, Ingress | None]], *, durable: bool = True
    ) -> list[OutboxEntry]:
        """Persist accepted publications in one commit; they survive SIGKILL after return,
        and a power cut once the commit is durable (at return, or after ``sync_wal``)."""
        now = self._clock()
        added: list[OutboxEntry] = []
        with self.transaction(durable=durable) as db:
            for event_id, event, ingress in entries:
                db.execute(
                    "INSERT INTO outbox (event_id, event, accepted) VALUES (?, ?, ?)",
                    (str(event_id), event, now),
                )
                if ingress is not None:
                    db.execute(
                        "INSERT OR REPLACE INTO ingress (mid, digest, event_id) VALUES (?, ?, ?)",
                        (ingress.mid, ingress.digest, str(event_id)),
                    )
                added.append(OutboxEntry(event_id, event, now))
        return added

    def outbox_remove(self, event_id: MessageId) -> bool:
        """The protocol accepted ``event_id``: drop it from the outbox."""
        with self.transaction(durable=False) as db:
            cur = db.execute("DELETE FROM outbox WHERE event_id=?", (str(event_id),))
        return cur.rowcount > 0

    def outbox_remove_many(self, event_ids: Iterable[MessageId]) -> None:
        with self.transaction(durable=False) as db:
            db.executemany("DELETE FROM outbox WHERE event_id=?", [(str(e),) for e in event_ids])

    def outbox_pending(self) -> list[OutboxEntry]:
        """Unconsumed entries in acceptance order (re-fed at start)."""
        rows = self._db.execute("SELECT event_id, event, accepted FROM outbox ORDER BY ord")
        return [OutboxEntry(MessageId.parse(e), str(t), float(a)) for e, t, a in rows]

    def outbox_len(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def ingress_seen(self, ingress: Ingress) -> MessageId | None:
        """The event id an identical earlier MQTT packet (same mid and digest) became."""
        row = self._db.execute(
            "SELECT event_id FROM ingress WHERE mid=? AND digest=?", (ingress.mid, ingress.digest)
        ).fetchone()
        return MessageId.parse(row[0]) if row else None

    # -------------------------------------------------------- origin state

    def origin_states(self) -> dict[int, tuple[int, int]]:
        """origin -> (epoch, highest seq) as last saved."""
        rows = self._db.execute("SELECT origin, epoch, seq FROM origins")
        return {int(o): (int(e), int(s)) for o, e, s in rows}

    def save_origin_states(self, states: Mapping[int, tuple[int, int]]) -> None:
        """Upsert many origins in one commit (the node saves periodically, not per frame)."""
        with self.transaction(durable=False) as db:
            db.executemany(
                "INSERT INTO origins (origin, epoch, seq) VALUES (?, ?, ?) "
                "ON CONFLICT(origin) DO UPDATE SET epoch=excluded.epoch, seq=excluded.seq",
                [(o, e, s) for o, (e, s) in states.items()],
            )

    # -------------------------------------------------------- replay state

    def replay_states(self) -> dict[int, tuple[int, int, float]]:
        """transmitter -> (epoch, highest frame sequence, last heard) as last saved."""
        rows = self._db.execute("SELECT transmitter, epoch, seq, heard FROM replay")
        return {int(t): (_u64(e), _u64(s), float(h)) for t, e, s, h in rows}

    def save_replay_states(self, states: Mapping[int, tuple[int, int, float]],
                           limit: int) -> None:
        """Upsert changed transmitters in one commit; keep the ``limit`` most recently heard.

        Bookkeeping (not fsynced): a power cut may lose the last few seconds,
        which reopens at most the frames of those seconds to replay.
        """
        with self.transaction(durable=False) as db:
            db.executemany(
                "INSERT INTO replay (transmitter, epoch, seq, heard) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(transmitter) DO UPDATE SET epoch=excluded.epoch, "
                "seq=excluded.seq, heard=excluded.heard",
                [(t, _i64(e), _i64(s), h) for t, (e, s, h) in states.items()],
            )
            db.execute("DELETE FROM replay WHERE transmitter NOT IN "
                       "(SELECT transmitter FROM replay ORDER BY heard DESC LIMIT ?)", (limit,))

    def disk_bytes(self) -> int:
        """Bytes the database and its write-ahead log take on disk now."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                total += Path(f"{self.path}{suffix}").stat().st_size
        return total

    # ----------------------------------------------------- delivered cache

    def delivered_seen(self, event_id: MessageId, sub_id: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM delivered WHERE event_id=? AND sub_id=?", (str(event_id), sub_id)
        ).fetchone()
        return row is not None

    def delivered_add(self, pairs: Iterable[tuple[MessageId, str]]) -> None:
        """Remember deliveries; only the newest ``delivered_capacity`` are kept.

        A delivery kept by ``undelivered_add`` is forgotten there in the same commit. A
        kill between the broker's acknowledgement and this commit leaves it kept: the
        next start publishes it again (at least once; the application recognises the
        second copy by its ``event_id``, docs/mqtt.md)."""
        rows = [(str(e), s) for e, s in pairs]
        with self.transaction(durable=False) as db:
            db.executemany("INSERT OR IGNORE INTO delivered (event_id, sub_id) VALUES (?, ?)",
                           rows)
            db.executemany("DELETE FROM undelivered WHERE event_id=? AND sub_id=?", rows)
            top = db.execute("SELECT MAX(ord) FROM delivered").fetchone()[0]
            if top is not None:
                db.execute("DELETE FROM delivered WHERE ord <= ?",
                           (int(top) - self.delivered_capacity,))

    def delivered_len(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM delivered").fetchone()[0])

    # ---------------------------------------------- undelivered deliveries

    def undelivered_add(self, items: Sequence[Undelivered], *,
                        forget: Iterable[tuple[MessageId, str]] = ()) -> None:
        """Keep ``items`` (in queue order) and forget the ``forget`` pairs, in one commit
        (bookkeeping, ``NORMAL``; inside the node's ``batch`` it is that batch's commit).

        A delivery is kept from the moment its event is marked seen (the node's batch
        writes both): the protocol refuses the event ever after (its buffer holds it,
        its frames are replays), so this row is what brings it to the subscriber after
        a SIGKILL, an OOM kill or a restart. ``delivered_add`` forgets it once the
        broker acknowledged it. The owner (the MQTT bridge) bounds the rows by entries
        and bytes: ``forget`` carries the deliveries it drops to make room.
        """
        gone = [(str(e), s) for e, s in forget]
        with self.transaction(durable=False) as db:
            if gone:  # an empty executemany still costs a statement's preparation
                db.executemany("DELETE FROM undelivered WHERE event_id=? AND sub_id=?", gone)
            db.executemany(
                "INSERT OR IGNORE INTO undelivered (event_id, sub_id, topic, payload) "
                "VALUES (?, ?, ?, ?)",
                [(str(u.event_id), u.sub_id, u.topic, u.payload) for u in items])

    def undelivered(self) -> list[Undelivered]:
        """The kept deliveries in their queue order; they stay kept until ``delivered_add``
        records them, so a crash before the broker acknowledged them loses none.

        A row that cannot be read back (not a message id, a payload that is not bytes:
        a damaged or hand-edited database) is deleted in the same call and counted in
        ``undelivered_unreadable``: left in place it would hold room outside the owner's
        bound for ever, since the owner can neither publish nor forget what it cannot
        name."""
        kept: list[Undelivered] = []
        unreadable: list[int] = []
        for ord_, e, s, t, p in self._db.execute(
                "SELECT ord, event_id, sub_id, topic, payload FROM undelivered ORDER BY ord"):
            try:
                if not (isinstance(e, str) and isinstance(s, str) and isinstance(t, str)
                        and isinstance(p, bytes)):
                    raise ValueError("wrong column types")
                kept.append(Undelivered(MessageId.parse(e), s, t, p))
            except ValueError:
                unreadable.append(ord_)
        if unreadable:
            with self.transaction(durable=False) as db:
                db.executemany("DELETE FROM undelivered WHERE ord=?", [(o,) for o in unreadable])
            self.undelivered_unreadable += len(unreadable)
        return kept

    # --------------------------------------------------------------- buffer

    def buffer(self) -> SqliteBufferStore:
        """The persistent store-carry-forward buffer backed by this database."""
        return SqliteBufferStore(self)


def _i64(value: int) -> int:
    """An unsigned 64-bit wire value as SQLite's signed INTEGER (two's complement)."""
    return value - (1 << 64) if value >= _U64_HALF else value


def _u64(value: int) -> int:
    return value + (1 << 64) if value < 0 else value


class OutboxFullError(StoreError):
    """The outbox holds its maximum of unconsumed publications."""


class LocalPublisher:
    """The life of a local publication: persist, (acknowledge), feed, forget.

    An event is written to the outbox before anyone is told it was accepted;
    it is removed only once ``feed`` (the node handing it to the protocol as
    ``LocalPublish``) returned normally. "Done" therefore means *the protocol
    accepted it*: for flooding that is the first broadcast queued, for
    store-carry-forward protocols the event is then in the protocol's own
    (persistent) buffer. Entries left over by a crash are re-fed at start with
    their original ids, so receivers' duplicate suppression absorbs any resend.
    """

    def __init__(
        self,
        store: Store,
        new_id: Callable[[], MessageId],
        feed: Callable[[Event, MessageId], None],
        *,
        limit: int = 10000,
    ) -> None:
        self.store = store
        self.new_id = new_id
        self._feed = feed
        self.limit = limit
        self.fed = 0
        self.feed_errors = 0

    def persist(self, events: Sequence[tuple[Event, Ingress | None]], *,
                durable: bool = True) -> list[MessageId]:
        """Assign ids and persist all ``events`` in one commit (``durable=False``: the
        caller acknowledges them only after ``Store.sync_wal``).

        Raises ``OutboxFullError`` (nothing persisted) when they do not fit.
        """
        if self.store.outbox_len() + len(events) > self.limit:
            raise OutboxFullError(f"outbox full ({self.limit} unconsumed publications)")
        rows = [(self.new_id(), format_event(event), ingress) for event, ingress in events]
        self.store.outbox_add(rows, durable=durable)
        return [row[0] for row in rows]

    def feed(self, event: Event, event_id: MessageId) -> bool:
        """Hand one persisted event to the node; forget it once accepted."""
        return self.feed_many([(event, event_id)]) == 1

    def feed_many(self, items: Sequence[tuple[Event, MessageId]]) -> int:
        """Feed events in order, then forget the accepted ones in one commit; return how many.

        An entry whose feed raised stays in the outbox for the next start. The
        removal is one transaction for the batch: losing it (power cut) only
        means a re-feed with the same id, which receivers suppress as a duplicate.
        """
        done: list[MessageId] = []
        for event, event_id in items:
            try:
                self._feed(event, event_id)
            except Exception:  # the node failed: keep the entry for the next start
                self.feed_errors += 1
                continue
            done.append(event_id)
        if done:
            self.store.outbox_remove_many(done)
            self.fed += len(done)
        return len(done)

    def publish(self, event: Event) -> MessageId:
        """Persist and feed one event (the control socket's ``pub``)."""
        (event_id,) = self.persist([(event, None)])
        self.feed(event, event_id)
        return event_id

    def refeed_pending(self) -> int:
        """Feed every entry a previous run left in the outbox; return how many."""
        items: list[tuple[Event, MessageId]] = []
        for entry in self.store.outbox_pending():
            try:
                items.append((parse_event(entry.event), entry.event_id))
            except ValueError:  # cannot happen for rows we wrote; never crash on it
                self.store.outbox_remove(entry.event_id)
                self.feed_errors += 1
        return self.feed_many(items)


class ReplayKeeper:
    """Keeps a codec's replay table on disk: loaded at start, changes saved every
    ``every_s`` seconds and at stop, so nothing accepted before a restart is
    accepted again after it (a crash loses at most the last ``every_s``)."""

    def __init__(self, store: Store, replay: ReplayWindow, *, every_s: float = 10.0) -> None:
        self.store = store
        self.replay = replay
        self.every_s = every_s
        self._last: float | None = None
        self.saves = 0
        self.errors = 0

    def load(self) -> int:
        """Restore the saved table; the number of transmitters restored."""
        return self.replay.restore(self.store.replay_states())

    def tick(self, now: float) -> None:
        """Save if ``every_s`` passed since the last save (the first call only starts the
        clock)."""
        if self._last is None:
            self._last = now
        elif now - self._last >= self.every_s:
            self._last = now
            self.save()

    def save(self) -> bool:
        """Write what changed; False (counted, logged by the caller) if the disk refused."""
        changes = self.replay.changes()
        if not changes:
            return True
        try:
            self.store.save_replay_states(changes, self.replay.max_transmitters)
        except (StoreError, sqlite3.Error):
            self.errors += 1
            self.replay.unsaved(changes)  # try them again next time
            return False
        self.saves += 1
        return True


class SqliteBufferStore:
    """The durable ``meshsub.core.buffer.BufferStore``: MessageId -> msgpack-able list.

    Iteration is in insertion order (oldest first); putting an existing key
    again moves it to the end, as ``MemoryStore`` does. A value that does not
    unpack is skipped and counted in ``corrupt`` (the buffer would reject it
    anyway), never raised into the protocol.

    Not ``resident``: the buffer's index keeps no bodies and reads a message back
    when a protocol asks for it, so the carried messages cost disk, not memory.
    """

    resident = False

    def __init__(self, store: Store) -> None:
        self._store = store
        self.corrupt = 0

    def put(self, key: MessageId, value: StoredValue) -> None:
        try:
            packed = msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError(f"buffer value is not msgpack-serialisable: {exc}") from None
        with self._store.transaction(durable=False) as db:
            db.execute("DELETE FROM buffer WHERE key=?", (str(key),))
            top = db.execute("SELECT COALESCE(MAX(ord), 0) FROM buffer").fetchone()[0]
            db.execute("INSERT INTO buffer (key, value, ord) VALUES (?, ?, ?)",
                       (str(key), packed, int(top) + 1))

    def _unpack(self, data: bytes) -> StoredValue | None:
        try:
            value = msgpack.unpackb(data, raw=False)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
            value = None
        if not isinstance(value, list):
            self.corrupt += 1
            return None
        return value

    def get(self, key: MessageId) -> StoredValue | None:
        row = self._store._db.execute(
            "SELECT value FROM buffer WHERE key=?", (str(key),)
        ).fetchone()
        return None if row is None else self._unpack(row[0])

    def delete(self, key: MessageId) -> bool:
        with self._store.transaction(durable=False) as db:
            cur = db.execute("DELETE FROM buffer WHERE key=?", (str(key),))
        return cur.rowcount > 0

    def iterate(self) -> Iterator[tuple[MessageId, StoredValue]]:
        """One value at a time (the keys are read first, so the caller may delete):
        loading a full buffer never holds every body in memory at once."""
        keys = [k for (k,) in self._store._db.execute("SELECT key FROM buffer ORDER BY ord")]
        for key in keys:
            try:
                mid = MessageId.parse(key)
            except ValueError:
                self.corrupt += 1
                continue
            value = self.get(mid)
            if value is not None:
                yield mid, value

    def __len__(self) -> int:
        return int(self._store._db.execute("SELECT COUNT(*) FROM buffer").fetchone()[0])
