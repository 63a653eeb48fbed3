"""Real protocol messages for the dissector's named fields (tests/unit/test_wireshark_dissector.py).

Every body is made by its protocol's own encoder (``to_wire``/``encode``/``encode_*``) and
read back by its own decoder, so a layout in scripts/wireshark_fields.py that does not
match the code fails the test. PULL and DF build their bodies inline in the protocol (no
encoder function): their lists are built as the protocol builds them and checked by the
protocol's decoder.
"""

from __future__ import annotations

from typing import Any

from meshsub.core.api import MessageId
from meshsub.core.buffer import message_id_to_obj
from meshsub.core.cluster import messages as cm
from meshsub.core.cluster.ids import GroupId
from meshsub.core.content import Event, Subscription
from meshsub.core.georouting import GeoHeader
from meshsub.core.grid import Cell
from meshsub.core.syntax import parse_subscription
from meshsub.core.tags import Scope
from meshsub.protocols import df, dr, epidemic, flooding, pull
from meshsub.protocols.brvst import messages as brm
from meshsub.protocols.bsub import wire as bw
from meshsub.protocols.dibs import messages as dm
from meshsub.protocols.giant import messages as gm
from meshsub.protocols.hesper import messages as hm
from meshsub.protocols.puma import messages as pm
from meshsub.protocols.st import messages as stm
from meshsub.protocols.tg import messages as tgm

EVENT = Event.from_wire(["field/t1", "unit", "C", "v", 7])
SUB = Subscription.from_wire(["field/#"])
K = 16  # DR's key bits


def _hesper(out: list[tuple[str, int, str, Any]]) -> None:
    geo = GeoHeader()
    payloads: list[tuple[int, str, Any]] = [
        (hm.SUBSCRIBE, "SUBSCRIBE", hm.Subscribe.from_wire(
            ["s1", SUB.to_wire(), 5, None, "II", 3, [[1, 2], [2, 2]], 9, False])),
        (hm.REPLY, "REPLY", hm.Reply.from_wire(
            ["s1", 6, [2, 2], hm.KIND_PHB, 1, 4, [[1, 2]], 0, 9, 2])),
        (hm.CONFIRM, "CONFIRM", hm.Confirm.from_wire(["s1", [[1, 2]], [2, 2], 0, SUB.to_wire()])),
        (hm.EVENT, "EVENT", hm.EventMsg.from_wire([EVENT.to_wire(), [3, 4], 5, 12.5, False])),
        (hm.UNSUBSCRIBE, "UNSUBSCRIBE", hm.Unsubscribe.from_wire(["s1", SUB.to_wire(),
                                                                  [0, 1, 2]])),
        (hm.BROKER_UPDATE, "BROKER_UPDATE", hm.BrokerUpdate.from_wire(
            [[1, 2], 5, 6, 30.5, 40.25, 3])),
    ]
    for mtype, name, payload in payloads:
        env = hm.Envelope(Cell(1, 2), "field/t1", 6, 1, geo, payload.to_wire(), hm.STAGE_BROKER)
        body = env.to_wire()
        assert hm.Envelope.from_wire(body).payload == payload.to_wire()
        out.append(("hesper", mtype, name, body))
    transfer = hm.StateTransfer.from_wire(["field/t1", [1, 2], [], 4])
    out.append(("hesper", hm.STATE_TRANSFER, "STATE_TRANSFER", transfer.to_wire()))
    beacon = hm.Beacon.from_wire([10.5, 20.25, [1, 2], 0.75, False, ["field/t1"]])
    out.append(("hesper", hm.BEACON, "BEACON", beacon.to_wire()))


def _dibs(out: list[tuple[str, int, str, Any]]) -> None:
    k = 16
    heartbeat = dm.Heartbeat(True, "01", 3, None, 1, False, (dm.DistEntry(3, 1, None, 2),),
                             ((6, 1),), 5.0)
    req = dm.AttachReq(dm.Reason(0), None, None)
    ack = dm.AttachAck(1, "01", 3)
    query = dm.Query(5, "s1", 5, 1, 3, 900, 3, "01", 60.0, SUB)
    publish = dm.Publish(3, 77, EVENT, 12.5)
    notify = dm.Notify(3, "01", 5, ("s1",), EVENT, 12.5, 2, 6)
    for mtype, name, message, body, back in [
            (dm.HEARTBEAT, "HEARTBEAT", heartbeat, heartbeat.encode(), dm.Heartbeat.decode),
            (dm.ATTACH_REQ, "ATTACH_REQ", req, req.encode(), dm.AttachReq.decode),
            (dm.ATTACH_ACK, "ATTACH_ACK", ack, ack.encode(), dm.AttachAck.decode),
            (dm.SUBSCRIBE, "SUBSCRIBE", query, query.encode(k),
             lambda body: dm.Query.decode(body, k)),
            (dm.PUBLISH, "PUBLISH", publish, publish.encode(k),
             lambda body: dm.Publish.decode(body, k)),
            (dm.NOTIFY, "NOTIFY", notify, notify.encode(), dm.Notify.decode)]:
        assert back(body) == message
        out.append(("dibs", mtype, name, body))
    out.append(("dibs", dm.ATTACH_NAK, "ATTACH_NAK", [1]))  # cres.py: [refuse]
    out.append(("dibs", dm.DETACH, "DETACH", [2]))  # cres.py: [slot]


def _giant(out: list[tuple[str, int, str, Any]]) -> None:
    hello = gm.Hello(True, Cell(1, 2), (MessageId(5, 1, 9),))
    adv = gm.Adv("field/t1", Cell(3, 4), (gm.SenderRecord(Cell(1, 2), 2, 3, 1, True),), 30.0)
    item = gm.EventItem(MessageId(5, 1, 9), Cell(3, 4), "field/t1", EVENT, 12.5)
    bundle = gm.Bundle(gm.Kind.EVENT, Cell(3, 4), Cell(1, 2), 0.5, 30.0, item)
    for mtype, name, message, back in [(gm.HELLO, "HELLO", hello, gm.Hello.decode),
                                       (gm.ADV, "ADV", adv, gm.Adv.decode),
                                       (gm.BUNDLE, "BUNDLE", bundle, gm.Bundle.decode)]:
        assert back(message.encode()) == message
        out.append(("giant", mtype, name, message.encode()))


def _lists(out: list[tuple[str, int, str, Any]]) -> None:
    """Epidemic's id lists (``_send_ids``) and PULL's interests (``on_neighbor_up``)."""
    ids = [message_id_to_obj(mid) for mid in (MessageId(5, 1, 9), MessageId(6, 2, 10))]
    assert epidemic.decode_ids(ids) == [MessageId(5, 1, 9), MessageId(6, 2, 10)]
    out.append(("epidemic", epidemic.VECTOR, "VECTOR", ids))
    out.append(("epidemic", epidemic.REQUEST, "REQUEST", ids[:1]))
    subs = [SUB.to_wire(), parse_subscription("alarms/# level>=3").to_wire()]
    assert [s.to_wire() for s in pull.decode_interest(subs)] == subs
    out.append(("pull", pull.INTEREST, "INTEREST", subs))


def _puma(out: list[tuple[str, int, str, Any]]) -> None:
    """PUMA's messages, and paging's (the same encoders, protocol id 8)."""
    tree = [[1, 2, -1], [2, 2, 0], [2, 3, 1]]
    deliver = pm.Deliver.decode([5, 6, [1, 2], pm.Phase.COLD, 12.5, EVENT.to_wire(), tree])
    messages: list[tuple[int, str, Any]] = [
        (pm.BEACON, "BEACON", pm.Beacon(Cell(1, 2))),
        (pm.SUBSCRIBE, "SUBSCRIBE", pm.Subscribe("s1", 3, SUB)),
        (pm.PUBLISH, "PUBLISH", pm.Publish(EVENT, 12.5)),
        (pm.SUB_PROPAGATE, "SUB_PROPAGATE", pm.SubPropagate("5/s1", 3, SUB, Cell(1, 2), 60.0)),
        (pm.UNSUB_PROPAGATE, "UNSUB_PROPAGATE", pm.UnsubPropagate("5/s1", 3)),
        (pm.EVENT, "EVENT", pm.EventMsg(EVENT, 12.5)),
        (pm.LOCAL, "LOCAL", pm.Local(6, Cell(1, 2), pm.Phase.HOT, 12.5, EVENT, True)),
        (pm.PAGE, "PAGE", pm.Page(Cell(3, 4), 5, 6, Cell(1, 2), 2, 12.5, EVENT))]
    made = [(mtype, name, message.encode()) for mtype, name, message in messages]
    made.append((pm.DELIVER, "DELIVER", deliver.encode_with(tree)))
    assert pm.Deliver.decode(made[-1][2]) == deliver
    for mtype, name, cls in [(pm.BEACON, "BEACON", pm.Beacon), (pm.SUBSCRIBE, "SUBSCRIBE",
                              pm.Subscribe), (pm.PAGE, "PAGE", pm.Page), (pm.LOCAL, "LOCAL",
                                                                          pm.Local)]:
        body = next(b for t, _, b in made if t == mtype)
        assert cls.decode(body).encode() == body, name
    mid = MessageId(5, 1, 9)
    for mtype, name, inner, back in [
            (pm.REPLY, "REPLY", pm.reply_inner(mid), pm.decode_reply),
            (pm.HELLO, "HELLO", (), lambda inner: pm.decode_empty(inner, "HELLO")),
            (pm.REPORT, "REPORT", (), lambda inner: pm.decode_empty(inner, "REPORT")),
            (pm.REFRESH, "REFRESH", pm.refresh_inner("s1", 3, SUB), pm.decode_refresh),
            (pm.UNSUBSCRIBE, "UNSUBSCRIBE", pm.unsubscribe_inner("s1", 3),
             pm.decode_unsubscribe)]:
        routed = pm.Routed(Cell(1, 2), 5, Cell(3, 4), 7, inner)
        body = routed.encode()
        assert pm.Routed.decode(body) == routed
        back(pm.Routed.decode(body).inner)
        made.append((mtype, name, body))
    for proto in ("puma", "paging"):
        out += [(proto, mtype, name, body) for mtype, name, body in made]


def _brvst(out: list[tuple[str, int, str, Any]]) -> None:
    """BRVST's floods and its routed envelope around every payload (to_wire/from_wire)."""
    pub = [[5, 1, 9], EVENT.to_wire(), 12.5]
    sender = [6, 10.5, 20.25, 4]
    entries = [[[1, 3, b"\xf0"], [4, 0, b"\x80"]], [[2, 2, b"\xc0"]]]
    cfg = b"\x01\x02\x03\x04"
    payloads: list[tuple[int, str, Any, list[Any]]] = [
        (brm.SUBSCRIBE, "SUBSCRIBE", brm.SubscribeMsg,
         ["s1", SUB.to_wire(), 5, 10.5, 20.25, False, True]),
        (brm.UNSUBSCRIBE, "UNSUBSCRIBE", brm.UnsubscribeMsg, ["s1", 5]),
        (brm.LOCATE, "LOCATE", brm.Locate, [5, 10.5, 20.25]),
        (brm.GRSV_UPDATE, "GRSV_UPDATE", brm.SummaryUpdate,
         [2, 3, sender, 7, 0, entries, cfg, None]),
        (brm.PUBLISH, "PUBLISH", brm.PubUp, [pub, 2, 3]),
        (brm.PUB_UP, "PUB_UP", brm.PubUp, [pub, 2, 3]),
        (brm.PUB_GRID, "PUB_GRID", brm.PubDown, [pub, 1, 1, 2, 3, False, [5, "s1"], sender]),
        (brm.PUB_ZONE, "PUB_ZONE", brm.PubDown, [pub, 1, 1, 2, 3, True, None, sender]),
        (brm.DELIVER, "DELIVER", brm.DeliverMsg, [pub, ["s1", "s2"]]),
        (brm.ZRSV_UPDATE, "ZRSV_UPDATE", brm.SummaryUpdate,
         [1, 1, sender, 8, 1, entries[:1], cfg, 9]),
        (brm.PUB_ADVERT, "PUB_ADVERT", brm.Advert,
         [1, 1, sender, [5, 1, 9], [["x_lo", 3], ["x_hi", 9]]]),
        (brm.SUB_HISTORY, "SUB_HISTORY", brm.SubHistory, [2, 3, sender, [5, "s1"],
                                                          SUB.to_wire()]),
        (brm.SUB_QUERY, "SUB_QUERY", brm.SubQuery, [1, 1, sender, entries]),
        (brm.STATE_XFER, "STATE_XFER", brm.StateXfer, [2, 1, 1, 4, 6, [["s1", 5]]]),
    ]
    for mtype, name, cls, wire in payloads:
        payload = cls.from_wire(wire)
        assert cls.from_wire(payload.to_wire()) == payload, name
        env = brm.Envelope(brm.Dest.GRID, 2, 3, 6, (10.5, 20.25), 4, 0, GeoHeader(),
                           payload.to_wire())
        body = env.to_wire()
        assert cls.from_wire(brm.Envelope.from_wire(body).payload) == payload, name
        out.append(("brvst", mtype, name, body))
    for mtype, name, cls, wire in [
            (brm.ANNOUNCE, "ANNOUNCE", brm.Announce,
             [2, 1, 1, 6, 4, 10.5, 20.25, 0.75, False, cfg]),
            (brm.RESIGN, "RESIGN", brm.Resign, [2, 1, 1, 6, 4, None])]:
        message = cls.from_wire(wire)
        assert cls.from_wire(message.to_wire()) == message
        out.append(("brvst", mtype, name, message.to_wire()))


def protocol_messages() -> list[tuple[str, int, str, Any]]:
    """(protocol name, message type, its NAME, body) for every layout the dissector has."""
    out: list[tuple[str, int, str, Any]] = []
    body: Any = flooding.encode_body(EVENT, 12.5)
    assert flooding.decode_body(body) == (EVENT, 12.5)
    out.append(("flooding", flooding.DATA, "DATA", body))
    body = epidemic.encode_data(EVENT.to_wire(), 12.5, 30.0)
    assert epidemic.decode_data(body) == (EVENT, 12.5, 30.0)
    out.append(("epidemic", epidemic.DATA, "DATA", body))
    body = [EVENT.to_wire(), 12.5, 30.0]  # Pull.on_publish's body
    assert pull.decode_data(body) == (EVENT, 12.5, 30.0)
    out.append(("pull", pull.DATA, "DATA", body))
    _hesper(out)
    geo = GeoHeader().to_wire()
    for mtype, name, body in [(df.SUBSCRIBE, "SUBSCRIBE", ["s1", SUB.to_wire(), geo]),
                              (df.EVENT, "EVENT", [EVENT.to_wire(), [3, 4], 12.5, df.TO_REGION,
                                                   geo]),
                              (df.UNSUBSCRIBE, "UNSUBSCRIBE", ["s1"])]:
        df._items(body, len(body))
        if mtype != df.UNSUBSCRIBE:
            df._geo(body[-1])
        out.append(("df", mtype, name, body))
    query = dr.LineQuery(5, "s1", 10.0, 20.0, 3, 900, 60.0, SUB)
    assert dr.LineQuery.decode(query.encode(K), K) == query
    out.append(("dr", dr.SUBSCRIBE, "SUBSCRIBE", query.encode(K)))
    line = dr.LinePublish(15.0, 77, EVENT, 12.5)
    assert dr.LinePublish.decode(line.encode(K), K) == line
    out.append(("dr", dr.PUBLISH, "PUBLISH", line.encode(K)))
    notify = dr.GeoNotify(5, 10.0, 20.0, ("s1", "s2"), EVENT, 12.5)
    assert dr.GeoNotify.decode(notify.encode()) == notify
    out.append(("dr", dr.NOTIFY, "NOTIFY", notify.encode()))
    for mtype, name, cls, wire in [
            (bw.IDENT, "IDENT", bw.Ident, [7, 3, 4, 99]),
            (bw.DESIGNATE, "DESIGNATE", bw.Designate, [7, 1]),
            (bw.FILTER, "FILTER", bw.FilterMsg, [7, b"\x01\x02"]),
            (bw.DATA, "DATA", bw.Data, [1, EVENT.to_wire(), 12.5, 30.0, [2, 3]]),
            (bw.OFFER, "OFFER", bw.Offer, [4, [[1, 2, 3, 1]]]),
            (bw.REQUEST, "REQUEST", bw.Request, [4, [[1, 2, 3]]]),
            (bw.ROLE, "ROLE", bw.RoleMsg, [7, 0])]:
        message = cls.decode(wire)
        assert cls.decode(message.encode()) == message
        out.append(("bsub", mtype, name, message.encode()))
    st_publish = stm.Publish(EVENT, 12.5)
    assert stm.Publish.decode(st_publish.encode()) == st_publish
    out.append(("st", stm.PUBLISH, "PUBLISH", st_publish.encode()))
    subs = stm.Subs.decode([3, 0, 0, 1, [SUB.to_wire()], []])
    assert stm.Subs.decode(subs.encode()) == subs
    out.append(("st", stm.SUBS, "SUBS", subs.encode()))
    _dibs(out)
    _giant(out)
    g1, g2 = [3, 1, 2], [4, 1, 1]
    hello_group = [g1, 1, 3, True, True, 5, 2, [g2], [6, 7]]
    record = [3, g1, 1, g2, 2, True]
    for mtype, name, cls, wire in [
            (cm.HELLO, "HELLO", cm.Hello, [True, [hello_group]]),
            (cm.JOIN_QUERY, "JOIN_QUERY", cm.JoinQuery, [0, 11, [[g2, 1]], None, 2, 5]),
            (cm.JOIN_REPLY, "JOIN_REPLY", cm.JoinReply, [11, g1, [3, 5], b"\x0f", 5, 2]),
            (cm.JOIN_SELECT, "JOIN_SELECT", cm.JoinSelect, [11, g1, 0, [], 1]),
            (cm.JOIN_CONFIRM, "JOIN_CONFIRM", cm.JoinConfirm, [11, g1, [3, 5], 5, 2]),
            (cm.JOIN_REJECT, "JOIN_REJECT", cm.JoinReject, [11, "full"]),
            (cm.LEADER_ANNOUNCE, "LEADER_ANNOUNCE", cm.LeaderAnnounce, [g1, b"\x0f"]),
            (cm.REPORT, "REPORT", cm.Report, [g1, 4, b"\x0f", 2, [record], False]),
            (cm.GROUP_INFO, "GROUP_INFO", cm.GroupInfo, [g2, g1, [3, 5], True, 5, 2, 9]),
            (cm.GATEWAY_STATUS, "GATEWAY_STATUS", cm.GatewayStatus, [g1, 6, g2, 0, 2]),
            (cm.MERGE_REQUEST, "MERGE_REQUEST", cm.MergeRequest,
             [g1, 0, g2, g1, 1, 2, 3, 6, 21, [6, 3]]),
            (cm.MERGE_REPLY, "MERGE_REPLY", cm.MergeReply, [g1, 21, 6, True, [6, 3]]),
            (cm.REROOT, "REROOT", cm.Reroot, [g2, g1, [6, 3], 5, 2, 9]),
            (cm.DETACH, "DETACH", cm.Detach, [g1, 1, 9]),
            (cm.LEAVE, "LEAVE", cm.Leave, [g1, "loop"])]:
        message = cls.decode(wire)
        assert cls.decode(message.encode()) == message
        for proto in ("tg", "st"):
            out.append((proto, mtype, name, message.encode()))
    publish = tgm.Publish(GroupId(3, 1, 2), Scope.GLOBAL, 2, (GroupId(4, 1, 1),), EVENT, 12.5)
    assert tgm.Publish.decode(publish.encode()) == publish
    out.append(("tg", tgm.PUBLISH, "PUBLISH", publish.encode()))
    _lists(out)
    _puma(out)
    _brvst(out)
    return out
