"""The sans-I/O contract between protocols and drivers.

A protocol receives *inputs* (each stamped with the driver's clock, ``now``, in
seconds) and returns *actions*. It never touches a socket, a clock, a timer, a
file or an MQTT client: the field daemon, the discrete-event simulator and the
unit tests are drivers that turn actions into I/O (the pattern of h11/aioquic).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from meshsub.core.content import Event, Subscription

NodeId: TypeAlias = int
"""A node's identity: an unsigned 32-bit integer, unique in the fleet."""

NODE_ID_MAX = 0xFFFF_FFFF

TelemetryValue: TypeAlias = str | int | float | bool | None


class MsgKind(enum.StrEnum):
    """What a transmission is for; the evaluation splits overhead by it."""

    DATA = "data"
    SUBSCRIPTION = "subscription"
    CONTROL = "control"
    BEACON = "beacon"


@dataclass(frozen=True, slots=True, order=True)
class MessageId:
    """End-to-end identity of a message: who made it, in which boot, which one.

    The boot epoch makes ids unique across reboots without persisting every
    sequence number (GIANT's (PHB, seq) ids, Zheng 2008, §6.3, survive a reboot this way).
    """

    origin: NodeId
    epoch: int
    seq: int
    _hash: int = field(init=False, repr=False, compare=False)
    """The hash of (origin, epoch, seq), computed once: an id is looked up in dicts and
    sets at every copy a node hears (duplicate caches, delivered pairs), and the hash
    ``dataclass`` generates builds and hashes that tuple at every lookup (a flood on 1000
    nodes: three quarters of a million; docs/benchmarks.md, "Fourth round")."""

    _text: str = field(default="", init=False, repr=False, compare=False)
    """``str()`` once it has been asked for: every record about a message names it
    (``event_id``), and a relay names its rebroadcast timer after it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.origin, self.epoch, self.seq)))

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        text = self._text
        if not text:
            text = f"{self.origin:x}-{self.epoch:x}-{self.seq:x}"
            object.__setattr__(self, "_text", text)
        return text

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """Inverse of ``str()``; raises ``ValueError`` on anything else."""
        parts = text.split("-")
        if len(parts) != 3:
            raise ValueError(f"not a message id: {text!r}")
        origin, epoch, seq = (int(p, 16) for p in parts)
        return cls(origin, epoch, seq)


@dataclass(frozen=True, slots=True)
class Message:
    """A protocol message: what the wire layer frames, authenticates and segments.

    ``type`` is the protocol's own message type (values below
    ``FIRST_PROTOCOL_TYPE`` are reserved for core services such as per-hop
    ACKs). ``body`` is any msgpack-serialisable value; the protocol owns its
    layout. ``hop`` counts transmissions so far, ``ttl`` the hops still
    allowed. ``reliable_id`` is set by the per-hop reliable sender and asks the
    receiver's core to acknowledge the frame.
    """

    type: int
    id: MessageId
    body: Any
    hop: int = 0
    ttl: int = 255
    flags: int = 0
    reliable_id: int | None = None

    def forwarded(self) -> Message:
        """The copy a relay transmits: one more hop, one less TTL (no reliable id).

        Built directly, not with ``dataclasses.replace``: relays call this for
        every copy they forward."""
        return Message(self.type, self.id, self.body, self.hop + 1, self.ttl - 1, self.flags)


LINK_PROTOCOL_ID = 0
"""Frame-header protocol id of the link layer's own frames (beacons); no protocol takes it."""

FIRST_PROTOCOL_TYPE = 16
"""Message types 0..15 belong to the core (ACKs, beacons); protocols use 16+."""


class CoreType(enum.IntEnum):
    ACK = 1
    BEACON = 2


@dataclass(frozen=True, slots=True)
class Position:
    """A position in local metres about the deployment origin (x east, y north).

    ``error_m`` is the estimated horizontal error (from HDOP, or 0 for
    configured coordinates); ``fixed_at`` is the driver time of the fix.
    """

    x: float
    y: float
    z: float = 0.0
    error_m: float = 0.0
    fixed_at: float = 0.0


@dataclass(frozen=True, slots=True)
class NeighborInfo:
    """What the driver knows of a one-hop neighbour."""

    node: NodeId
    position: Position | None = None
    link_quality: float = 1.0
    """Estimated probability that a frame to/from this neighbour arrives (0..1]."""
    protocol: str = ""
    capabilities: tuple[str, ...] = ()
    """What the neighbour advertises it is: its roles (``meshsub.core.roles``), e.g.
    ``("base_station",)``; a protocol reads a static base station or a ferry here."""


# ----------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FrameReceived:
    now: float
    sender: NodeId
    message: Message
    link: str = ""


@dataclass(frozen=True, slots=True)
class NeighborUp:
    now: float
    neighbor: NeighborInfo


@dataclass(frozen=True, slots=True)
class NeighborChanged:
    now: float
    neighbor: NeighborInfo


@dataclass(frozen=True, slots=True)
class NeighborDown:
    now: float
    node: NodeId


@dataclass(frozen=True, slots=True)
class PositionChanged:
    """Own position, already quality-gated by the driver; ``None`` means no fix."""

    now: float
    position: Position | None


@dataclass(frozen=True, slots=True)
class EnergyChanged:
    """The node's energy store changed (or was read for the first time).

    ``fraction`` is the remaining battery charge in [0, 1], ``None`` when the
    driver cannot tell; ``on_mains`` says the node is powered externally (a
    base station, a laptop on its charger). The daemon reads the Linux
    power-supply class (``/sys/class/power_supply``), the simulator its energy
    model; a driver that knows nothing sends nothing.
    """

    now: float
    fraction: float | None
    on_mains: bool = False


@dataclass(frozen=True, slots=True)
class TimerFired:
    now: float
    name: str


@dataclass(frozen=True, slots=True)
class LocalSubscribe:
    now: float
    sub_id: str
    subscription: Subscription


@dataclass(frozen=True, slots=True)
class LocalUnsubscribe:
    now: float
    sub_id: str


@dataclass(frozen=True, slots=True)
class LocalPublish:
    """An application published ``event``; the driver assigned (and persisted) its id."""

    now: float
    event: Event
    event_id: MessageId


@dataclass(frozen=True, slots=True)
class Stopping:
    """The driver is stopping (daemon shutdown, end of a simulated run).

    The protocol's last input: it records what it still holds for telemetry
    (the pending drop summaries, ``meshsub.core.protocol``); a driver carries
    out the ``Emit`` actions it returns and may ignore the rest.
    """

    now: float


Input: TypeAlias = (
    FrameReceived
    | NeighborUp
    | NeighborChanged
    | NeighborDown
    | PositionChanged
    | EnergyChanged
    | TimerFired
    | LocalSubscribe
    | LocalUnsubscribe
    | LocalPublish
    | Stopping
)


# ----------------------------------------------------------------------------
# Actions
# ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendTo:
    """Unicast ``message`` to one neighbour."""

    node: NodeId
    message: Message


@dataclass(frozen=True, slots=True)
class SendToMany:
    """Send ``message`` to several neighbours (one transmission per neighbour)."""

    nodes: frozenset[NodeId]
    message: Message


@dataclass(frozen=True, slots=True)
class Broadcast:
    """One-hop broadcast: every neighbour in range may hear one transmission."""

    message: Message


@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand ``event`` to the local subscription ``sub_id`` (already exactly matched)."""

    sub_id: str
    event: Event
    event_id: MessageId
    hop: int
    published_at: float | None = None


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Arm (or re-arm) the timer ``name`` to fire at driver time ``at``."""

    name: str
    at: float


@dataclass(frozen=True, slots=True)
class CancelTimer:
    name: str


@dataclass(frozen=True, slots=True)
class Emit:
    """A telemetry record; the driver adds node, run, protocol and timestamps."""

    event: str
    attrs: Mapping[str, TelemetryValue] = field(default_factory=dict)


Action: TypeAlias = SendTo | SendToMany | Broadcast | Deliver | SetTimer | CancelTimer | Emit
