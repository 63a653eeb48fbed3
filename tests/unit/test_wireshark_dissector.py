"""The Wireshark dissector (deploy/wireshark/meshsub.lua) against the Python codec.

Frames are made by ``FrameCodec.encode`` (whole frames and fragments, every protocol id,
bodies of every msgpack type the protocols use), written to one pcap, and dissected by one
``tshark -X lua_script:`` run: every header field and every body leaf tshark prints must be
what the codec put in. Malformed frames (truncated, bad version, unknown flags, wrong array,
bad msgpack, stray bytes) must come out as Malformed expert info, not as a Lua error.
The same run dissects real messages of the protocols (tests/unit/wireshark_messages.py):
every frame is named ``meshsub.message`` = "PROTOCOL.TYPE" from the code's constants, and
every body layout of scripts/wireshark_fields.py shows each element under its name
(``meshsub.hesper.subscribe.payload.sub_id``). The Lua table must be what the generator
makes from the code today.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from meshsub.core.api import Message, MessageId
from meshsub.core.registry import get_protocol
from meshsub.wire import FrameCodec, KeyRing
from meshsub.wire.frame import packb, seal

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "deploy" / "wireshark" / "meshsub.lua"
PORT = 4790
KEYS = KeyRing.single(bytes(range(16)), key_id=3)

PROTOCOL_IDS = range(0, 15)
Dissected = tuple[list[Any], list[Any], list[Any]]
FIELDS = [
    *(f"meshsub.{n}" for n in ("protocol", "transmitter", "tx_epoch", "tx_seq", "type")),
    *(f"meshsub.{n}" for n in ("msg_flags", "origin", "origin_epoch", "seq", "hop", "ttl")),
    *(f"meshsub.{n}" for n in ("reliable_id", "body.leaf", "fragment.count", "key_id")),
    "_ws.expert.message",
]


def _load(name: str, path: Path) -> Any:
    """A module by path: the generator is a script, the builders sit beside this test
    (``--import-mode=importlib`` puts neither on sys.path)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


wireshark_fields = _load("wireshark_fields", ROOT / "scripts" / "wireshark_fields.py")
protocol_messages = _load("wireshark_messages",
                          Path(__file__).with_name("wireshark_messages.py")).protocol_messages


def _items(layout: Any, count: int | None = None) -> list[Any]:
    """A layout's element names, one per element of a body of ``count`` elements."""
    if isinstance(layout, wireshark_fields.Each):
        return [layout.item] * (1 if count is None else count)
    return list(layout)


def _abbrevs(prefix: str, layout: Any) -> list[str]:
    """Every field name a layout registers, nested ones included."""
    out = []
    for item in _items(layout):
        name = item[0] if isinstance(item, tuple) else item
        out.append(f"{prefix}.{name}")
        if isinstance(item, tuple):
            out += _abbrevs(f"{prefix}.{name}", item[1])
    return out


NAMED_FIELDS = ["meshsub.message", *(
    abbrev for proto, layouts in wireshark_fields.body_fields().items()
    for mtype, layout in layouts.items()
    for abbrev in _abbrevs(f"meshsub.{proto}.{mtype.lower()}", layout))]
FIELDS += NAMED_FIELDS
BODIES: list[Any] = [
    None,
    [1, 2.5, "topic/a", b"\x00\xff", True, False, None, -3, -200, 2**40, 2**64 - 1],
    {"x": 12.25, "y": -7.5, "subs": [[1, "t/#"], [2, "u"]], "bf": b"\x01" * 40},
    {"nested": {"deep": [[[-(2**63)]]]}, "empty": [], "s": "ü"},
    "x" * 600,
]


def _pcap(frames: list[bytes]) -> bytes:
    """A pcap of IPv4/UDP packets (LINKTYPE_RAW) to port 4790."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101)]
    for n, payload in enumerate(frames):
        udp = struct.pack("!HHHH", PORT, PORT, 8 + len(payload), 0) + payload
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), n & 0xFFFF, 0, 64, 17, 0,
                         bytes((10, 0, 0, 1)), bytes((10, 0, 0, 2))) + udp
        out.append(struct.pack("<IIII", 1, n, len(ip), len(ip)) + ip)
    return b"".join(out)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _leaves(value: Any, path: str = "") -> list[str]:
    """The ``path=value`` strings the dissector prints for a body's scalar leaves."""
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _leaves(v, _join(path, i))]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _leaves(v, _join(path, k))]
    if value is None:
        text = "nil"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = format(value, ".17g")
    elif isinstance(value, bytes):
        text = value.hex()
    else:
        text = str(value)
    return [f"{path}={text}"]


def _good_frames() -> list[tuple[bytes, dict[str, Any]]]:
    codec = FrameCodec(7, 1_700_000_000, KEYS, payload_size=256)
    made: list[tuple[bytes, dict[str, Any]]] = []
    seq = 0
    for pid in PROTOCOL_IDS:
        for body in BODIES:
            seq += 1
            mid = MessageId(origin=2**32 - 1 - pid, epoch=pid, seq=seq)
            rid = None if seq % 2 else seq * 1000
            msg = Message(type=16 + seq % 5, id=mid, body=body, hop=seq % 300, ttl=1000 - seq,
                          flags=seq * 3, reliable_id=rid)
            frames = codec.encode(pid, msg)
            for frame in frames:
                made.append((frame, {"pid": pid, "msg": msg, "fragments": len(frames)}))
    return made


def _named_frames() -> list[tuple[bytes, tuple[str, int, str, Any]]]:
    """Whole frames of real protocol messages, one per body layout."""
    codec = FrameCodec(9, 1_700_000_001, KEYS, payload_size=1400)
    made = []
    for seq, (proto, mtype, name, body) in enumerate(protocol_messages(), 1):
        msg = Message(type=mtype, id=MessageId(origin=5, epoch=1, seq=seq), body=body)
        (frame,) = codec.encode(get_protocol(proto).protocol_id, msg)
        made.append((frame, (proto, mtype, name, body)))
    return made


def _render(value: Any) -> str:
    """The compact text the dissector gives a named element (its ``render``)."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_render(k)}: {_render(v)}" for k, v in value.items()) + "}"
    return _leaves(value)[0][1:]  # "=text" with an empty path


def _named_values(prefix: str, layout: Any, body: list[Any],
                  out: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Every named element's text, in the order tshark lists a repeated field's values."""
    out = {} if out is None else out
    items = _items(layout, len(body))
    assert len(items) == len(body), (prefix, layout, body)  # the layout is the code's
    for item, value in zip(items, body, strict=True):
        name = item[0] if isinstance(item, tuple) else item
        out.setdefault(f"{prefix}.{name}", []).append(_render(value))
        if isinstance(item, tuple):
            _named_values(f"{prefix}.{name}", item[1], value, out)
    return out


def _malformed() -> list[tuple[bytes, str]]:
    whole = packb([1, 7, 1, 1, 16, 0, 7, 1, 1, 0, 5, None, [1, 2]])
    return [
        (b"\x01\x00", "truncated"),
        (seal(KEYS, whole, version=2), "bad version"),
        (bytes((1, 0x02, 3)) + whole + bytes(16), "unknown frame flags"),
        (seal(KEYS, packb([1, 2, 3])), "frame array"),
        (seal(KEYS, whole[:-1] + b"\xc1"), "invalid msgpack"),
        (seal(KEYS, whole[:-3]), "truncated msgpack"),
        (seal(KEYS, whole + b"\x00"), "stray bytes"),
        (seal(KEYS, packb([1, 7, 1, 1, 5, 0, 2, b""]), fragment=True), "chunk"),
        (seal(KEYS, whole[:-3] + b"\xdd\xff\xff\xff\xff"), "truncated msgpack"),
    ]


@pytest.fixture(scope="module")
def dissected(tmp_path_factory: pytest.TempPathFactory) -> Dissected:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is missing: scripts/bootstrap.sh installs it (scripts/apt-packages.txt)"
    good = _good_frames()
    bad = _malformed()
    named = _named_frames()
    cap = tmp_path_factory.mktemp("ws") / "frames.pcap"
    cap.write_bytes(_pcap([f for f, _ in good] + [f for f, _ in bad] + [f for f, _ in named]))
    fields = [arg for name in FIELDS for arg in ("-e", name)]
    run = subprocess.run(
        [tshark, "-n", "-X", f"lua_script:{PLUGIN}", "-r", str(cap), "-T", "json", *fields],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "Lua" not in run.stderr, run.stderr
    packets = [p["_source"]["layers"] for p in json.loads(run.stdout)]
    assert len(packets) == len(good) + len(bad) + len(named)
    n, m = len(good), len(good) + len(bad)
    return (list(zip(good, packets[:n], strict=True)), list(zip(bad, packets[n:m], strict=True)),
            list(zip(named, packets[m:], strict=True)))


def test_header_and_body_fields_match_the_codec(dissected: Dissected) -> None:
    good = dissected[0]
    names = wireshark_fields.message_names()
    fragments = 0
    for (frame, meta), layers in good:
        msg: Message = meta["msg"]
        assert "_ws.expert.message" not in layers, (layers, frame.hex())
        assert layers["meshsub.protocol"] == [str(meta["pid"])]
        assert layers["meshsub.transmitter"] == ["7"]
        assert layers["meshsub.tx_epoch"] == ["1700000000"]
        assert layers["meshsub.key_id"] == ["3"]
        if meta["fragments"] > 1:
            fragments += 1
            assert layers["meshsub.fragment.count"] == [str(meta["fragments"])]
            continue
        assert layers["meshsub.type"] == [str(msg.type)]
        proto, types = names.get(meta["pid"], ("link", {}))
        want = [f"{proto}.{types[msg.type]}"] if msg.type in types else None
        assert layers.get("meshsub.message") == want, (meta["pid"], msg.type)
        assert int(layers["meshsub.msg_flags"][0], 16) == msg.flags
        assert layers["meshsub.origin"] == [str(msg.id.origin)]
        assert layers["meshsub.origin_epoch"] == [str(msg.id.epoch)]
        assert layers["meshsub.seq"] == [str(msg.id.seq)]
        assert layers["meshsub.hop"] == [str(msg.hop)]
        assert layers["meshsub.ttl"] == [str(msg.ttl)]
        rid = None if msg.reliable_id is None else [str(msg.reliable_id)]
        assert layers.get("meshsub.reliable_id") == rid
        assert layers["meshsub.body.leaf"] == _leaves(msg.body), frame.hex()
    assert fragments > 0, "no fragment frames were exercised"
    seqs = [int(layers["meshsub.tx_seq"][0]) for _, layers in good]
    assert seqs == list(range(1, len(good) + 1))


def test_malformed_frames_are_expert_info_not_lua_errors(dissected: Dissected) -> None:
    bad = dissected[1]
    for (frame, reason), layers in bad:
        messages = " ".join(layers.get("_ws.expert.message", []))
        assert reason in messages, (reason, layers, frame.hex())


def test_protocol_messages_show_named_fields(dissected: Dissected) -> None:
    named = dissected[2]
    layouts = wireshark_fields.body_fields()
    for (frame, (proto, mtype, name, body)), layers in named:
        assert "_ws.expert.message" not in layers, (proto, name, layers)
        assert layers["meshsub.type"] == [str(mtype)]
        assert layers["meshsub.message"] == [f"{proto}.{name}"]
        prefix = f"meshsub.{proto}.{name.lower()}"
        want = _named_values(prefix, layouts[proto][name], body)
        got = {k: v for k, v in layers.items() if k.startswith(prefix + ".")}
        assert got == want, (proto, name, frame.hex())
    # e.g. a user's filter: the cell of a HESPER subscription's envelope, its sub id
    subscribe = next(layers for (_, m), layers in named if m[:3] == ("hesper", 16, "SUBSCRIBE"))
    assert subscribe["meshsub.hesper.subscribe.cell_x"] == ["1"]
    assert subscribe["meshsub.hesper.subscribe.payload.sub_id"] == ["s1"]
    # a list of like elements: every id of an epidemic summary vector under one name
    vector = next(layers for (_, m), layers in named if m[:3] == ("epidemic", 17, "VECTOR"))
    assert vector["meshsub.epidemic.vector.id.origin"] == ["5", "6"]
    grsv = next(layers for (_, m), layers in named if m[:3] == ("brvst", 21, "GRSV_UPDATE"))
    assert grsv["meshsub.brvst.grsv_update.payload.entries.entry.arv.attr"] == ["1", "4", "2"]


def test_every_layout_is_exercised_by_a_real_message() -> None:
    layouts = {(p, n) for p, ls in wireshark_fields.body_fields().items() for n in ls}
    assert layouts == {(p, n) for p, _, n, _ in protocol_messages()}


def test_the_lua_tables_are_generated_from_the_code() -> None:
    text = PLUGIN.read_text()
    assert wireshark_fields.replace_block(text, wireshark_fields.render()) == text, \
        "deploy/wireshark/meshsub.lua is stale: run scripts/wireshark_fields.py"
