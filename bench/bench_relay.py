"""CPU per frame a relay forwards, without root: one real meshsubd on loopback.

The daemon under test (node 2, flooding, its own mosquitto, telemetry on) is
bound to 127.0.0.2 with "broadcast" sent as unicast copies to two loopback
sockets standing in for its neighbours A (node 1) and C (node 3) (so a
rebroadcast is two sends here, one on a radio). This
script plays both: it sends each event as A's frame and, a moment later, C's
rebroadcast of it (the duplicate every flooding relay hears), at ``--rate``
events per second, and counts the daemon's rebroadcasts. The daemon's CPU
time (user + system, from /proc) over the load, net of its idle rate, divided
by the frames it forwarded, is the figure; printed beside it, measured in the
same run, the bare cost of the same cryptographic and msgpack work (two
HMAC-SHA256 verifies and msgpack decodes, one encode and HMAC: what a relay
cannot avoid) as a baseline.

    .venv/bin/python bench/bench_relay.py [--rates 100,1000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import hmac
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgpack

from meshsub.core.api import Message, MessageId
from meshsub.core.content import Event
from meshsub.protocols.flooding import DATA, encode_body
from meshsub.wire import FrameCodec, KeyRing

KEY = "d2e9c07a4f1b86350e7ac2b94d18f63a5c0e7b29f4d1a8c63e5b07f92a4c1d86"  # a bench key
TICK = os.sysconf("SC_CLK_TCK")
VENV_BIN = Path(sys.executable).parent


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_udp(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, 0))
    sock.setblocking(False)
    return sock


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def baseline_us(events: int = 20000) -> float:
    """Per forwarded event: 2 x (HMAC verify + msgpack decode) + 1 x (encode + HMAC)."""
    key = bytes.fromhex(KEY)
    body = [{"i": 1, "t0": time.time(), "topic": "bench/load"}, time.time()]
    fields = [1, 1, 1, 1, DATA, 0, 1, 1, 1, 0, 8, None, body]
    packed = msgpack.packb(fields, use_bin_type=True)
    frame = packed + hmac.digest(key, packed, "sha256")[:16]
    start = time.process_time()
    for i in range(events):
        for _ in range(2):
            data, tag = frame[:-16], frame[-16:]
            if not hmac.compare_digest(hmac.digest(key, data, "sha256")[:16], tag):
                raise AssertionError
            msgpack.unpackb(data, strict_map_key=False)
        fields[3] = i
        out = msgpack.packb(fields, use_bin_type=True)
        _ = out + hmac.digest(key, out, "sha256")[:16]
    return (time.process_time() - start) / events * 1e6


FLOOR_RELAY = """
import asyncio, hmac, random, socket, sys
import msgpack
key, port, peers, jitter, factory = (bytes.fromhex(sys.argv[1]), int(sys.argv[2]),
                                     [("127.0.0.1", int(p)) for p in sys.argv[3].split(",")],
                                     float(sys.argv[4]), sys.argv[5])
seen = {}
async def main():
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", port))
    sock.setblocking(False)
    sent = [0]
    def forward(fields):
        sent[0] += 1
        fields[1], fields[3], fields[9], fields[10] = 2, sent[0], fields[9] + 1, fields[10] - 1
        out = bytes([1, 0, 1]) + msgpack.packb(fields, use_bin_type=True)
        out += hmac.digest(key, out, "sha256")[:16]
        for peer in peers:
            sock.sendto(out, peer)
    def readable():
        while True:
            try:
                data, _ = sock.recvfrom(2048)
            except BlockingIOError:
                return
            hmac.compare_digest(hmac.digest(key, data[:-16], "sha256")[:16], data[-16:])
            fields = msgpack.unpackb(data[3:-16], strict_map_key=False)
            ident = (fields[6], fields[7], fields[8])  # the message id (origin, epoch, seq)
            if ident in seen:
                continue
            seen[ident] = True
            if len(seen) > 4096:
                del seen[next(iter(seen))]
            loop.call_later(random.uniform(0.0, jitter), forward, fields)
    loop.add_reader(sock.fileno(), readable)
    await asyncio.Event().wait()
if factory == "uvloop":
    import uvloop
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
else:
    asyncio.run(main())
"""
"""The event-loop floor: a bare asyncio relay doing a relay's wake-ups, syscalls and
cryptographic/msgpack work per frame (read both copies, verify and unpack each, drop
the duplicate, one jitter timer, encode, tag, send two copies) and nothing else."""


def write_config(workdir: Path, port: int, peers: list[int], mqtt_port: int,
                 jitter: float = 0.005, telemetry: bool = True) -> Path:
    config = workdir / "meshsub.toml"
    config.write_text("\n".join([
        "[node]", "id = 2", 'name = "bench-relay"',
        "[link]", 'interface = ""', f"port = {port}",
        "[discovery]", "beacon_interval = 5.0", "zeroconf = false",
        "static_peers = [" + ", ".join(f'"127.0.0.1:{p}"' for p in peers) + "]",
        "[protocol]", 'name = "flooding"', "[protocol.params]", "ttl = 8", f"jitter = {jitter}",
        "[security]", "current_key = 1", "[security.keys]", f'1 = "{KEY}"',
        "[mqtt]", 'host = "127.0.0.1"', f"port = {mqtt_port}",
        "[storage]", f'state_dir = "{workdir / "state"}"',
        f'spool_dir = "{workdir / "spool"}"',
        "[telemetry]", f"enabled = {str(telemetry).lower()}",
        "[log]", 'level = "warning"',
    ]) + "\n")
    return config


def drain(sock: socket.socket) -> int:
    """Protocol frames received (beacons, protocol id 0, are not counted)."""
    n = 0
    while True:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return n
        n += len(data) > 4 and data[4] == 1  # [version, flags, key id, array, protocol id]


def subscribe(work: Path, mqtt_port: int) -> subprocess.Popen[bytes]:
    """An application subscribed to every bench event on the relay, counting deliveries."""
    out = open(work / "deliveries", "wb")  # noqa: SIM115 (the listener owns it until it ends)
    listener = subprocess.Popen(
        ["mosquitto_sub", "-V", "5", "-q", "1", "-p", str(mqtt_port), "-t", "meshsub/deliver/#",
         "-F", "%t"], stdout=out, stderr=subprocess.DEVNULL)
    subprocess.run(["mosquitto_pub", "-V", "5", "-q", "1", "-r", "-p", str(mqtt_port),
                    "-t", "meshsub/sub/bench", "-m", "bench/#"], check=True)
    time.sleep(2.0)  # the daemon takes the retained subscription
    return listener


def mqtt_status(work: Path) -> str:
    """The daemon's MQTT bridge counters (``meshsubctl status``), one line."""
    proc = subprocess.run([str(VENV_BIN / "meshsubctl"), "--json", "--state-dir",
                           str(work / "state"), "status"], capture_output=True, text=True,
                          timeout=30, check=False)
    if proc.returncode != 0:
        return f"status failed: {proc.stderr.strip()}"
    mqtt = json.loads(proc.stdout)["mqtt"]
    return f"queued {mqtt['queued']}, counters {mqtt['counters']}"


def wait_deliveries(path: Path, expected: int, guard_s: float) -> tuple[int, float]:
    """(deliveries so far, seconds after the call until the last one or the guard)."""
    start = time.monotonic()
    count, last = 0, 0.0
    while time.monotonic() - start < guard_s:
        now = path.read_bytes().count(b"\n")
        if now != count:
            count, last = now, time.monotonic() - start
        elif time.monotonic() - start - last > 10.0:  # nothing for 10 s: stuck
            break
        if count >= expected:
            break
        time.sleep(0.05)
    return count, last


def run_load(pid: int, target: tuple[str, int], a: socket.socket, c: socket.socket,
             rate: float, seconds: float, seq0: int, epoch: int) -> tuple[int, int, float]:
    """Send ``rate`` events/s for ``seconds``; (events, frames forwarded, CPU seconds).

    Each load is a new boot ``epoch`` of A and C: their frame sequences start
    again, which the relay's replay window accepts only in a newer epoch."""
    keys = KeyRing.from_hex({"1": KEY}, 1)
    codec_a = FrameCodec(1, epoch, keys)
    codec_c = FrameCodec(3, epoch, keys)
    n = int(rate * seconds)
    frames = []
    for i in range(n):
        event = Event("bench/load", {"i": seq0 + i})
        msg = Message(DATA, MessageId(1, 1, seq0 + i + 1), encode_body(event, time.time()),
                      ttl=8)
        frames.append((codec_a.encode(1, msg)[0],
                       codec_c.encode(1, msg.forwarded().forwarded())[0]))
    got = 0
    cpu0 = cpu_seconds(pid)
    start = time.monotonic()
    for i, (from_a, from_c) in enumerate(frames):
        due = start + i / rate
        while (delay := due - time.monotonic()) > 0:
            time.sleep(min(delay, 0.002))
            got += drain(a) + drain(c)
        a.sendto(from_a, target)
        c.sendto(from_c, target)
    end = time.monotonic() + 2.0
    while time.monotonic() < end and got < 2 * n:  # each forward reaches both peers
        time.sleep(0.01)
        got += drain(a) + drain(c)
    return n, got // 2, cpu_seconds(pid) - cpu0


def floor_run(rates: list[float], args: argparse.Namespace, a: socket.socket,
              c: socket.socket, seq: int, loop: str) -> None:
    """The same loads against the bare relay (``FLOOR_RELAY``) on ``loop``, same run."""
    udp = free_udp("127.0.0.1")
    port = udp.getsockname()[1]
    udp.close()
    peers = f"{a.getsockname()[1]},{c.getsockname()[1]}"
    floor = subprocess.Popen([sys.executable, "-c", FLOOR_RELAY, KEY, str(port), peers,
                              str(args.jitter), loop])
    try:
        time.sleep(1.0)
        print(f"  event-loop floor (a bare {loop} relay: the same wake-ups, syscalls and "
              f"msgpack+HMAC work per frame, nothing else; same run):")
        for run, rate in enumerate(rates, start=100):
            events, forwarded, cpu = run_load(floor.pid, ("127.0.0.1", port), a, c, rate,
                                              args.seconds, seq, run)
            seq += events
            if forwarded:
                print(f"  {rate:>6g} events/s: forwarded {forwarded}/{events}; CPU per "
                      f"forwarded frame {cpu / forwarded * 1e6:.0f} us gross")
    finally:
        floor.terminate()
        floor.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="100,1000", help="events per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each load")
    parser.add_argument("--idle", type=float, default=10.0, help="idle measurement (s)")
    parser.add_argument("--jitter", type=float, default=0.005,
                        help="flooding's rebroadcast jitter (s); 0: no timer per frame")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip the bare asyncio relay run (the event-loop floor baseline)")
    parser.add_argument("--no-telemetry", action="store_true", help="telemetry off")
    parser.add_argument("--loops", default="default",
                        help="event loops to run the daemon and the floor on, comma-separated: "
                             "asyncio, uvloop (meshsub[fast]), default (uvloop if installed)")
    parser.add_argument("--deliver", action="store_true",
                        help="also subscribe on the relay over MQTT (mosquitto_sub) and report "
                             "how many events reached the subscriber and how long the "
                             "delivery path took to drain")
    args = parser.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    from meshsub.runtime.node import loop_factory
    status = 0
    for name in args.loops.split(","):
        loop = name.strip()
        if loop == "default":
            loop = "uvloop" if loop_factory() is not None else "asyncio"
        if loop not in ("asyncio", "uvloop"):
            parser.error(f"unknown event loop {name!r}")
        if loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
            print("bench_relay: uvloop is not installed (pip install 'meshsub[fast]')",
                  file=sys.stderr)
            return 2
        status = status or bench(args, rates, loop)
    return status


def bench(args: argparse.Namespace, rates: list[float], loop: str) -> int:
    """One daemon on ``loop`` through every rate, then the floor on the same loop."""
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    with tempfile.TemporaryDirectory(prefix="msub-relay-") as tmp:
        work = Path(tmp)
        a, c = free_udp("127.0.0.1"), free_udp("127.0.0.1")
        udp = free_udp("127.0.0.1")
        port = udp.getsockname()[1]
        udp.close()
        mqtt_port = free_tcp_port()
        (work / "mosquitto.conf").write_text(f"listener {mqtt_port} 127.0.0.1\n"
                                             "allow_anonymous true\n"
                                             "max_inflight_messages 256\n")  # as the role
        broker = subprocess.Popen([mosquitto, "-c", str(work / "mosquitto.conf")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        config = write_config(work, port, [a.getsockname()[1], c.getsockname()[1]], mqtt_port,
                              args.jitter, not args.no_telemetry)
        with open(work / "log", "wb") as log:
            env = {**os.environ, "MESHSUB_EVENT_LOOP": "asyncio" if loop == "asyncio" else ""}
            daemon = subprocess.Popen([str(VENV_BIN / "meshsubd"), "--config", str(config)],
                                      stdout=subprocess.DEVNULL, stderr=log, env=env)
        try:
            time.sleep(3.0)
            if daemon.poll() is not None:
                print((work / "log").read_text(), file=sys.stderr)
                return 1
            pid = daemon.pid
            listener = subscribe(work, mqtt_port) if args.deliver else None
            drain(a)
            drain(c)
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(args.idle)
            idle_rate = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
            idle_rss = rss_kib(pid)
            load = os.getloadavg()
            print(f"relay benchmark: meshsubd on loopback, {loop} event loop, flooding (jitter "
                  f"{args.jitter:g} s), "
                  f"telemetry {'off' if args.no_telemetry else 'on'}; "
                  f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
            print(f"  idle: CPU {idle_rate * 1000:.1f} ms/s, RSS {idle_rss / 1024:.1f} MiB")
            seq = 0
            for run, rate in enumerate(rates, start=1):
                target = ("127.0.0.1", port)
                events, forwarded, cpu = run_load(pid, target, a, c, rate, args.seconds, seq,
                                                  run)
                seq += events
                net = cpu - idle_rate * args.seconds
                base = baseline_us()
                if forwarded:
                    print(f"  {rate:>6g} events/s: forwarded {forwarded}/{events}; CPU per "
                          f"forwarded frame {cpu / forwarded * 1e6:.0f} us gross, "
                          f"{net / forwarded * 1e6:.0f} us net of idle "
                          f"(bare msgpack+HMAC work of a relay: {base:.1f} us, same run); "
                          f"{forwarded / cpu:.0f} frames per CPU-second")
                else:
                    print(f"  {rate:>6g} events/s: nothing forwarded (see {work / 'log'})")
                if listener is not None:
                    delivered, drained = wait_deliveries(work / "deliveries", seq, 60.0)
                    print(f"  {'':>6} MQTT deliveries: {delivered}/{seq} reached the subscriber, "
                          f"the last {drained:.2f} s after the load ended; the relay's MQTT "
                          f"bridge: {mqtt_status(work)}")
            print(f"  RSS after the load {rss_kib(pid) / 1024:.1f} MiB")
            if not args.no_floor:
                floor_run(rates, args, a, c, seq, loop)
        finally:
            if args.deliver and "listener" in locals() and listener is not None:
                listener.terminate()
                listener.wait(10)
            daemon.terminate()
            daemon.wait(20)
            broker.terminate()
            broker.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
