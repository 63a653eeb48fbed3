"""The workload of the virtual mesh: schedules from a scenario, and the agent over a real broker.

No containers: the agent runs here as a subprocess against a private mosquitto,
and a paho client plays the daemon's side of the topics.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mosquitto import Mosquitto, have_mosquitto

from meshsim.scenario import load_scenario, make_plan
from meshsim.workload.schedule import schedules
from meshsub_workload.agent import ScheduleError, load_schedule

SCENARIO = """
[scenario]
name = "wl"
duration_s = 3.0
drain_s = 1.0
[area]
width_m = 100.0
height_m = 100.0
[nodes]
count = 3
placement = "line"
[protocol]
name = "flooding"
[[workload.subscriptions]]
node = 2
expr = "sensors/+ value>=20"
id = "hot"
[[workload.subscriptions]]
node = 2
expr = "alarms/#"
t = 0.5
[[workload.publications]]
t = 1.0
node = 1
event = "sensors/temp value=25 room=lab ok=true ratio=0.5"
[[workload.publications]]
t = 0.2
node = 1
event = "alarms/fire level=3"
"""


def _plan(tmp_path: Path) -> Any:
    path = tmp_path / "wl.toml"
    path.write_text(SCENARIO)
    return make_plan(load_scenario(path))


def test_schedules_follow_the_plan(tmp_path: Path) -> None:
    out = schedules(_plan(tmp_path), t0=1000.0, end_s=4.0)
    assert sorted(out) == [1, 2, 3]
    assert out[3].items == ()
    assert [(i["op"], i["t"]) for i in out[1].items] == [("pub", 0.2), ("pub", 1.0)]
    pub = out[1].items[1]
    assert (pub["topic"], pub["attrs"]) == (
        "sensors/temp", {"ok": True, "ratio": 0.5, "room": "lab", "value": 25})
    assert [(i["sub_id"], i["expr"]) for i in out[2].items] == [
        ("hot", "sensors/+ value>=20"), ("s1", "alarms/#")]
    doc = load_schedule(out[1].to_json())
    assert (doc["node"], doc["t0"], doc["end_s"]) == (1, 1000.0, 4.0)


@pytest.mark.parametrize("text", ["[]", "{", '{"version": 2}', json.dumps(
    {"version": 1, "node": 1, "t0": 0, "end_s": 1, "prefix": "p", "items": [{"op": "x"}]}),
    json.dumps({"version": 1, "node": "1", "t0": 0, "end_s": 1, "prefix": "p", "items": []})])
def test_bad_schedules_are_refused(text: str) -> None:
    with pytest.raises(ScheduleError):
        load_schedule(text)


@pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")
def test_agent_plays_the_schedule_and_records_deliveries(tmp_path: Path) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    broker = Mosquitto(tmp_path)
    broker.start()
    seen: list[tuple[str, bytes, bool]] = []
    lock = threading.Lock()
    daemon = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)

    def on_message(_c: Any, _u: Any, msg: Any) -> None:
        with lock:
            seen.append((msg.topic, msg.payload, msg.retain))

    daemon.on_message = on_message
    try:
        daemon.connect("127.0.0.1", broker.port)
        daemon.subscribe([("meshsub/pub/#", 1), ("meshsub/sub/+", 1)])
        daemon.loop_start()
        time.sleep(0.3)  # let the subscription reach the broker before the agent starts
        # the agents play until t0 + 5 s: on a busy host their start alone can take seconds
        sched = schedules(_plan(tmp_path), t0=time.time() + 0.5, end_s=5.0)
        (tmp_path / "s2.json").write_text(sched[2].to_json())
        (tmp_path / "s1.json").write_text(sched[1].to_json())
        procs = [subprocess.Popen([sys.executable, "-m", "meshsub_workload.agent",
                                   "--schedule", str(tmp_path / f"s{n}.json"),
                                   "--out", str(tmp_path / f"r{n}.json"),
                                   "--port", str(broker.port)]) for n in (1, 2)]
        # deliver once agent 2 asked for "hot": it subscribed to its deliveries before that
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            with lock:
                if any(t == "meshsub/sub/hot" for t, _p, _r in seen):
                    break
            time.sleep(0.05)
        delivery = {"sub_id": "hot", "topic": "sensors/temp", "event_id": "1-1-2"}
        daemon.publish("meshsub/deliver/hot/sensors/temp", json.dumps(delivery), qos=1)
        assert [p.wait(timeout=30) for p in procs] == [0, 0]
    finally:
        daemon.loop_stop()
        daemon.disconnect()
        broker.stop()
    r1 = json.loads((tmp_path / "r1.json").read_text())
    r2 = json.loads((tmp_path / "r2.json").read_text())
    assert [a["topic"] for a in r1["actions"]] == ["alarms/fire", "sensors/temp"]
    assert all(a["done"] >= a["started"] >= r1["t0"] + a["t"] for a in r1["actions"])
    assert [a["sub_id"] for a in r2["actions"]] == ["hot", "s1"]
    assert [d["body"] for d in r2["deliveries"]] == [delivery]
    with lock:
        got = {(t, p, r) for t, p, r in seen}
    assert ("meshsub/sub/hot", b"sensors/+ value>=20", False) in got  # live copy of a retained
    assert ("meshsub/sub/s1", b"alarms/#", False) in got
    pubs = [json.loads(p) for t, p, _ in seen if t == "meshsub/pub/sensors/temp"]
    assert pubs == [{"ok": True, "ratio": 0.5, "room": "lab", "value": 25}]


def test_agent_without_a_broker_records_every_action_as_not_done(tmp_path: Path) -> None:
    from mosquitto import free_port

    sched = schedules(_plan(tmp_path), t0=time.time(), end_s=1.0)
    (tmp_path / "s.json").write_text(sched[1].to_json())
    rc = subprocess.run([sys.executable, "-m", "meshsub_workload.agent",
                         "--schedule", str(tmp_path / "s.json"), "--out",
                         str(tmp_path / "r.json"), "--port", str(free_port())],
                        timeout=60, check=False).returncode
    assert rc == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [a["done"] for a in report["actions"]] == [None, None]
    assert report["errors"] and report["connects"] == 0


def test_agent_refuses_a_bad_schedule_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{}")
    res = subprocess.run([sys.executable, "-m", "meshsub_workload.agent", "--schedule",
                          str(tmp_path / "s.json"), "--out", str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "schedule" in res.stderr
