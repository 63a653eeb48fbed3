"""The applications of one virtual device: play a schedule over MQTT, record what happened.

Runs inside the device (``/opt/meshsub/bin/python -m meshsub_workload.agent``), next
to the daemon, and talks to it only as an application would: subscriptions as
retained expressions on ``<p>/sub/<id>``, events as QoS 1 JSON on
``<p>/pub/<topic>``, deliveries read from ``<p>/deliver/#``. With ``--username``
(the broker of a deployed device refuses anonymous clients, docs/mqtt.md) it
logs in like any application and keeps to its own part of the topic tree:
``<p>/sub/<user>/<id>`` and ``<p>/deliver/<user>/#``. Each action is done
at ``t0 + t`` by the shared wall clock and recorded with the time the broker
acknowledged it, or the error that stopped it; an unreachable broker is retried
until the action's deadline, never fatal. The record is one JSON document
written at exit (atomically), which the host collects.

Only the standard library and aiomqtt are imported: the agent is its own small
distribution (``meshsub-workload``), which a virtual device installs into the meshsub
venv beside the daemon and a field device never does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiomqtt

RETRY_S = 0.5
LATE_S = 30.0
"""An action that could not be done this long after its time is given up (recorded)."""


class ScheduleError(ValueError):
    pass


def load_schedule(text: str) -> dict[str, Any]:
    """Parse and check a schedule document (``meshsim.workload.schedule``)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ScheduleError(f"schedule is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ScheduleError("schedule: expected a version 1 document")
    for key, kind in (("node", int), ("t0", (int, float)), ("end_s", (int, float)),
                      ("prefix", str), ("items", list)):
        if not isinstance(doc.get(key), kind) or isinstance(doc.get(key), bool):
            raise ScheduleError(f"schedule: {key} missing or of the wrong type")
    for i, item in enumerate(doc["items"]):
        if not isinstance(item, dict) or item.get("op") not in ("sub", "unsub", "pub") \
                or not isinstance(item.get("t"), int | float):
            raise ScheduleError(f"schedule: items[{i}] is not a sub/unsub/pub with a time")
    return doc


class Agent:
    def __init__(self, doc: dict[str, Any], host: str, port: int, *,
                 username: str | None = None, password: str | None = None) -> None:
        self.doc = doc
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.t0 = float(doc["t0"])
        self.prefix = str(doc["prefix"])
        self.own = f"{self.prefix}/sub/{username}/" if username else f"{self.prefix}/sub/"
        """Where this application's subscriptions go (the ACL allows no other place)."""
        self.deliveries_topic = (f"{self.prefix}/deliver/{username}/#" if username
                                 else f"{self.prefix}/deliver/#")
        self.actions: list[dict[str, Any]] = []
        self.deliveries: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.connects = 0

    async def run(self) -> None:
        end = self.t0 + float(self.doc["end_s"])
        pending = list(self.doc["items"])
        while True:
            try:
                async with aiomqtt.Client(self.host, self.port,
                                          identifier=f"meshsub-workload-{self.doc['node']}",
                                          username=self.username, password=self.password,
                                          protocol=aiomqtt.ProtocolVersion.V5,
                                          timeout=10) as client:
                    self.connects += 1
                    await client.subscribe(self.deliveries_topic, qos=1)
                    await client.subscribe(f"{self.prefix}/error", qos=0)
                    listener = asyncio.create_task(self._listen(client))
                    try:
                        while pending:
                            await self._do(client, pending[0])
                            pending.pop(0)
                        await asyncio.sleep(max(0.0, end - time.time()))
                    finally:
                        listener.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await listener
                    return
            except aiomqtt.MqttError as exc:
                self.errors.append({"ts": time.time(), "error": f"broker: {exc}"})
                if time.time() >= end:
                    for item in pending:  # never silently lost: recorded as not done
                        self.actions.append({**item, "done": None, "error": "broker down"})
                    return
                pending = self._give_up_late(pending)
                await asyncio.sleep(RETRY_S)

    def _give_up_late(self, pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
        keep = []
        for item in pending:
            if time.time() > self.t0 + float(item["t"]) + LATE_S:
                self.actions.append({**item, "done": None, "error": "broker down too long"})
            else:
                keep.append(item)
        return keep

    async def _do(self, client: aiomqtt.Client, item: dict[str, Any]) -> None:
        await asyncio.sleep(max(0.0, self.t0 + float(item["t"]) - time.time()))
        started = time.time()
        if item["op"] == "sub":
            await client.publish(f"{self.own}{item['sub_id']}", item["expr"].encode(),
                                 qos=1, retain=True)
        elif item["op"] == "unsub":  # empty and retained: also clears the retained expression
            # on its own subscription topic, as it subscribed: the broker's ACL lets an
            # application write only under <p>/sub/<user>/ (docs/mqtt.md)
            await client.publish(f"{self.own}{item['sub_id']}", b"", qos=1, retain=True)
        else:
            payload = json.dumps(item["attrs"], separators=(",", ":")).encode()
            await client.publish(f"{self.prefix}/pub/{item['topic']}", payload, qos=1)
        self.actions.append({**item, "started": started, "done": time.time()})

    async def _listen(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            now = time.time()
            topic = str(message.topic)
            try:
                body = json.loads(bytes(message.payload))
            except (ValueError, TypeError):
                body = {"unreadable": repr(message.payload)[:200]}
            entry = {"ts": now, "topic": topic, "body": body}
            (self.errors if topic == f"{self.prefix}/error" else self.deliveries).append(entry)

    def report(self) -> dict[str, Any]:
        return {"node": self.doc["node"], "t0": self.t0, "connects": self.connects,
                "actions": self.actions, "deliveries": self.deliveries, "errors": self.errors}


async def _until_signalled(agent: Agent) -> None:
    """Run the agent; SIGTERM/SIGINT end it early, and the report is still written."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await agent.run()


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="meshsub-workload", description=__doc__.splitlines()[0])
    parser.add_argument("--schedule", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--username", help="log in as this application (its own topics)")
    parser.add_argument("--password-file", type=Path,
                        help="the application's password (the mosquitto role writes it)")
    args = parser.parse_args(argv)
    try:
        doc = load_schedule(args.schedule.read_text(encoding="utf-8"))
        password = (args.password_file.read_text(encoding="utf-8").strip()
                    if args.password_file else None)
    except (OSError, ScheduleError) as exc:
        print(f"meshsub-workload: {exc}", file=sys.stderr)
        return 2
    if password is not None and not args.username:
        print("meshsub-workload: --password-file needs --username", file=sys.stderr)
        return 2
    agent = Agent(doc, args.host, args.port, username=args.username, password=password)
    try:
        asyncio.run(_until_signalled(agent))
    finally:
        write_atomically(args.out, json.dumps(agent.report(), separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
