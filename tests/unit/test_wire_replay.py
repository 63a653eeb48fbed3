"""Replay window per (transmitter, epoch): duplicates, old frames, stale epochs, sliding."""

from __future__ import annotations

import pytest

from meshsub.core.api import Message, MessageId
from meshsub.wire import FrameCodec, FrameError, KeyRing, ReplayWindow, seal
from meshsub.wire.frame import encode_message

KEYS = KeyRing.single(b"r" * 32, 1)


def fresh(window: ReplayWindow, node: int, epoch: int, seq: int) -> bool:
    """check + accept, as the codec does; True if the frame was fresh."""
    if window.check(node, epoch, seq) is not None:
        return False
    window.accept(node, epoch, seq)
    return True


def test_duplicate_is_refused() -> None:
    w = ReplayWindow(64)
    assert fresh(w, 1, 0, 10)
    assert not fresh(w, 1, 0, 10)
    assert "already seen" in (w.check(1, 0, 10) or "")


def test_out_of_order_inside_the_window_is_accepted_once() -> None:
    w = ReplayWindow(64)
    for seq in (70, 10, 70 - 63, 69):  # 7 is the oldest inside a 64-wide window
        assert fresh(w, 1, 0, seq)
    for seq in (70, 10, 7, 69):
        assert not fresh(w, 1, 0, seq)
    assert fresh(w, 1, 0, 8)
    assert not fresh(w, 1, 0, 6)  # one below the window


def test_older_than_the_window_is_refused() -> None:
    w = ReplayWindow(64)
    assert fresh(w, 1, 0, 100)
    assert fresh(w, 1, 0, 100 - 63)  # oldest still inside
    assert not fresh(w, 1, 0, 100 - 64)
    assert "older than the window" in (w.check(1, 0, 36) or "")


def test_window_slides_and_forgets_nothing_inside() -> None:
    w = ReplayWindow(1024)
    seen = []
    for seq in range(0, 5000, 3):
        assert fresh(w, 9, 4, seq)
        seen.append(seq)
    top = seen[-1]
    for seq in seen:
        assert not fresh(w, 9, 4, seq)
    for seq in range(top - 1023, top):
        if seq % 3:
            assert fresh(w, 9, 4, seq)  # gaps inside the window are still fresh


def test_big_jump_clears_the_bitmap() -> None:
    w = ReplayWindow(64)
    assert fresh(w, 1, 0, 1)
    assert fresh(w, 1, 0, 10_000)
    assert not fresh(w, 1, 0, 1)
    assert fresh(w, 1, 0, 9_999)


def test_stale_epoch_is_refused_and_new_epoch_resets() -> None:
    w = ReplayWindow(64)
    assert fresh(w, 1, 5, 1000)
    assert not fresh(w, 1, 4, 2000)
    assert "stale epoch" in (w.check(1, 4, 1) or "")
    assert fresh(w, 1, 6, 1)  # reboot: sequence restarts
    assert not fresh(w, 1, 5, 1001)
    assert w.newest_epoch(1) == 6
    w.accept(1, 5, 5000)  # accept without check must not move the window back
    assert w.newest_epoch(1) == 6


def test_transmitters_are_independent() -> None:
    w = ReplayWindow(64)
    assert fresh(w, 1, 0, 1)
    assert fresh(w, 2, 0, 1)
    assert not fresh(w, 2, 0, 1)


def test_lru_bounds_the_tracked_transmitters() -> None:
    w = ReplayWindow(64, max_transmitters=3)
    for node in (1, 2, 3):
        assert fresh(w, node, 0, 1)
    assert fresh(w, 1, 0, 2)  # 1 is now most recent
    assert fresh(w, 4, 0, 1)  # evicts 2, the least recently heard
    assert len(w) == 3 and w.evicted == 1
    assert w.newest_epoch(2) is None
    assert not fresh(w, 1, 0, 2) and not fresh(w, 3, 0, 1)


def test_a_full_table_refuses_new_transmitters_while_its_entries_are_live() -> None:
    """Issue 25 item 10: 10,000 insider ids must not push a live neighbour out (which
    would reopen the replay of its frames); a long-silent entry may make room."""
    w = ReplayWindow(64, max_transmitters=3, idle_evict_s=600.0)
    for node in (1, 2, 3):
        assert w.has_room(node, 0.0)
        w.accept(node, 0, 1, now=0.0)
    for intruder in range(100, 200):
        assert not w.has_room(intruder, 599.0)
    assert w.refused == 100 and len(w) == 3 and w.evicted == 0
    assert w.has_room(2, 599.0)  # known transmitters always
    w.accept(2, 0, 2, now=599.0)
    w.accept(3, 0, 2, now=599.0)
    assert w.has_room(200, 600.0)  # 1 has been silent for idle_evict_s
    w.accept(200, 0, 1, now=600.0)
    assert 1 not in w and w.evicted == 1 and all(n in w for n in (2, 3, 200))


def test_accept_says_whether_the_frame_is_the_newest() -> None:
    w = ReplayWindow(64)
    assert w.accept(1, 5, 10) is True
    assert w.accept(1, 5, 8) is False  # late, inside the window
    assert w.accept(1, 5, 11) is True
    assert w.accept(1, 6, 1) is True  # a new boot
    assert w.accept(1, 5, 99) is False  # stale epoch (check refuses it first)


def test_persisted_state_closes_the_replay_after_a_restart() -> None:
    before = ReplayWindow(64)
    for seq in (3, 1, 7):
        assert fresh(before, 9, 2, seq)
    before.accept(8, 1, 50, now=12.5)
    assert before.changes() == {9: (2, 7, 0.0), 8: (1, 50, 12.5)}
    assert before.changes() == {}
    after = ReplayWindow(64)
    assert after.restore(before.snapshot()) == 2
    for seq in (1, 2, 3, 7):  # everything up to the highest counts as seen, gaps too
        assert not fresh(after, 9, 2, seq)
    assert not fresh(after, 9, 1, 100)  # an older boot stays refused
    assert fresh(after, 9, 2, 8) and fresh(after, 9, 3, 1)
    assert after.restore({9: (2, 7, 0.0)}) == 0  # never moves a window back


@pytest.mark.parametrize(("window", "maximum"), [(0, 5), (5, 0)])
def test_bad_parameters(window: int, maximum: int) -> None:
    with pytest.raises(ValueError):
        ReplayWindow(window, maximum)


# ------------------------------------------------------------ through the codec


def msg(seq: int) -> Message:
    return Message(20, MessageId(7, 1, seq), seq)


def test_codec_refuses_a_replayed_frame() -> None:
    tx, rx = FrameCodec(7, 1, KEYS), FrameCodec(8, 1, KEYS)
    frame = tx.encode(1, msg(1))[0]
    assert rx.decode(frame, 0.0) is not None
    with pytest.raises(FrameError) as err:
        rx.decode(frame, 0.0)
    assert err.value.reason == "replay"
    assert rx.counters["replay"] == 1 and rx.counters["messages_in"] == 1


def test_codec_retransmission_is_a_new_frame() -> None:
    tx, rx = FrameCodec(7, 1, KEYS), FrameCodec(8, 1, KEYS)
    first, again = tx.encode(1, msg(1))[0], tx.encode(1, msg(1))[0]
    assert first != again
    a, b = rx.decode(first, 0.0), rx.decode(again, 0.0)
    assert a is not None and b is not None and a.message == b.message


def test_codec_refuses_frames_of_a_previous_boot() -> None:
    old, rx = FrameCodec(7, 1, KEYS), FrameCodec(8, 1, KEYS)
    held = old.encode(1, msg(1))[0]
    new = FrameCodec(7, 2, KEYS)  # the transmitter rebooted
    assert rx.decode(new.encode(1, msg(1))[0], 0.0) is not None
    with pytest.raises(FrameError) as err:
        rx.decode(held, 0.0)
    assert err.value.reason == "replay" and "stale epoch" in str(err.value)


def test_window_moves_only_after_the_tag_verified() -> None:
    rx = FrameCodec(8, 1, KEYS)
    forged = encode_message(KeyRing.single(b"x" * 32, 1), 1, 7, 1, 10**6, msg(1))
    with pytest.raises(FrameError) as err:
        rx.decode(forged, 0.0)
    assert err.value.reason == "bad_tag"
    assert rx.replay.newest_epoch(7) is None
    assert rx.decode(encode_message(KEYS, 1, 7, 1, 1, msg(1)), 0.0) is not None


def test_own_frames_are_dropped_and_do_not_touch_the_window() -> None:
    me = FrameCodec(7, 1, KEYS)
    with pytest.raises(FrameError) as err:
        me.decode(me.encode(1, msg(1))[0], 0.0)
    assert err.value.reason == "own_frame" and me.counters["own_frame"] == 1
    assert len(me.replay) == 0


def test_forged_seal_with_real_key_shows_the_parser_runs_after_the_window() -> None:
    rx = FrameCodec(8, 1, KEYS)
    ok = encode_message(KEYS, 1, 7, 1, 5, msg(1))
    assert rx.decode(ok, 0.0) is not None
    resealed = seal(KEYS, ok[3:-16])  # same content, same seq: still a replay
    with pytest.raises(FrameError) as err:
        rx.decode(resealed, 0.0)
    assert err.value.reason == "replay"
