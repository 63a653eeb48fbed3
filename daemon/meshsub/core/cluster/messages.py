"""Messages of the group-tree machine: msgpack bodies inside the meshsub frame.

The thesis names the join query and reply, the parent's notification (group
ID, leader ID, level), the leader announcement, the bitmap sent to the parent
with the level and gateway flag piggybacked, the leader's answer to a gateway
and the heartbeat (Liu 2011, §3.1-3.5). The others make the machine complete
(selection, rejection, re-rooting, detaching, leaving, merge locks). The frame
already names the sender, authenticates and numbers; every message travels
one hop (``ttl`` 1). The leader of a group is ``gid.leader``; a level is the
length of a path (root first, sender last).

Every ``decode`` raises ``BodyError`` (a ``ValueError``) with a one-line
reason for anything malformed, which the protocol counts as a ``malformed``
drop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies as b
from meshsub.core.api import FIRST_PROTOCOL_TYPE, MsgKind, NodeId
from meshsub.core.cluster.ids import (
    DetachKind,
    GatewayRecord,
    GroupId,
    MergeRole,
    Purpose,
    Status,
)

HELLO = FIRST_PROTOCOL_TYPE
JOIN_QUERY = FIRST_PROTOCOL_TYPE + 1
JOIN_REPLY = FIRST_PROTOCOL_TYPE + 2
JOIN_SELECT = FIRST_PROTOCOL_TYPE + 3
JOIN_CONFIRM = FIRST_PROTOCOL_TYPE + 4
JOIN_REJECT = FIRST_PROTOCOL_TYPE + 5
LEADER_ANNOUNCE = FIRST_PROTOCOL_TYPE + 6
REPORT = FIRST_PROTOCOL_TYPE + 7
GROUP_INFO = FIRST_PROTOCOL_TYPE + 8
GATEWAY_STATUS = FIRST_PROTOCOL_TYPE + 9
MERGE_REQUEST = FIRST_PROTOCOL_TYPE + 10
MERGE_REPLY = FIRST_PROTOCOL_TYPE + 11
REROOT = FIRST_PROTOCOL_TYPE + 12
DETACH = FIRST_PROTOCOL_TYPE + 13
LEAVE = FIRST_PROTOCOL_TYPE + 14
FIRST_OWN_TYPE = FIRST_PROTOCOL_TYPE + 16
"""A protocol built on the machine numbers its own messages from here."""

KINDS: dict[int, MsgKind] = {t: MsgKind.CONTROL for t in range(HELLO, LEAVE + 1)}
KINDS[REPORT] = MsgKind.SUBSCRIPTION
"""Everything is tree maintenance except the report, which carries the subscription summary."""

MAX_PATH = 255
MAX_GROUPS = 4
MAX_CHILDREN = 64
MAX_LINKED = 16
MAX_GW_RECORDS = 64
MAX_SUMMARY = 8192 + 64
"""Largest summary accepted (a 64 Kibit Bloom filter and its header)."""
U32 = 0xFFFF_FFFF


def _path(value: Any, what: str = "path") -> tuple[NodeId, ...]:
    nodes = tuple(b.node(n, what) for n in b.items(value, what, MAX_PATH))
    if len(set(nodes)) != len(nodes):
        raise b.BodyError(f"{what}: a node appears twice")
    return nodes


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise b.BodyError(f"{what}: expected true or false")
    return value


def _summary(value: Any) -> bytes:
    if not isinstance(value, bytes | bytearray) or len(value) > MAX_SUMMARY:
        raise b.BodyError(f"summary: expected at most {MAX_SUMMARY} bytes")
    return bytes(value)


def _gid_or_none(value: Any, what: str) -> GroupId | None:
    return None if value is None else GroupId.decode(value, what)


def _level(value: Any, what: str = "level") -> int:
    return b.integer(value, what, 0, MAX_PATH)


def _u32(value: Any, what: str) -> int:
    return b.integer(value, what, 0, U32)


def _enum(cls: Any, value: Any, what: str) -> Any:
    try:
        return cls(b.integer(value, what, 0, 255))
    except ValueError:
        raise b.BodyError(f"{what}: unknown value {value!r}") from None


def _memberships(value: Any) -> tuple[tuple[GroupId, int], ...]:
    out = []
    for item in b.items(value, "memberships", MAX_GROUPS):
        gid, level = b.fields(item, 2, "membership")
        out.append((GroupId.decode(gid), _level(level)))
    return tuple(out)


def _records(value: Any) -> tuple[GatewayRecord, ...]:
    return tuple(GatewayRecord.decode(r, MAX_PATH)
                 for r in b.items(value, "gw_records", MAX_GW_RECORDS))


@dataclass(frozen=True, slots=True)
class HelloGroup:
    """One membership as a heartbeat announces it."""

    gid: GroupId
    level: int
    parent: NodeId | None
    anchored: bool
    open: bool
    """The sender would answer a join query for this group (anchored, room, shallow enough)."""
    root_seq: int
    cur_hl: int
    linked: tuple[GroupId, ...]
    """Groups this one reaches through an active gateway (copied from the parent)."""
    children: tuple[NodeId, ...]

    def wire(self) -> list[Any]:
        return [self.gid.wire(), self.level, self.parent, self.anchored, self.open,
                self.root_seq, self.cur_hl, [g.wire() for g in self.linked],
                list(self.children)]

    @classmethod
    def decode(cls, value: Any) -> HelloGroup:
        gid, level, parent, anchored, open_, root_seq, cur_hl, linked, children = b.fields(
            value, 9, "HELLO group")
        return cls(GroupId.decode(gid), _level(level),
                   None if parent is None else b.node(parent, "parent"),
                   _bool(anchored, "anchored"), _bool(open_, "open"), _u32(root_seq, "root_seq"),
                   _level(cur_hl, "cur_hl"),
                   tuple(GroupId.decode(g, "linked") for g in b.items(linked, "linked",
                                                                      MAX_LINKED)),
                   tuple(b.node(c, "child") for c in b.items(children, "children",
                                                             MAX_CHILDREN)))


@dataclass(frozen=True, slots=True)
class Hello:
    """The heartbeat (§3.5), one broadcast for all tree neighbours and joiners nearby."""

    capable: bool
    groups: tuple[HelloGroup, ...]

    def encode(self) -> list[Any]:
        return [self.capable, [g.wire() for g in self.groups]]

    @classmethod
    def decode(cls, body: Any) -> Hello:
        capable, groups = b.fields(body, 2, "HELLO")
        return cls(_bool(capable, "capable"),
                   tuple(HelloGroup.decode(g) for g in b.items(groups, "groups", MAX_GROUPS)))


def hello_size(hello: Hello) -> int:
    """Bytes a HELLO takes in a neighbour's table: its fields as 32-bit words, ids and lists."""
    return 4 + sum(24 + 12 * len(g.linked) + 4 * len(g.children) for g in hello.groups)


@dataclass(frozen=True, slots=True)
class JoinQuery:
    purpose: Purpose
    nonce: int
    memberships: tuple[tuple[GroupId, int], ...]
    """The joiner's groups and levels: members of these do not answer (§3.1 loop rule)."""
    repair_gid: GroupId | None
    subtree_height: int
    last_root_seq: int

    def encode(self) -> list[Any]:
        return [int(self.purpose), self.nonce, [[g.wire(), lv] for g, lv in self.memberships],
                None if self.repair_gid is None else self.repair_gid.wire(),
                self.subtree_height, self.last_root_seq]

    @classmethod
    def decode(cls, body: Any) -> JoinQuery:
        purpose, nonce, members, repair, height, seq = b.fields(body, 6, "JOIN_QUERY")
        p = _enum(Purpose, purpose, "purpose")
        gid = _gid_or_none(repair, "repair_gid")
        if (p is Purpose.REPAIR) != (gid is not None):
            raise b.BodyError("JOIN_QUERY: a repair names its group, other queries none")
        return cls(p, _u32(nonce, "nonce"), _memberships(members), gid,
                   _level(height, "subtree_height"), _u32(seq, "last_root_seq"))


@dataclass(frozen=True, slots=True)
class JoinReply:
    """An offer: group, the replier's path (so level), its subtree summary (§3.3)."""

    nonce: int
    gid: GroupId
    path: tuple[NodeId, ...]
    """Root first, the replier last: the joiner's path if it joins here."""
    summary: bytes
    root_seq: int
    cur_hl: int

    @property
    def level(self) -> int:
        return len(self.path) - 1

    def encode(self) -> list[Any]:
        return [self.nonce, self.gid.wire(), list(self.path), self.summary, self.root_seq,
                self.cur_hl]

    @classmethod
    def decode(cls, body: Any) -> JoinReply:
        nonce, gid, path, summary, seq, cur_hl = b.fields(body, 6, "JOIN_REPLY")
        p = _path(path)
        if not p:
            raise b.BodyError("JOIN_REPLY: the path names at least the replier")
        return cls(_u32(nonce, "nonce"), GroupId.decode(gid), p, _summary(summary),
                   _u32(seq, "root_seq"), _level(cur_hl, "cur_hl"))


@dataclass(frozen=True, slots=True)
class JoinSelect:
    """The joiner agrees to the parent-child link (§3.3 "notify the nodes ...")."""

    nonce: int
    gid: GroupId
    purpose: Purpose
    memberships: tuple[tuple[GroupId, int], ...]
    subtree_height: int

    def encode(self) -> list[Any]:
        return [self.nonce, self.gid.wire(), int(self.purpose),
                [[g.wire(), lv] for g, lv in self.memberships], self.subtree_height]

    @classmethod
    def decode(cls, body: Any) -> JoinSelect:
        nonce, gid, purpose, members, height = b.fields(body, 5, "JOIN_SELECT")
        return cls(_u32(nonce, "nonce"), GroupId.decode(gid), _enum(Purpose, purpose, "purpose"),
                   _memberships(members), _level(height, "subtree_height"))


@dataclass(frozen=True, slots=True)
class JoinConfirm:
    """The parent's notification: group, leader (the gid's) and level (§3.1)."""

    nonce: int
    gid: GroupId
    path: tuple[NodeId, ...]
    """The joiner's new path: root first, the parent last."""
    root_seq: int
    cur_hl: int

    def encode(self) -> list[Any]:
        return [self.nonce, self.gid.wire(), list(self.path), self.root_seq, self.cur_hl]

    @classmethod
    def decode(cls, body: Any) -> JoinConfirm:
        nonce, gid, path, seq, cur_hl = b.fields(body, 5, "JOIN_CONFIRM")
        p = _path(path)
        if not p:
            raise b.BodyError("JOIN_CONFIRM: the path names at least the parent")
        return cls(_u32(nonce, "nonce"), GroupId.decode(gid), p, _u32(seq, "root_seq"),
                   _level(cur_hl, "cur_hl"))


@dataclass(frozen=True, slots=True)
class JoinReject:
    nonce: int
    reason: str

    def encode(self) -> list[Any]:
        return [self.nonce, self.reason]

    @classmethod
    def decode(cls, body: Any) -> JoinReject:
        nonce, reason = b.fields(body, 2, "JOIN_REJECT")
        return cls(_u32(nonce, "nonce"), b.text(reason, "reason", 32))


@dataclass(frozen=True, slots=True)
class LeaderAnnounce:
    """A new leader's announcement (§3.1); joiners treat it as a reply at level 0."""

    gid: GroupId
    summary: bytes

    def encode(self) -> list[Any]:
        return [self.gid.wire(), self.summary]

    @classmethod
    def decode(cls, body: Any) -> LeaderAnnounce:
        gid, summary = b.fields(body, 2, "LEADER_ANNOUNCE")
        return cls(GroupId.decode(gid), _summary(summary))


@dataclass(frozen=True, slots=True)
class Report:
    """A child's summary of its subtree, sent to its parent (§3.2, §3.1).

    The thesis's merged bitmap with the level number and the gateway flag,
    group ID and level piggybacked: here the deepest level of the subtree and
    every gateway record in it.
    """

    gid: GroupId
    seq: int
    summary: bytes
    depth: int
    gw_records: tuple[GatewayRecord, ...]
    refresh: bool

    def encode(self) -> list[Any]:
        return [self.gid.wire(), self.seq, self.summary, self.depth,
                [r.wire() for r in self.gw_records], self.refresh]

    @classmethod
    def decode(cls, body: Any) -> Report:
        gid, seq, summary, depth, records, refresh = b.fields(body, 6, "REPORT")
        return cls(GroupId.decode(gid), _u32(seq, "seq"), _summary(summary),
                   _level(depth, "depth"), _records(records), _bool(refresh, "refresh"))


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """Parent to child: your group, path, anchoring and freshness now (§3.1 level refresh)."""

    prev_gid: GroupId
    """The group the child was in under this parent (the sender's previous one)."""
    gid: GroupId
    path: tuple[NodeId, ...]
    anchored: bool
    root_seq: int
    cur_hl: int
    topo: int
    """The sender's topology version: an older one than already applied is stale."""

    def encode(self) -> list[Any]:
        return [self.prev_gid.wire(), self.gid.wire(), list(self.path), self.anchored,
                self.root_seq, self.cur_hl, self.topo]

    @classmethod
    def decode(cls, body: Any) -> GroupInfo:
        prev, gid, path, anchored, seq, cur_hl, topo = b.fields(body, 7, "GROUP_INFO")
        p = _path(path)
        if not p:
            raise b.BodyError("GROUP_INFO: the path names at least the parent")
        return cls(GroupId.decode(prev, "prev_gid"), GroupId.decode(gid), p,
                   _bool(anchored, "anchored"), _u32(seq, "root_seq"), _level(cur_hl, "cur_hl"),
                   _u32(topo, "topo"))


@dataclass(frozen=True, slots=True)
class GatewayStatus:
    """Leader to gateway candidate, routed down the tree (§3.1 "send back the curHL")."""

    gid: GroupId
    target: NodeId
    adjacent: GroupId
    status: Status
    cur_hl: int

    def encode(self) -> list[Any]:
        return [self.gid.wire(), self.target, self.adjacent.wire(), int(self.status),
                self.cur_hl]

    @classmethod
    def decode(cls, body: Any) -> GatewayStatus:
        gid, target, adjacent, status, cur_hl = b.fields(body, 5, "GATEWAY_STATUS")
        return cls(GroupId.decode(gid), b.node(target, "target"),
                   GroupId.decode(adjacent, "adjacent"), _enum(Status, status, "status"),
                   _level(cur_hl, "cur_hl"))


@dataclass(frozen=True, slots=True)
class MergeRequest:
    """Gateway to a leader, routed up: may I merge ``small`` into ``big`` (a + b + c <= L)?"""

    target: GroupId
    role: MergeRole
    small: GroupId
    big: GroupId
    a: int
    b: int
    c: int
    gw: NodeId
    rid: int
    route: tuple[NodeId, ...]
    """Nodes the request passed, the gateway first: the reply's way back."""

    def encode(self) -> list[Any]:
        return [self.target.wire(), int(self.role), self.small.wire(), self.big.wire(),
                self.a, self.b, self.c, self.gw, self.rid, list(self.route)]

    @classmethod
    def decode(cls, body: Any) -> MergeRequest:
        target, role, small, big, a, bb, c, gw, rid, route = b.fields(body, 10, "MERGE_REQUEST")
        r = _path(route, "route")
        if not r:
            raise b.BodyError("MERGE_REQUEST: the route names at least the gateway")
        return cls(GroupId.decode(target, "target"), _enum(MergeRole, role, "role"),
                   GroupId.decode(small, "small"), GroupId.decode(big, "big"), _level(a, "a"),
                   _level(bb, "b"), _level(c, "c"), b.node(gw, "gw"), _u32(rid, "rid"), r)


@dataclass(frozen=True, slots=True)
class MergeReply:
    """A leader's answer, source-routed back along the request's route."""

    target: GroupId
    rid: int
    gw: NodeId
    grant: bool
    route: tuple[NodeId, ...]
    """Nodes still to visit, the gateway first, the next hop last."""

    def encode(self) -> list[Any]:
        return [self.target.wire(), self.rid, self.gw, self.grant, list(self.route)]

    @classmethod
    def decode(cls, body: Any) -> MergeReply:
        target, rid, gw, grant, route = b.fields(body, 5, "MERGE_REPLY")
        return cls(GroupId.decode(target, "target"), _u32(rid, "rid"), b.node(gw, "gw"),
                   _bool(grant, "grant"), _path(route, "route"))


@dataclass(frozen=True, slots=True)
class Reroot:
    """Child to parent along the absorbed group's old root path: I am your parent now."""

    old_gid: GroupId
    gid: GroupId
    path: tuple[NodeId, ...]
    """The receiver's new path (the sender last)."""
    root_seq: int
    cur_hl: int
    topo: int

    def encode(self) -> list[Any]:
        return [self.old_gid.wire(), self.gid.wire(), list(self.path), self.root_seq,
                self.cur_hl, self.topo]

    @classmethod
    def decode(cls, body: Any) -> Reroot:
        old, gid, path, seq, cur_hl, topo = b.fields(body, 6, "REROOT")
        p = _path(path)
        if not p:
            raise b.BodyError("REROOT: the path names at least the new parent")
        return cls(GroupId.decode(old, "old_gid"), GroupId.decode(gid), p, _u32(seq, "root_seq"),
                   _level(cur_hl, "cur_hl"), _u32(topo, "topo"))


@dataclass(frozen=True, slots=True)
class Detach:
    gid: GroupId
    kind: DetachKind
    topo: int

    def encode(self) -> list[Any]:
        return [self.gid.wire(), int(self.kind), self.topo]

    @classmethod
    def decode(cls, body: Any) -> Detach:
        gid, kind, topo = b.fields(body, 3, "DETACH")
        return cls(GroupId.decode(gid), _enum(DetachKind, kind, "kind"), _u32(topo, "topo"))


@dataclass(frozen=True, slots=True)
class Leave:
    gid: GroupId
    reason: str

    def encode(self) -> list[Any]:
        return [self.gid.wire(), self.reason]

    @classmethod
    def decode(cls, body: Any) -> Leave:
        gid, reason = b.fields(body, 2, "LEAVE")
        return cls(GroupId.decode(gid), b.text(reason, "reason", 32))


DECODERS: dict[int, Any] = {
    HELLO: Hello.decode, JOIN_QUERY: JoinQuery.decode, JOIN_REPLY: JoinReply.decode,
    JOIN_SELECT: JoinSelect.decode, JOIN_CONFIRM: JoinConfirm.decode,
    JOIN_REJECT: JoinReject.decode, LEADER_ANNOUNCE: LeaderAnnounce.decode,
    REPORT: Report.decode, GROUP_INFO: GroupInfo.decode, GATEWAY_STATUS: GatewayStatus.decode,
    MERGE_REQUEST: MergeRequest.decode, MERGE_REPLY: MergeReply.decode, REROOT: Reroot.decode,
    DETACH: Detach.decode, LEAVE: Leave.decode,
}
"""Message type -> body decoder, for every message of the machine."""
