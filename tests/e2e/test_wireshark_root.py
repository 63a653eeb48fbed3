"""The Wireshark dissector on frames of real daemons: a capture from the A - B - C mesh.

Three meshsubd (``flooding``) in network namespaces; tcpdump on B's mesh interface
records the beacons of all three (type BEACON, protocol id 0, from transmitters 1, 2
and 3): none may be malformed. One tshark run dissects the capture with meshsub.lua via
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
          "meshsub.hop", "meshsub.body.leaf", "_ws.expert.message")


def test_capture_of_a_live_mesh_dissects(tmp_path: Path) -> None:
    mesh = Mesh(tmp_path)
    pcap = tmp_path / "mesh-b.pcap"
    dump: subprocess.Popen[bytes] | None = None
    try:
        mesh.up()
        b = mesh.nodes["b"]
        dump = subprocess.Popen(["ip", "netns", "exec", b.ns, "tcpdump", "-Z", "root", "-i", IFACE,
                                 "-U", "-w", str(pcap), "udp", "port", str(b.udp_port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: pcap.exists(), "tcpdump's capture file")
        mesh.start()
        mesh.wait_neighbors()
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
