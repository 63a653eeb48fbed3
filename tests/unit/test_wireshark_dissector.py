"""The Wireshark dissector (deploy/wireshark/meshsub.lua) against the Python codec.

Frames are made by ``FrameCodec.encode`` (whole frames and fragments, every protocol id,
bodies of every msgpack type the protocols use), written to one pcap, and dissected by one
``tshark -X lua_script:`` run: every header field and every body leaf tshark prints must be
what the codec put in. Malformed frames (truncated, bad version, unknown flags, wrong array,
bad msgpack, stray bytes) must come out as Malformed expert info, not as a Lua error.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from meshsub.core.api import Message, MessageId
from meshsub.wire import FrameCodec, KeyRing
from meshsub.wire.frame import packb, seal

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "deploy" / "wireshark" / "meshsub.lua"
PORT = 4790
KEYS = KeyRing.single(bytes(range(16)), key_id=3)

PROTOCOL_IDS = range(0, 15)
FIELDS = [
    *(f"meshsub.{n}" for n in ("protocol", "transmitter", "tx_epoch", "tx_seq", "type")),
    *(f"meshsub.{n}" for n in ("msg_flags", "origin", "origin_epoch", "seq", "hop", "ttl")),
    *(f"meshsub.{n}" for n in ("reliable_id", "body.leaf", "fragment.count", "key_id")),
    "_ws.expert.message",
]
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
def dissected(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], list[Any]]:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is missing: scripts/bootstrap.sh installs it (scripts/apt-packages.txt)"
    good = _good_frames()
    bad = _malformed()
    cap = tmp_path_factory.mktemp("ws") / "frames.pcap"
    cap.write_bytes(_pcap([f for f, _ in good] + [f for f, _ in bad]))
    fields = [arg for name in FIELDS for arg in ("-e", name)]
    run = subprocess.run(
        [tshark, "-n", "-X", f"lua_script:{PLUGIN}", "-r", str(cap), "-T", "json", *fields],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "Lua" not in run.stderr, run.stderr
    packets = [p["_source"]["layers"] for p in json.loads(run.stdout)]
    assert len(packets) == len(good) + len(bad)
    n = len(good)
    return list(zip(good, packets[:n], strict=True)), list(zip(bad, packets[n:], strict=True))


def test_header_and_body_fields_match_the_codec(dissected: tuple[list[Any], list[Any]]) -> None:
    good, _ = dissected
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


Dissected = tuple[list[Any], list[Any]]


def test_malformed_frames_are_expert_info_not_lua_errors(dissected: Dissected) -> None:
    _, bad = dissected
    for (frame, reason), layers in bad:
        messages = " ".join(layers.get("_ws.expert.message", []))
        assert reason in messages, (reason, layers, frame.hex())
