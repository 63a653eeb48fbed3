"""``meshsubd`` and ``meshsubctl``: exit statuses, one-line errors, output, streaming."""

from __future__ import annotations

import asyncio
import io
import json
import re
import signal
import subprocess
import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from examplecfg import install_example

from meshsub import __version__
from meshsub.cli import meshsubctl_main, meshsubd_main
from meshsub.core.api import MessageId
from meshsub.core.content import Event, Subscription
from meshsub.runtime.control import ControlHandlers, ControlServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "meshsub.toml.example"
CTL = "import sys; from meshsub.cli import meshsubctl_main; sys.exit(meshsubctl_main())"


# ------------------------------------------------------------------ meshsubd


def _help(main: Any, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    return str(capsys.readouterr().out)


def test_help_is_the_manual_docs_operations_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` of both commands says what docs/operations.md says: the meshsubctl
    synopsis and every command line of its block verbatim, meshsubd's invocations, and
    each exit status of the page's table."""
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    ctl_block = page.split("## meshsubctl", 1)[1].split("```")[1]
    ctl_lines = [line for line in ctl_block.splitlines() if line.strip()]
    ctl = _help(meshsubctl_main, capsys)
    assert ctl.startswith(f"usage: {ctl_lines[0]}\n")
    for line in ctl_lines[1:]:
        assert line in ctl, line
    daemon_block = page.split("## Commands", 1)[1].split("```")[1]
    daemon = _help(meshsubd_main, capsys)
    for line in daemon_block.splitlines():
        if "--config" in line:
            assert line in daemon, line
    table = page.split("### Exit statuses", 1)[1].split("\n\n", 2)[1]
    statuses = re.findall(r"^\| ([0-9]) \|", table, re.M)
    assert statuses == ["0", "1", "2"]
    for text in (ctl, daemon):
        listed = text.split("exit status:\n", 1)[1]
        assert re.findall(r"^  ([0-9])  ", listed, re.M) == statuses


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        meshsubd_main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"meshsubd {__version__}"


@pytest.mark.skipif(not EXAMPLE.exists(), reason="no example configuration")
def test_check_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert meshsubd_main(["--config", str(install_example(tmp_path)), "--check"]) == 0
    assert "valid" in capsys.readouterr().out


def test_the_example_ships_no_usable_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert meshsubd_main(["--config", str(EXAMPLE), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meshsubd: security.key_file: cannot read key file") and \
        err.count("\n") == 1


def test_check_invalid_is_one_line_exit_2(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[node]\nid = "seventeen"\n')
    assert meshsubd_main(["--config", str(bad), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meshsubd: node.id") and err.count("\n") == 1
    assert meshsubd_main(["--config", str(tmp_path / "missing.toml"), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("meshsubd: ") and "cannot read" in err and err.count("\n") == 1


def test_usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        meshsubd_main(["--bogus"])
    assert info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.skipif(not EXAMPLE.exists(), reason="no example configuration")
def test_run_without_node_module_fails_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "meshsub.runtime.node", None)  # import fails
    assert meshsubd_main(["--config", str(install_example(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert err.startswith("meshsubd: the daemon main loop is not available")
    assert err.count("\n") == 1


@pytest.mark.skipif(not EXAMPLE.exists(), reason="no example configuration")
def test_run_calls_node_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[Any] = []
    example = str(install_example(tmp_path))

    async def run(config: Any) -> int:
        seen.append(config)
        return 0

    fake = types.ModuleType("meshsub.runtime.node")
    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "meshsub.runtime.node", fake)
    assert meshsubd_main(["--config", example]) == 0
    assert seen and seen[0].node.id == 17

    def crash(config: Any) -> int:
        raise RuntimeError("link down\nsecond line")

    fake.run = crash  # type: ignore[attr-defined]
    assert meshsubd_main(["--config", example]) == 1
    assert capsys.readouterr().err == "meshsubd: fatal: RuntimeError: link down\n"


# ------------------------------------------------------------------ meshsubctl


def test_ctl_daemon_not_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert meshsubctl_main(["--state-dir", str(tmp_path), "status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("meshsubctl: daemon not running") and err.count("\n") == 1


def test_ctl_bad_expression_rejected_before_connecting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no daemon here: exit 2 (not 1) proves nothing tried to connect
    assert meshsubctl_main(["--state-dir", str(tmp_path), "sub", "t", "x", ">>>", "1"]) == 2
    assert meshsubctl_main(["--state-dir", str(tmp_path), "pub", "a/+/b", "x=1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("meshsubctl: ") for line in err)


class Daemon:
    """A control server with canned state, as the node will provide it."""

    def __init__(self) -> None:
        self.published: list[Event] = []
        self.subs: dict[str, Subscription] = {}

    def handlers(self) -> ControlHandlers:
        return ControlHandlers(
            status=lambda: {"node": 42, "protocol": "flooding", "uptime_s": 12.5,
                            "mqtt": {"state": "connected"},
                            "drops": {"ttl_expired": 3, "bad_mac": 1}},
            neighbors=lambda: [{"node": 7, "link_quality": 0.875, "position": [1.0, 2.0]},
                               {"node": 9, "link_quality": 0.5, "position": None}],
            subscriptions=lambda: [],
            publish=self.publish,
            subscribe=self.subs.__setitem__,
            unsubscribe=self.subs.pop,
        )

    def publish(self, event: Event) -> MessageId:
        self.published.append(event)
        return MessageId(0x2A, 1, 1)


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[tuple[Daemon, ControlServer]]:
    d = Daemon()
    srv = ControlServer(tmp_path / "meshsubd.sock", d.handlers())
    await srv.start()
    yield d, srv
    await srv.stop()


async def _ctl(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await asyncio.to_thread(meshsubctl_main, list(argv), out)
    return code, out.getvalue()


async def test_ctl_status_neighbors_subscriptions(
        daemon: tuple[Daemon, ControlServer], tmp_path: Path) -> None:
    _, srv = daemon
    code, text = await _ctl("--state-dir", str(tmp_path), "status")
    assert code == 0
    assert "drops.ttl_expired  3" in text and "mqtt.state" in text and "uptime_s" in text
    code, text = await _ctl("--socket", str(srv.path), "--json", "status")
    assert code == 0 and json.loads(text)["drops"] == {"ttl_expired": 3, "bad_mac": 1}
    code, text = await _ctl("--socket", str(srv.path), "neighbors")
    lines = text.splitlines()
    assert lines[0].split() == ["NODE", "LINK_QUALITY", "POSITION"]
    assert lines[1].split() == ["7", "0.875", "1,2"] and lines[2].split() == ["9", "0.5", "-"]
    code, text = await _ctl("--socket", str(srv.path), "subscriptions")
    assert code == 0 and text.strip() == "no subscriptions"


async def test_ctl_pub(daemon: tuple[Daemon, ControlServer]) -> None:
    d, srv = daemon
    code, text = await _ctl("--socket", str(srv.path), "pub", "sensors/t", "v=21.5", 'room="lab 1"')
    assert code == 0 and text.strip() == "published 2a-1-1"
    assert d.published[0].attrs == {"v": 21.5, "room": "lab 1"}


async def test_ctl_sub_streams_and_exits_0_on_sigint(
        daemon: tuple[Daemon, ControlServer]) -> None:
    d, srv = daemon
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CTL, "--socket", str(srv.path), "sub", "sensors/#", "v>1",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for _ in range(1000):
            if d.subs:
                break
            await asyncio.sleep(0.01)
        (sub_id,) = d.subs
        srv.deliver(sub_id, {"event_id": "7-1-1", "hop": 2, "topic": "sensors/a",
                             "attrs": {"v": 2}})
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 10)
        assert line.decode().strip() == "7-1-1 hop=2 sensors/a v=2"
        proc.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(proc.wait(), 10)
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
        assert code == 0, err
        assert "Traceback" not in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    for _ in range(500):
        if not d.subs:
            break
        await asyncio.sleep(0.01)
    assert d.subs == {}  # the hang-up unsubscribed


async def test_ctl_sub_ends_with_exit_1_when_daemon_stops(
        daemon: tuple[Daemon, ControlServer]) -> None:
    d, srv = daemon
    task = asyncio.create_task(_ctl("--socket", str(srv.path), "--json", "sub", "t"))
    for _ in range(1000):
        if d.subs:
            break
        await asyncio.sleep(0.01)
    await srv.stop()
    code, _ = await asyncio.wait_for(task, 10)
    assert code == 1


# ------------------------------------------------------------------ structured logs


def test_logfmt_lines_are_single_lines() -> None:
    from meshsub.runtime.logging import configure_logging, get_logger

    buf = io.StringIO()
    handler = configure_logging("info", stream=buf)
    try:
        log = get_logger("meshsub.test")
        log.debug("hidden")
        log.info("connected to broker", broker="127.0.0.1:1883", queued=3)
        try:
            raise ValueError("bad\nthing")
        except ValueError as exc:
            log.error("request failed", exc=exc, path="/tmp/a b")
    finally:
        import logging

        logging.getLogger().removeHandler(handler)
    lines = buf.getvalue().splitlines()
    assert lines == [
        'level=info logger=meshsub.test msg="connected to broker" broker=127.0.0.1:1883 queued=3',
        'level=error logger=meshsub.test msg="request failed" path="/tmp/a b" '
        'error="ValueError: bad\\nthing"',
    ]


def test_json_log_format() -> None:
    import logging

    from meshsub.runtime.logging import configure_logging, get_logger

    buf = io.StringIO()
    handler = configure_logging("debug", fmt="json", stream=buf)
    try:
        get_logger("meshsub.x").warning("queue full", dropped=2)
    finally:
        logging.getLogger().removeHandler(handler)
    obj = json.loads(buf.getvalue())
    assert (obj["level"], obj["logger"], obj["msg"], obj["dropped"]) == (
        "warning", "meshsub.x", "queue full", 2)
    with pytest.raises(ValueError, match="log level"):
        configure_logging("loud")
