"""Per-hop reliable send: the sender state machine and its integration in Protocol."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from meshsub.core.api import (
    CancelTimer,
    CoreType,
    Emit,
    FrameReceived,
    Message,
    MessageId,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    NodeId,
    SendTo,
    SetTimer,
    Stopping,
    TimerFired,
)
from meshsub.core.params import ParameterError, ProtocolParams, parse_params
from meshsub.core.protocol import Protocol
from meshsub.core.reliable import (
    ReceivedIds,
    ReliableParams,
    ReliableSender,
    RetransmitPolicy,
    timer_name,
)

MID = MessageId(1, 0, 1)
MSG = Message(16, MID, "payload")


def test_policy_backoff_is_exponential_and_capped() -> None:
    policy = RetransmitPolicy(initial_rto=0.2, factor=2.0, max_rto=1.0, max_attempts=5, jitter=0)
    assert [policy.rto(n) for n in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert policy.worst_case_span() == pytest.approx(3.4)


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"initial_rto": 0}, "rto_initial"), ({"factor": 0.5}, "rto_factor"),
    ({"max_rto": 0.1}, "rto_max"), ({"max_attempts": 0}, "rto_attempts"),
    ({"jitter": 2.0}, "rto_jitter"), ({"initial_rto": float("inf")}, "rto_initial"),
])
def test_policy_validation(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ParameterError) as err:
        RetransmitPolicy(**kwargs)
    assert err.value.key == key


def test_params_mixin_parses_and_validates() -> None:
    params = parse_params(ReliableParams, {"rto_initial": 1, "rto_attempts": 2})
    assert params.retransmit_policy() == RetransmitPolicy(1.0, 2.0, 5.0, 2, 0.1)
    with pytest.raises(ParameterError):
        parse_params(ReliableParams, {"rto_max": 0.01})


def test_sender_retransmits_with_backoff_then_gives_up() -> None:
    sender = ReliableSender(RetransmitPolicy(0.2, 2.0, 5.0, 3, 0.0), random.Random(1), first_id=7)
    rid, out = sender.send(10.0, 5, MSG)
    assert rid == 7
    sent = SendTo(5, Message(16, MID, "payload", reliable_id=7))
    assert out.actions[0] == sent
    assert out.actions[1] == SetTimer("rel:7", pytest.approx(10.2))  # type: ignore[arg-type]
    out = sender.on_timer(10.2, timer_name(7))
    assert out.actions[0] == sent
    assert out.actions[1] == SetTimer("rel:7", pytest.approx(10.6))  # type: ignore[arg-type]
    out = sender.on_timer(10.6, "rel:7")
    assert isinstance(out.actions[1], SetTimer) and out.actions[1].at == pytest.approx(11.4)
    out = sender.on_timer(11.4, "rel:7")
    assert out.actions == [] and [r for _, r in out.failed] == ["reliable_give_up"]
    assert sender.stats == {"sent": 1, "retransmitted": 2, "acked": 0, "given_up": 1,
                            "ack_unknown": 0}
    assert sender.on_timer(12.0, "rel:7").actions == []  # stale timer: nothing


def test_jitter_only_lengthens_the_timeout() -> None:
    sender = ReliableSender(RetransmitPolicy(1.0, 2.0, 8.0, 4, 0.5), random.Random(3))
    for _ in range(50):
        _, out = sender.send(0.0, 1, MSG)
        timer = out.actions[1]
        assert isinstance(timer, SetTimer) and 1.0 <= timer.at <= 1.5


def test_ack_from_the_right_node_completes_the_send() -> None:
    sender = ReliableSender(RetransmitPolicy(), random.Random(1))
    rid, _ = sender.send(0.0, 5, MSG)
    assert not sender.on_ack(6, rid).acked  # another node cannot ack it
    out = sender.on_ack(5, rid)
    assert [e.node for e in out.acked] == [5] and out.actions == [CancelTimer(f"rel:{rid}")]
    assert not sender.on_ack(5, rid).acked  # duplicate ACK ignored
    assert sender.stats["ack_unknown"] == 2
    assert sender.on_timer(1.0, f"rel:{rid}").actions == []
    assert sender.on_timer(1.0, "rel:garbage").actions == []


def test_ids_wrap_and_skip_pending() -> None:
    sender = ReliableSender(RetransmitPolicy(), random.Random(1), first_id=2**32 - 1)
    ids = [sender.send(0.0, 1, MSG)[0] for _ in range(3)]
    assert ids == [2**32 - 1, 0, 1]


def test_neighbor_down_fails_only_that_neighbours_sends() -> None:
    sender = ReliableSender(RetransmitPolicy(), random.Random(1))
    a, _ = sender.send(0.0, 1, MSG)
    b, _ = sender.send(0.0, 2, MSG)
    out = sender.on_neighbor_down(1)
    assert [(e.reliable_id, r) for e, r in out.failed] == [(a, "neighbor_down")]
    assert out.actions == [CancelTimer(f"rel:{a}")]
    assert list(sender.pending) == [b] and sender.pending_to(2) == 1


def test_received_ids_bounded_in_time_and_count() -> None:
    seen = ReceivedIds(memory_s=10.0, per_sender=3, max_senders=2)
    assert seen.accept(0.0, 1, 5) and not seen.accept(1.0, 1, 5)
    assert seen.accept(11.0, 1, 5)  # forgotten after memory_s
    for rid in (6, 7, 8):
        seen.accept(11.0, 1, rid)
    assert len(seen) == 3
    seen.accept(12.0, 2, 1)
    seen.accept(12.0, 3, 1)  # evicts sender 1
    assert seen.accept(12.0, 1, 8)
    with pytest.raises(ValueError):
        ReceivedIds(memory_s=0)


# ----------------------------------------------------------------- integration


@dataclass(frozen=True, slots=True)
class EchoParams(ReliableParams):
    pass


class Recorder(Protocol):
    """Records what reaches the protocol's hooks."""

    name: ClassVar[str] = "recorder"
    Params: ClassVar[type[ProtocolParams]] = EchoParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self.frames: list[Message] = []
        self.acked: list[tuple[NodeId, Message]] = []
        self.failed: list[tuple[NodeId, Message]] = []
        self.timers: list[str] = []

    def on_frame(self, sender: NodeId, message: Message) -> None:
        self.frames.append(message)

    def on_timer(self, name: str) -> None:
        self.timers.append(name)

    def on_reliable_acked(self, node: NodeId, message: Message) -> None:
        self.acked.append((node, message))

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        self.failed.append((node, message))


def drops(actions: list[Any]) -> list[str]:
    return [str(a.attrs["reason"]) for a in actions if isinstance(a, Emit) and a.event == "drop"]


def test_protocol_acks_every_copy_but_passes_it_up_once() -> None:
    proto = Recorder(2)
    frame = Message(16, MID, "x", reliable_id=42)
    first = proto.handle(FrameReceived(0.0, 1, frame))
    assert first == [SendTo(1, Message(CoreType.ACK, MID, 42, ttl=1))]
    second = proto.handle(FrameReceived(0.5, 1, frame))
    assert second[0] == SendTo(1, Message(CoreType.ACK, MID, 42, ttl=1))
    assert proto.drops["reliable_duplicate"] == 1  # counted now, recorded by the summary
    assert drops(proto.handle(Stopping(0.6))) == ["reliable_duplicate"]
    assert proto.frames == [frame]
    # the same id from another sender is a different frame
    proto.handle(FrameReceived(0.5, 3, frame))
    assert len(proto.frames) == 2


def test_protocol_send_reliable_ack_and_hooks() -> None:
    proto = Recorder(1, seed=3)
    proto.handle(NeighborUp(0.0, NeighborInfo(2)))
    rid = proto.send_reliable(2, MSG)  # outside handle: queued for the next call
    actions = proto.handle(FrameReceived(0.1, 2, Message(CoreType.ACK, MID, rid, ttl=1)))
    assert [type(a) for a in actions] == [SendTo, SetTimer, CancelTimer]
    assert actions[2] == CancelTimer(f"rel:{rid}")
    assert proto.acked == [(2, Message(16, MID, "payload", reliable_id=rid))]
    assert proto.status()["reliable"]["acked"] == 1


def test_protocol_routes_rel_timers_and_reports_give_up() -> None:
    proto = Recorder(1, params=EchoParams(rto_attempts=2, rto_jitter=0.0))
    rid = proto.send_reliable(2, MSG)
    proto.handle(TimerFired(0.2, "mine"))
    assert proto.timers == ["mine"]
    again = proto.handle(TimerFired(0.2, f"rel:{rid}"))
    assert isinstance(again[0], SendTo) and again[0].message.reliable_id == rid
    gave_up = proto.handle(TimerFired(0.6, f"rel:{rid}"))
    assert drops(gave_up) == ["reliable_give_up"]
    assert [n for n, _ in proto.failed] == [2]
    assert proto.drops["reliable_give_up"] == 1 and proto.timers == ["mine"]


def test_protocol_neighbor_down_fails_pending_at_once() -> None:
    proto = Recorder(1)
    proto.handle(NeighborUp(0.0, NeighborInfo(2)))
    rid = proto.send_reliable(2, MSG)
    actions = proto.handle(NeighborDown(0.05, 2))
    assert CancelTimer(f"rel:{rid}") in actions
    assert drops(actions) == ["neighbor_down"]
    assert [n for n, _ in proto.failed] == [2]
    # a late ACK changes nothing
    proto.handle(FrameReceived(0.1, 2, Message(CoreType.ACK, MID, rid, ttl=1)))
    assert proto.acked == []


@pytest.mark.parametrize("body", [None, "1", -1, 2**32, True])
def test_protocol_malformed_ack_is_a_counted_drop(body: object) -> None:
    proto = Recorder(1)
    proto.handle(FrameReceived(0.0, 2, Message(CoreType.ACK, MID, body)))
    # counted at once; recorded in the next drop summary (an insider's junk: issue 25)
    assert proto.drops == {"malformed": 1}


@pytest.mark.parametrize("rid", [-1, 2**32, "x"])
def test_protocol_malformed_reliable_id_is_a_counted_drop(rid: Any) -> None:
    proto = Recorder(1)
    proto.handle(FrameReceived(0.0, 2, Message(16, MID, None, reliable_id=rid)))
    assert proto.drops == {"malformed": 1} and proto.frames == []


def test_reliable_ids_differ_across_epochs() -> None:
    assert Recorder(1, epoch=1).send_reliable(2, MSG) != Recorder(1, epoch=2).send_reliable(2, MSG)
    assert Recorder(1, epoch=1).send_reliable(2, MSG) == Recorder(1, epoch=1).send_reliable(2, MSG)
