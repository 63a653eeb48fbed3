"""The Wireshark dissector on frames of real daemons: a capture from the A - B - C mesh.

Three meshsubd (``flooding``) in network namespaces; tcpdump on B's mesh interface
records the beacons of all three and an event published on A, flooded by A and relayed
by B to C. One tshark run dissects the capture with deploy/wireshark/meshsub.lua, through
"Decode As" (``-d udp.port==PORT,meshsub``: the test mesh uses a free port, not 4790).
The pcap is kept beside the test's other files (pytest's tmp directory) for inspection.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from mesh import IFACE, Mesh, wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub",
                                                          "nft", "tcpdump", "tshark")),
                       reason="needs mosquitto clients, nft, tcpdump and tshark"),
]
PLUGIN = Path(__file__).resolve().parents[2] / "deploy" / "wireshark" / "meshsub.lua"
FIELDS = ("meshsub.protocol", "meshsub.transmitter", "meshsub.type", "meshsub.origin",
          "meshsub.hop", "meshsub.body.leaf", "meshsub.message", "meshsub.flooding.data.event",
          "_ws.expert.message")


def test_capture_of_a_live_mesh_dissects(tmp_path: Path) -> None:
    mesh = Mesh(tmp_path)
    pcap = tmp_path / "mesh-b.pcap"
    dump: subprocess.Popen[bytes] | None = None
    try:
        mesh.up()
        b = mesh.nodes["b"]
        # --immediate-mode: without it tcpdump gets the kernel's ring one block at a time
        # (a block is handed over when full or after ~1 s), and the block still open at
        # SIGINT is never written: stop 31's capture lost the last second, the event in it
        dump = subprocess.Popen(["ip", "netns", "exec", b.ns, "tcpdump", "-Z", "root", "-i", IFACE,
                                 "--immediate-mode", "-U", "-w", str(pcap),
                                 "udp", "port", str(b.udp_port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: pcap.exists(), "tcpdump's capture file")
        mesh.start()
        mesh.wait_neighbors()
        a, c = mesh.nodes["a"], mesh.nodes["c"]
        sub = c.mqtt_sub("meshsub/deliver/ws/#")
        sub.wait_ready(c, "meshsub/deliver/ws/probe")
        c.mqtt_pub("meshsub/sub/ws", "wireshark/#", retain=True)
        wait_for(lambda: any(r["sub_id"] == "ws" for r in c.ctl("subscriptions")),
                 "subscription on C")
        a.mqtt_pub("meshsub/pub/wireshark/probe", '{"v": 7}')
        wait_for(lambda: sub.events(v=7), "event on C")
        # A's frame and B's relay, in the file before tcpdump stops (msgpack keeps the topic
        # as plain text)
        wait_for(lambda: pcap.read_bytes().count(b"wireshark/probe") >= 2,
                 "the flooded event's two frames in B's capture")
    finally:
        if dump is not None:
            dump.send_signal(signal.SIGINT)
            dump.wait(10)
        mesh.down()
    run = subprocess.run(["tshark", "-n", "-X", f"lua_script:{PLUGIN}",
                          "-d", f"udp.port=={b.udp_port},meshsub", "-r", str(pcap), "-T", "json",
                          *(arg for name in FIELDS for arg in ("-e", name))],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    packets = [p["_source"]["layers"] for p in json.loads(run.stdout)]
    assert packets, "tcpdump recorded nothing"
    assert not [p for p in packets if "_ws.expert.message" in p], "malformed frames from daemons"
    assert all("meshsub.protocol" in p for p in packets)

    def one(p: dict[str, list[str]], name: str) -> int | None:
        return int(p[name][0]) if name in p else None

    beacons = {one(p, "meshsub.transmitter") for p in packets
               if one(p, "meshsub.protocol") == 0 and one(p, "meshsub.type") == 2}
    assert beacons == {1, 2, 3}, beacons
    event = [p for p in packets if p.get("meshsub.message") == ["flooding.DATA"]
             and one(p, "meshsub.origin") == 1
             and p["meshsub.flooding.data.event"] == ["[wireshark/probe, v, 7]"]]
    hops = {(one(p, "meshsub.transmitter"), one(p, "meshsub.hop")) for p in event}
    seen = sorted({(one(p, "meshsub.protocol"), one(p, "meshsub.type"),
                    one(p, "meshsub.transmitter"), one(p, "meshsub.hop")) for p in packets})
    flooded = [p.get("meshsub.body.leaf") for p in packets if one(p, "meshsub.protocol") == 1]
    assert (1, 0) in hops and (2, 1) in hops, (hops, seen, flooded)
