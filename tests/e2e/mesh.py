"""A three-node mesh in network namespaces, with real brokers and real daemons (root).

Layout: namespaces ``msub-e2e-a``, ``-b``, ``-c`` each hold one veth end
``msub0`` (10.99.0.1..3/24); the other ends hang on bridge ``msub-e2e-br`` in
a medium namespace ``msub-e2e-m``, whose nftables bridge table ``msub_e2e``
drops every frame between A and C, so A - B - C is a line. Each node runs its
own mosquitto on its loopback and a ``meshsubd`` (subprocesses through
``ip netns exec``), with its own state directory.

Everything is named with the ``msub`` prefix; ``Mesh.down`` removes exactly
what ``Mesh.up`` made, also after a failure. Used by ``test_mesh_root.py``
and ``bench/bench_daemon.py``.

``Mesh(secure=True)`` runs each node's broker as the Ansible role ``mosquitto``
configures a device (``rolebroker``: rendered by Ansible, no anonymous clients,
the role's ACL); the daemon then logs in as ``meshsubd`` and the test tools as
the application ``e2e`` (or whoever a test names), with their own topics.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

from rolebroker import DAEMON_USER, RoleBroker, render

VENV_BIN = Path(sys.executable).parent
PREFIX = "msub-e2e"
MEDIUM = f"{PREFIX}-m"
BRIDGE = f"{PREFIX}-br"
NFT_TABLE = "msub_e2e"
IFACE = "msub0"
KEY = "7fbbf3463e9adb8738c57d35e9034c9be7767ce118980601034669bbeb5b9221"  # a test key
NAMES = ("a", "b", "c")
ORIGIN = (52.52, 13.405)


def sh(*args: str, check: bool = True, ns: str | None = None,
       input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", "netns", "exec", ns, *args] if ns else list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, input=input_text)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def wait_for(cond: Callable[[], Any], what: str, guard: float = 60.0,
             step: float = 0.1) -> Any:
    """Poll until ``cond()`` is truthy; ``guard`` only stops a hang (no timing assertion)."""
    deadline = time.monotonic() + guard
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within the hang guard: {what}")
        time.sleep(step)


def namespaces_of(prefix: str, names: tuple[str, ...]) -> list[str]:
    """The medium's namespace ``<prefix>-m`` and one per node, ``<prefix>-<name>``."""
    return [f"{prefix}-m", *(f"{prefix}-{n}" for n in names)]


def remove_namespaces(prefix: str, names: tuple[str, ...]) -> None:
    """Delete the namespaces of ``bridge_namespaces`` (veths, bridge, nft tables go too)."""
    for ns in namespaces_of(prefix, names):
        if netns_exists(ns):
            sh("ip", "netns", "del", ns, check=False)


def bridge_namespaces(prefix: str, names: tuple[str, ...], subnet: str) -> None:
    """One namespace per node, its ``IFACE`` at ``<subnet>.<index + 1>/24`` on a veth whose
    other end ``<prefix>-<name>0`` is a port of the bridge ``<prefix>-br`` in the medium's
    namespace ``<prefix>-m``; what an earlier, killed run left is removed first."""
    medium, bridge = f"{prefix}-m", f"{prefix}-br"
    remove_namespaces(prefix, names)
    sh("ip", "netns", "add", medium)
    sh("ip", "-n", medium, "link", "add", bridge, "type", "bridge")
    sh("ip", "-n", medium, "link", "set", bridge, "up")
    for index, name in enumerate(names):
        ns, port = f"{prefix}-{name}", f"{prefix}-{name}0"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", port, "netns", medium, "type", "veth",
           "peer", "name", IFACE, "netns", ns)
        sh("ip", "-n", medium, "link", "set", port, "master", bridge, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "addr", "add", f"{subnet}.{index + 1}/24", "brd", "+", "dev", IFACE)
        sh("ip", "-n", ns, "link", "set", IFACE, "up")


def free_port(ns: str) -> int:
    """A port nothing in namespace ``ns`` listens on (asked from the kernel there)."""
    code = "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])"
    return int(sh(sys.executable, "-c", code, ns=ns).stdout)


def nmea(body: str) -> str:
    checksum = reduce(lambda acc, ch: acc ^ ord(ch), body, 0)
    return f"${body}*{checksum:02X}\r\n"


def _degmin(value: float, lat: bool) -> tuple[str, str]:
    d = int(abs(value))
    m = (abs(value) - d) * 60
    text = f"{d:02d}{m:07.4f}" if lat else f"{d:03d}{m:07.4f}"
    hemi = ("N" if value >= 0 else "S") if lat else ("E" if value >= 0 else "W")
    return text, hemi


def nmea_epoch(lat: float, lon: float, second: int) -> str:
    """One receiver epoch: RMC, GGA, GSA and GSV (8 satellites used, HDOP 0.9, 3D fix).

    gpsd reports HDOP and satellites (its SKY report) only with the GSV sky view.
    """
    t = f"12{second // 60 % 60:02d}{second % 60:02d}.00"
    la, ns = _degmin(lat, True)
    lo, ew = _degmin(lon, False)
    sats = [(i + 1, 10 + i * 8, 30 * i, 40) for i in range(8)]
    gsv = "".join(
        nmea(f"GPGSV,2,{k + 1},08," + ",".join(f"{p:02d},{e:02d},{a:03d},{n:02d}"
                                               for p, e, a, n in sats[k * 4:k * 4 + 4]))
        for k in range(2))
    return (nmea(f"GPRMC,{t},A,{la},{ns},{lo},{ew},0.0,0.0,221126,,,A")
            + nmea(f"GPGGA,{t},{la},{ns},{lo},{ew},1,08,0.9,34.0,M,47.0,M,,")
            + nmea("GPGSA,A,3,01,02,03,04,05,06,07,08,,,,,1.5,0.9,1.2") + gsv)


def metres_north(metres: float) -> float:
    return ORIGIN[0] + metres / 111_132.954


@dataclass
class NodeProc:
    """One namespace: its broker, daemon, configuration and state."""

    name: str
    index: int
    workdir: Path
    udp_port: int
    mqtt_port: int = 0
    location: dict[str, Any] = field(default_factory=dict)
    protocol: str = "flooding"
    params: dict[str, Any] = field(default_factory=lambda: {"ttl": 8, "jitter": 0.005})
    link_options: dict[str, Any] = field(default_factory=dict)
    """Extra ``[link]`` keys (e.g. ``receive_buffer``)."""
    broker: RoleBroker | None = None
    """The role-rendered broker configuration (``Mesh(secure=True)``), else anonymous."""
    mosquitto: subprocess.Popen[bytes] | None = None
    daemon: subprocess.Popen[bytes] | None = None
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def node_id(self) -> int:
        return self.index + 1

    @property
    def address(self) -> str:
        return f"10.99.0.{self.node_id}"

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    @property
    def spool_dir(self) -> Path:
        return self.workdir / "spool"

    @property
    def config_path(self) -> Path:
        return self.workdir / "meshsub.toml"

    @property
    def daemon_log(self) -> Path:
        return self.workdir / "meshsubd.log"

    def write_config(self) -> None:
        lines = [
            *self.node_toml(),
            "[link]", f'interface = "{IFACE}"', f"port = {self.udp_port}",
            *(f"{k} = {json.dumps(v)}" for k, v in self.link_options.items()),
            *self.discovery_toml(),
            "[protocol]", f'name = "{self.protocol}"',
            "[protocol.params]", *(f"{k} = {json.dumps(v)}" for k, v in self.params.items()),
            "[security]", "current_key = 1",
            "[security.keys]", f'1 = "{KEY}"',
            "[mqtt]", 'host = "127.0.0.1"', f"port = {self.mqtt_port}",
            *self.mqtt_login_toml(),
            "[storage]", f'state_dir = "{self.state_dir}"', f'spool_dir = "{self.spool_dir}"',
            *self.telemetry_toml(),
            "[log]", 'level = "info"',
            *self.location_toml(),
        ]
        self.config_path.write_text("\n".join(lines) + "\n")

    def node_toml(self) -> list[str]:
        return ["[node]", f"id = {self.node_id}", f'name = "e2e-{self.name}"']

    def discovery_toml(self) -> list[str]:
        return ["[discovery]", "beacon_interval = 1.0", "min_interval = 0.5",
                "neighbor_timeout = 5", "zeroconf = true"]

    def telemetry_toml(self) -> list[str]:
        return ["[telemetry]", "roll_seconds = 5.0"]

    def mqtt_login_toml(self) -> list[str]:
        if self.broker is None or not self.broker.passwords:
            return []
        return [f'username = "{DAEMON_USER}"',
                f'password_file = "{self.broker.password_file(DAEMON_USER)}"']

    def login(self, user: str | None) -> list[str]:
        """mosquitto_pub/sub options for ``user`` (None: anonymous)."""
        if user is None or self.broker is None or user not in self.broker.passwords:
            return []
        return ["-u", user, "-P", self.broker.passwords[user]]

    def location_toml(self) -> list[str]:
        loc = self.location
        if not loc:
            return []
        out = ["[location]", f'source = "{loc["source"]}"', "stale_after = 120.0",
               "movement_threshold = 1.0",
               "[location.origin]", f"lat = {ORIGIN[0]}", f"lon = {ORIGIN[1]}", "alt = 34.0"]
        if loc["source"] == "gpsd":
            out += ["[location.gpsd]", f"port = {loc['port']}"]
        elif loc["source"] == "nmea":
            out += ["[location.nmea]", f'device = "{loc["device"]}"', "baud = 9600"]
        elif loc["source"] == "static":
            out += ["[location.static]", f"x = {loc['x']}", f"y = {loc['y']}"]
        return out

    # ------------------------------------------------------------ processes

    def start_broker(self) -> None:
        conf = self.workdir / "mosquitto.conf"
        if self.broker is not None:
            conf = self.broker.conf
        else:
            conf.write_text(
                f"listener {self.mqtt_port} 127.0.0.1\nallow_anonymous true\n"
                f"persistence true\npersistence_location {self.workdir}/\n"
                f"max_queued_messages 100000\nmax_inflight_messages 256\n"
                f"user {getpass.getuser()}\n")
        self.mosquitto = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "/usr/sbin/mosquitto", "-c", str(conf)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        code = f"import socket;socket.create_connection(('127.0.0.1',{self.mqtt_port}),1).close()"
        wait_for(lambda: sh(sys.executable, "-c", code, ns=self.ns, check=False).returncode == 0,
                 f"mosquitto in {self.ns}")

    def start_daemon(self) -> None:
        self.write_config()
        log = open(self.daemon_log, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.daemon = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, str(VENV_BIN / "meshsubd"),
                 "--config", str(self.config_path)],
                stdout=log, stderr=log)
        finally:
            log.close()
        wait_for(lambda: (self.state_dir / "meshsubd.sock").exists() or self._died(),
                 f"meshsubd in {self.ns}")
        if self.daemon.poll() is not None:
            raise RuntimeError(f"meshsubd in {self.ns} exited: {self.log_tail()}")

    def _died(self) -> bool:
        return self.daemon is not None and self.daemon.poll() is not None

    def kill_daemon(self, sig: int = signal.SIGKILL) -> int:
        assert self.daemon is not None
        self.daemon.send_signal(sig)
        code = self.daemon.wait(30)
        self.daemon = None
        return code

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.daemon_log.read_text().splitlines()[-lines:])
        return ""

    def stop_all(self) -> None:
        procs = [*self.extra, self.daemon, self.mosquitto]
        for proc in procs:
            if proc is not None and proc.poll() is None:
                _signal(proc, signal.SIGTERM)
        for proc in procs:
            if proc is None:
                continue
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL)
                proc.wait(5)
        self.daemon = self.mosquitto = None
        self.extra = []

    # ------------------------------------------------------------ tools

    def ctl(self, *args: str) -> Any:
        """``meshsubctl --json ARGS`` against this node's daemon; the parsed answer."""
        proc = subprocess.run([str(VENV_BIN / "meshsubctl"), "--json", "--state-dir",
                               str(self.state_dir), *args], capture_output=True, text=True,
                              timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"meshsubctl {' '.join(args)}: {proc.stderr.strip()}")
        return json.loads(proc.stdout)

    def try_status(self) -> dict[str, Any] | None:
        try:
            status = self.ctl("status")
        except (RuntimeError, json.JSONDecodeError, subprocess.TimeoutExpired):
            return None
        return status if isinstance(status, dict) else None

    def mqtt_pub(self, topic: str, payload: str, *, retain: bool = False,
                 user: str | None = "e2e", check: bool = True,
                 props: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        """``mosquitto_pub`` as application ``user`` (anonymous with ``user=None``, or on a
        broker without logins); ``check=False`` returns a refused publish instead."""
        args = ["mosquitto_pub", "-V", "5", "-q", "1", "-h", "127.0.0.1",
                "-p", str(self.mqtt_port), "-t", topic, *self.login(user)]
        for prop in props or []:
            args += ["-D", "publish", "user-property", *prop.split("=", 1)]
        args += ["-r"] if retain else []
        args += ["-n"] if payload == "" else ["-m", payload]
        return sh(*args, ns=self.ns, check=check)

    def mqtt_sub(self, topic: str, user: str | None = "e2e") -> Subscriber:
        return Subscriber(self, topic, user)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal a process, or its whole group if it leads one (gpsfake and its gpsd)."""
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


class Subscriber:
    """``mosquitto_sub`` in a namespace; its output lines collected by a thread."""

    def __init__(self, node: NodeProc, topic: str, user: str | None = "e2e") -> None:
        self.lines: list[str] = []
        self.user = user
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", node.ns, "mosquitto_sub", "-V", "5", "-q", "1",
             "-h", "127.0.0.1", "-p", str(node.mqtt_port), "-t", topic,
             "-F", "%U %p", *node.login(user)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        node.extra.append(self.proc)
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def deliveries(self) -> list[tuple[float, dict[str, Any]]]:
        """(receive time, delivery JSON) for every line so far."""
        out = []
        for line in list(self.lines):
            stamp, _, payload = line.partition(" ")
            with contextlib.suppress(ValueError):
                out.append((float(stamp), json.loads(payload)))
        return out

    def events(self, **attrs: Any) -> list[dict[str, Any]]:
        """Deliveries whose event attributes include ``attrs``."""
        return [d for _, d in self.deliveries()
                if "event_id" in d and all(d["attrs"].get(k) == v for k, v in attrs.items())]

    def wait_ready(self, node: NodeProc, topic: str) -> None:
        """Publish probes to ``topic`` (which this subscriber matches) until one arrives,
        so nothing the test publishes afterwards can beat the subscription."""
        def probe() -> bool:
            node.mqtt_pub(topic, '{"probe": true}', user=self.user if node.broker is None
                          else DAEMON_USER)
            time.sleep(0.1)
            return any(d.get("probe") for _, d in self.deliveries())
        wait_for(probe, "mosquitto_sub subscribed", step=0.2)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def hear(prefix: str, names: tuple[str, ...], *pairs: tuple[str, str]) -> None:
    """The medium of ``bridge_namespaces(prefix, names, ...)`` forwards between exactly these
    pairs of nodes (both ways) and drops the rest; call again when the topology changes (its
    nft table is ``<prefix>`` with ``_`` for ``-``)."""
    table = prefix.replace("-", "_")
    allowed = {frozenset(p) for p in pairs}
    rules = "\n".join(f'        iifname "{prefix}-{x}0" oifname "{prefix}-{y}0" drop'
                      for x in names for y in names
                      if x != y and frozenset((x, y)) not in allowed)
    sh("nft", "-f", "-", ns=f"{prefix}-m", input_text=f"""
table bridge {table} {{
    chain forward {{
        type filter hook forward priority -1; policy accept;
    }}
}}
flush chain bridge {table} forward
table bridge {table} {{
    chain forward {{
{rules}
    }}
}}
""")


@dataclass
class ProtocolNode(NodeProc):
    """A node of a protocol's own small e2e mesh (``protocol_mesh``): its namespace prefix,
    its roles and its protocol parameters, fast discovery without DNS-SD, an anonymous
    broker."""

    prefix: str = PREFIX
    roles: tuple[str, ...] = ()
    neighbor_timeout: int = 3

    @property
    def ns(self) -> str:
        return f"{self.prefix}-{self.name}"

    def node_toml(self) -> list[str]:
        short = self.prefix.removeprefix("msub-")
        return ["[node]", f"id = {self.node_id}", f'name = "{short}-{self.name}"',
                f"roles = {json.dumps(list(self.roles))}"]

    def discovery_toml(self) -> list[str]:
        return ["[discovery]", "beacon_interval = 0.5", "min_interval = 0.25",
                f"neighbor_timeout = {self.neighbor_timeout}", "zeroconf = false"]

    def telemetry_toml(self) -> list[str]:
        return []

    def proto(self) -> dict[str, Any]:
        """The protocol's part of ``meshsubctl status`` ({} while the daemon does not answer)."""
        status = self.try_status()
        return {} if status is None else dict(status["protocol"])

    def neighbours(self) -> list[int]:
        try:
            return sorted(r["node"] for r in self.ctl("neighbors"))
        except RuntimeError:
            return []


@contextlib.contextmanager
def protocol_mesh(workdir: Path, prefix: str, subnet: str, protocol: str,
                  setup: dict[str, tuple[tuple[str, ...], dict[str, Any]]],
                  hears: tuple[tuple[str, str], ...], *,
                  neighbor_timeout: int = 3) -> Iterator[dict[str, ProtocolNode]]:
    """Nodes ``setup``'s keys (name: (roles, protocol parameters)) on ``bridge_namespaces``,
    hearing only ``hears``, each with its broker and a daemon running ``protocol``; on the
    way out a daemon that died shows its log, and everything is removed."""
    names = tuple(setup)
    nodes: dict[str, ProtocolNode] = {}
    try:
        bridge_namespaces(prefix, names, subnet)
        hear(prefix, names, *hears)
        udp_port = free_port(f"{prefix}-{names[0]}")
        for index, (name, (roles, params)) in enumerate(setup.items()):
            (workdir / name).mkdir()
            node = ProtocolNode(name, index, workdir / name, udp_port, protocol=protocol,
                                params=dict(params), prefix=prefix, roles=roles,
                                neighbor_timeout=neighbor_timeout)
            node.mqtt_port = free_port(node.ns)
            nodes[name] = node
        for node in nodes.values():
            node.start_broker()
        for node in nodes.values():
            node.start_daemon()
        yield nodes
    finally:
        for node in nodes.values():
            if node.daemon is not None and node.daemon.poll() is not None:
                print(f"--- meshsubd {node.name} exited {node.daemon.returncode}:\n"
                      f"{node.log_tail()}")
            node.stop_all()
        remove_namespaces(prefix, names)


class Mesh:
    """Bring the three namespaces up and down; ``nodes`` by name."""

    def __init__(self, workdir: Path, protocol: str = "flooding",
                 params: dict[str, Any] | None = None, *, secure: bool = False,
                 apps: tuple[str, ...] = ("e2e", "other")) -> None:
        self.workdir = workdir
        self.protocol = protocol
        self.params = params
        self.secure = secure
        self.apps = apps
        self.nodes: dict[str, NodeProc] = {}

    # ------------------------------------------------------------ topology

    @staticmethod
    def namespaces() -> list[str]:
        return namespaces_of(PREFIX, NAMES)

    def remove(self) -> None:
        """Delete our namespaces (their veths, bridge and nft table go with them)."""
        remove_namespaces(PREFIX, NAMES)

    def up(self, location: dict[str, dict[str, Any]] | None = None) -> None:
        bridge_namespaces(PREFIX, NAMES, "10.99.0")
        a, c = f"{PREFIX}-a0", f"{PREFIX}-c0"
        sh("nft", "-f", "-", ns=MEDIUM, input_text=f"""
table bridge {NFT_TABLE} {{
    chain forward {{
        type filter hook forward priority -1; policy accept;
        iifname "{a}" oifname "{c}" drop
        iifname "{c}" oifname "{a}" drop
    }}
}}
""")
        udp_port = free_port(f"{PREFIX}-b")
        for index, name in enumerate(NAMES):
            workdir = self.workdir / name
            workdir.mkdir(parents=True, exist_ok=True)
            node = NodeProc(name, index, workdir, udp_port, protocol=self.protocol)
            if self.params is not None:
                node.params = dict(self.params)
            node.mqtt_port = free_port(node.ns)
            node.location = (location or {}).get(name, {})
            if self.secure:
                node.broker = render(workdir / "broker", node.mqtt_port,
                                     [{"name": app} for app in self.apps])
            self.nodes[name] = node

    def start(self) -> None:
        for node in self.nodes.values():
            node.start_broker()
        for node in self.nodes.values():
            node.start_daemon()

    def wait_neighbors(self) -> None:
        """A and C each see B only; B sees both."""
        want = {"a": [2], "b": [1, 3], "c": [2]}
        for name, ids in want.items():
            node = self.nodes[name]

            def seen(node: NodeProc = node, ids: list[int] = ids) -> bool:
                return sorted(r["node"] for r in node.ctl("neighbors")) == ids

            wait_for(seen, f"neighbours of {name}")

    def down(self) -> None:
        for node in self.nodes.values():
            node.stop_all()
        self.remove()

    @contextlib.contextmanager
    def running(self, location: dict[str, dict[str, Any]] | None = None) -> Iterator[Mesh]:
        try:
            self.up(location)
            self.start()
            yield self
        finally:
            self.down()
