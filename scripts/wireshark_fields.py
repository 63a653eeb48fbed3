#!/usr/bin/env python3
"""Regenerate the message tables of deploy/wireshark/meshsub.lua from the protocols' code.

    .venv/bin/python scripts/wireshark_fields.py           # rewrite the table
    .venv/bin/python scripts/wireshark_fields.py --check   # exit 1 if it is stale

Only the part between ``-- messages:begin`` and ``-- messages:end`` is written. Message
type names come from the code: every registered protocol's ``message_kinds`` and the
upper-case constants of its modules with those values (so a new or renumbered message
type shows up here, and ``--check`` fails until the table is regenerated). Body field
names are the positional layouts of the protocols' encoders: the field names of the message
dataclasses whose ``encode`` lists their fields in order (``CLASS_LAYOUTS``, checked here),
and hand-written layouts where a body is built otherwise (``BODY_FIELDS``, as in
docs/protocols/NAME.md, "Messages"). tests/unit/test_wireshark_dissector.py encodes real
messages with each protocol's own encoder and checks every named field tshark prints.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import sys
import textwrap
from pathlib import Path
from typing import Any

from meshsub.core.registry import available, get_protocol

LUA = Path(__file__).resolve().parent.parent / "deploy" / "wireshark" / "meshsub.lua"
BEGIN, END = "-- messages:begin", "-- messages:end"

#: a body layout: positional names; ``(name, layout)`` names an element that is itself
#: an array and the names of its elements; ``Each(item)``: a list, every element ``item``
Layout = Any


@dataclasses.dataclass(frozen=True)
class Each:
    """A body (or element) that is a list of like elements, each named ``item`` (a name, or
    ``(name, layout)``): epidemic's id lists, PULL's interests, BRVST's entries."""

    item: Any

_EVENT_AT = ["event", "published_at"]
_ENVELOPE = ["cell_x", "cell_y", "topic", "dest", "redirects", "geo"]
_ENVELOPE_TAIL = ["stage", "also"]
_HESPER_SUBSCRIBE = ["sub_id", "filter", "client", "origin_shb", "variant", "hop_count",
                     "route_record", "seq", "refresh"]
_HESPER_REPLY = ["sub_id", "replier", "replier_cell", "kind", "new_links", "total_hops",
                 "route_record", "index", "seq", "sub_hops"]
_HESPER_CONFIRM = ["sub_id", "route_record", "replier_cell", "index", "filter"]
_HESPER_EVENT = ["event", "region", "publisher", "published_at", "to_client"]
_HESPER_UNSUBSCRIBE = ["sub_id", "filter", "sender"]
_HESPER_BROKER_UPDATE = ["cell", "old_broker", "new_broker", "new_x", "new_y", "epoch"]


def _enveloped(payload: Layout) -> Layout:
    """HESPER's broker-to-broker envelope (Zheng 2008, §4.2) around a message's payload."""
    return [*_ENVELOPE, ("payload", payload), *_ENVELOPE_TAIL]


_ID = ("id", ["origin", "epoch", "seq"])  # a MessageId on the wire
_CELL = ["gx", "gy"]
# PUMA and paging (Zheng 2008, §5.3-5.4; docs/protocols/puma.md, "Messages"): messages for
# the previous broker travel in a routed envelope whose inner list depends on the type
_PUMA_ROUTED = ["dest", "client", "cell", "base"]
_PUMA = {
    "BEACON": _CELL,
    "DELIVER": ["client", "root_node", "root", "phase", "published_at", "event",
                ("tree", Each(("cell", ["gx", "gy", "parent"])))],
    "REPLY": [*_PUMA_ROUTED, ("inner", [_ID])],
    "HELLO": [*_PUMA_ROUTED, "inner"],
    "REPORT": [*_PUMA_ROUTED, "inner"],
    "REFRESH": [*_PUMA_ROUTED, ("inner", ["sub_id", "version", "filter"])],
    "UNSUBSCRIBE": [*_PUMA_ROUTED, ("inner", ["sub_id", "version"])],
}
# BRVST (docs/protocols/brvst.md, "Messages"): types 18-31 travel in the routed envelope
_BRVST_ENVELOPE = ["kind", "ax", "ay", "dest", "target_x", "target_y", "epoch", "redirects",
                   "geo"]
_BRVST_SENDER = ("sender", ["node", "x", "y", "epoch"])
_BRVST_PUB = ("pub", [_ID, "event", "published_at"])
_BRVST_ENTRIES = ("entries", Each(("entry", Each(("arv", ["attr", "level", "bitmap"])))))
_BRVST_SUMMARY = ["ax", "ay", _BRVST_SENDER, "version", "reason", _BRVST_ENTRIES, "cfg",
                  "predecessor"]
_BRVST_PUB_DOWN = [_BRVST_PUB, "origin_zone_x", "origin_zone_y", "origin_grid_x",
                   "origin_grid_y", "from_cache", "for_sub", _BRVST_SENDER]
_BRVST_PAYLOADS: dict[str, Layout] = {
    "SUBSCRIBE": ["sub_id", "subscription", "subscriber", "x", "y", "refresh",
                  "want_history"],
    "UNSUBSCRIBE": ["sub_id", "subscriber"],
    "LOCATE": ["subscriber", "x", "y"],
    "GRSV_UPDATE": _BRVST_SUMMARY,
    "PUBLISH": [_BRVST_PUB, "origin_grid_x", "origin_grid_y"],
    "PUB_UP": [_BRVST_PUB, "origin_grid_x", "origin_grid_y"],
    "PUB_GRID": _BRVST_PUB_DOWN,
    "PUB_ZONE": _BRVST_PUB_DOWN,
    "DELIVER": [_BRVST_PUB, "sub_ids"],
    "ZRSV_UPDATE": _BRVST_SUMMARY,
    "PUB_ADVERT": ["origin_zone_x", "origin_zone_y", _BRVST_SENDER, "pub_id",
                   ("attrs", Each(("attr", ["name", "value"])))],
    "SUB_HISTORY": ["grid_x", "grid_y", _BRVST_SENDER, "sub_key", "subscription"],
    "SUB_QUERY": ["origin_zone_x", "origin_zone_y", _BRVST_SENDER, _BRVST_ENTRIES],
    "STATE_XFER": ["level", "ax", "ay", "epoch", "manager", "state"],
}
_BRVST = {
    "ANNOUNCE": ["level", "ax", "ay", "manager", "epoch", "x", "y", "score", "inherited",
                 "cfg"],
    "RESIGN": ["level", "ax", "ay", "manager", "epoch", "successor"],
    **{name: [*_BRVST_ENVELOPE, ("payload", payload)]
       for name, payload in _BRVST_PAYLOADS.items()},
}

#: protocol name -> message type name -> body layout
BODY_FIELDS: dict[str, dict[str, Layout]] = {
    "flooding": {"DATA": _EVENT_AT},
    "epidemic": {"DATA": [*_EVENT_AT, "remaining_s"], "VECTOR": Each(_ID),
                 "REQUEST": Each(_ID)},
    "pull": {"DATA": [*_EVENT_AT, "remaining_s"], "INTEREST": Each("subscription")},
    "hesper": {
        "SUBSCRIBE": _enveloped(_HESPER_SUBSCRIBE),
        "REPLY": _enveloped(_HESPER_REPLY),
        "CONFIRM": _enveloped(_HESPER_CONFIRM),
        "EVENT": _enveloped(_HESPER_EVENT),
        "UNSUBSCRIBE": _enveloped(_HESPER_UNSUBSCRIBE),
        "BROKER_UPDATE": _enveloped(_HESPER_BROKER_UPDATE),
        "STATE_TRANSFER": ["topic", "cell", "entries", "epoch"],
        "BEACON": ["x", "y", "cell", "energy", "retiring", "claims"],
    },
    "df": {"SUBSCRIBE": ["sub_id", "subscription", "geo"], "UNSUBSCRIBE": ["sub_id"],
           "EVENT": ["event", "region", "published_at", "mode", "geo"]},
    "dr": {"SUBSCRIBE": ["sub_node", "sub_id", "x", "y", "lo", "hi", "lease_s",
                         "subscription"],
           "PUBLISH": ["y0", "key", "event", "published_at"],
           "NOTIFY": ["sub_node", "x", "y", "sub_ids", "event", "published_at"]},
    "tg": {"PUBLISH": ["gid", "scope", "group_ttl", "visited", "event", "published_at"]},
    "dibs": {"ATTACH_NAK": ["reason"], "DETACH": ["slot"]},
    "puma": _PUMA,
    "paging": _PUMA,
    "brvst": _BRVST,
}


#: PUMA's and paging's messages that are their dataclasses' fields in order
_PUMA_CLASSES = ("meshsub.protocols.puma.messages", {
    "SUBSCRIBE": "Subscribe", "PUBLISH": "Publish", "SUB_PROPAGATE": "SubPropagate",
    "UNSUB_PROPAGATE": "UnsubPropagate", "EVENT": "EventMsg", "LOCAL": "Local",
    "PAGE": "Page"})
#: protocols whose messages are dataclasses encoded field by field, in order: the layout
#: is the class's field names (checked against its encoder's list below)
CLASS_LAYOUTS: dict[str, tuple[str, dict[str, str]]] = {
    "bsub": ("meshsub.protocols.bsub.wire", {
        "IDENT": "Ident", "DESIGNATE": "Designate", "FILTER": "FilterMsg", "DATA": "Data",
        "OFFER": "Offer", "REQUEST": "Request", "ROLE": "RoleMsg"}),
    "st": ("meshsub.protocols.st.messages", {"SUBS": "Subs", "PUBLISH": "Publish"}),
    "giant": ("meshsub.protocols.giant.messages", {
        "HELLO": "Hello", "ADV": "Adv", "BUNDLE": "Bundle"}),
    "puma": _PUMA_CLASSES,
    "paging": _PUMA_CLASSES,
    "dibs": ("meshsub.protocols.dibs.messages", {
        "HEARTBEAT": "Heartbeat", "ATTACH_REQ": "AttachReq", "ATTACH_ACK": "AttachAck",
        "SUBSCRIBE": "Query", "PUBLISH": "Publish", "NOTIFY": "Notify"}),
}
#: the group-tree messages TG and ST share (meshsub.core.cluster.messages, Liu 2011, §3)
_CLUSTER = ("meshsub.core.cluster.messages", {
    "HELLO": "Hello", "JOIN_QUERY": "JoinQuery", "JOIN_REPLY": "JoinReply",
    "JOIN_SELECT": "JoinSelect", "JOIN_CONFIRM": "JoinConfirm", "JOIN_REJECT": "JoinReject",
    "LEADER_ANNOUNCE": "LeaderAnnounce", "REPORT": "Report", "GROUP_INFO": "GroupInfo",
    "GATEWAY_STATUS": "GatewayStatus", "MERGE_REQUEST": "MergeRequest",
    "MERGE_REPLY": "MergeReply", "REROOT": "Reroot", "DETACH": "Detach", "LEAVE": "Leave"})
SHARED_LAYOUTS: dict[str, list[tuple[str, dict[str, str]]]] = {"tg": [_CLUSTER],
                                                                "st": [_CLUSTER]}


def _class_layout(module: str, name: str) -> Layout:
    """A dataclass's field names, if its ``encode`` returns one list of exactly those."""
    cls = getattr(importlib.import_module(module), name)
    names = [f.name for f in dataclasses.fields(cls)]
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls.encode)))
    returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return)]
    if len(returns) != 1 or not isinstance(returns[0], ast.List) \
            or len(returns[0].elts) != len(names):
        raise SystemExit(f"wireshark_fields: {module}.{name}.encode is not its fields in order")
    return names


def body_fields() -> dict[str, dict[str, Layout]]:
    """Every layout: the hand-written ones and those of the message classes."""
    out = {proto: dict(layouts) for proto, layouts in BODY_FIELDS.items()}
    sources = [(proto, spec) for proto, spec in CLASS_LAYOUTS.items()]
    sources += [(proto, spec) for proto, specs in SHARED_LAYOUTS.items() for spec in specs]
    for proto, (module, classes) in sources:
        out.setdefault(proto, {}).update(
            {const: _class_layout(module, cls) for const, cls in classes.items()})
    return out


def _modules(cls: type) -> list[Any]:
    """The modules that may name ``cls``'s message types, nearest first: the modules of
    its classes (MRO) and the ``messages``/``wire`` modules of their packages."""
    out: list[Any] = []
    for klass in cls.__mro__:
        name = klass.__module__
        for candidate in (name, name.rsplit(".", 1)[0] + ".messages",
                          name.rsplit(".", 1)[0] + ".wire"):
            try:
                module = importlib.import_module(candidate)
            except ImportError:
                continue
            if module not in out:
                out.append(module)
    return out


def message_names() -> dict[int, tuple[str, dict[int, str]]]:
    """protocol id -> (protocol name, message type -> constant name), from the code."""
    out: dict[int, tuple[str, dict[int, str]]] = {}
    for name in available():
        cls = get_protocol(name)
        names: dict[int, str] = {}
        for module in _modules(cls):
            for const, value in vars(module).items():
                if (const.isupper() and type(value) is int and value in cls.message_kinds
                        and not const.startswith(("FIRST_", "MAX_")) and value not in names):
                    names[value] = const
        missing = sorted(set(cls.message_kinds) - set(names))
        if missing:
            raise SystemExit(f"wireshark_fields: {name}: no constant names types {missing}")
        out[cls.protocol_id] = (name, dict(sorted(names.items())))
    return dict(sorted(out.items()))


def _lua_item(item: Any) -> str:
    if isinstance(item, tuple):
        return f'{{ "{item[0]}", {_lua_layout(item[1])} }}'
    return f'"{item}"'


def _lua_layout(layout: Layout) -> str:
    if isinstance(layout, Each):
        return f"{{ each = {_lua_item(layout.item)} }}"
    parts = [_lua_item(item) for item in layout]
    return "{ " + ", ".join(parts) + " }" if parts else "{}"


def render() -> str:
    """The generated Lua block, markers included."""
    names = message_names()
    layouts = body_fields()
    unknown = set(layouts) - {n for n, _ in names.values()}
    if unknown:
        raise SystemExit(f"wireshark_fields: BODY_FIELDS names unknown protocols {unknown}")
    lines = [BEGIN,
             "-- Generated by scripts/wireshark_fields.py from the protocols' code: do not edit.",
             "-- [protocol id] = { name, { [message type] = { NAME, body layout or nil } } }",
             "local MESSAGES = {"]
    shared: list[str] = []  # protocols with the same messages as an earlier one (paging)
    blocks: dict[tuple[str, ...], int] = {}
    for pid, (name, types) in names.items():
        bodies = layouts.get(name, {})
        for type_name in set(bodies) - set(types.values()):
            raise SystemExit(f"wireshark_fields: {name} has no message type {type_name}")
        block = tuple(f'        [{mtype}] = {{ "{const}"'
                      + (f", {_lua_layout(bodies[const])}" if const in bodies else "") + " },"
                      for mtype, const in types.items())
        if block in blocks:
            shared.append(f'MESSAGES[{pid}] = {{ "{name}", MESSAGES[{blocks[block]}][2] }}')
            continue
        blocks[block] = pid
        lines += [f'    [{pid}] = {{ "{name}", {{', *block, "    } },"]
    lines += ["}", *shared, END]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + block + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if stale")
    args = parser.parse_args(argv)
    old = LUA.read_text()
    new = replace_block(old, render())
    if new == old:
        return 0
    if args.check:
        print(f"stale: {LUA} (run scripts/wireshark_fields.py)")
        return 1
    LUA.write_text(new)
    print(f"written: {LUA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
