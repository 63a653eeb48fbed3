"""Entry points: ``meshsubd`` (the field daemon) and ``meshsubctl`` (the operator tool).

Exit statuses (``docs/operations.md``): 0 success (and a clean stop on
SIGTERM/SIGINT), 1 runtime failure (daemon not running, request refused, fatal
error), 2 bad usage or bad configuration (systemd's ``RestartPreventExitStatus=2``
stops a restart loop on a typo). Every failure is one line on stderr, never a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from meshsub import __version__

DEFAULT_CONFIG = "/etc/meshsub/meshsub.toml"
DEFAULT_STATE_DIR = "/var/lib/meshsub"
DEFAULT_RUNTIME_DIR = "/run/meshsub"
SOCKET_NAME = "meshsubd.sock"

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


# The manual pages of the two commands: ``--help`` says what docs/operations.md says
# (tests/runtime/test_cli.py compares them).
MESHSUBD_EPILOG = f"""\
examples:
  meshsubd --config {DEFAULT_CONFIG}          # run (systemd does this)
  meshsubd --config {DEFAULT_CONFIG} --check  # validate only: exit 0, or 2 + one line
  meshsubd --check-registry                   # check the installed protocols once (as root)

exit status:
  0  stopped by SIGTERM/SIGINT; --check: the configuration is valid
  1  runtime failure (a fatal error; systemd restarts the unit)
  2  bad usage or bad configuration, one line on stderr (the unit does not restart)

files:
  {DEFAULT_CONFIG:<28}configuration (docs/config.md)
  {"/etc/meshsub/fleet.keys":<28}fleet keys, readable by the service alone
  {DEFAULT_STATE_DIR + "/":<28}state (SQLite) and telemetry spool
  {DEFAULT_RUNTIME_DIR + "/" + SOCKET_NAME:<28}control socket (meshsubctl)

see docs/operations.md and docs/config.md
"""

MESHSUBCTL_USAGE = "meshsubctl [--json] [--state-dir DIR | --socket PATH] [--timeout S] COMMAND"
MESHSUBCTL_EPILOG = """\
commands:
  status                 node, protocol, uptime, epoch, location, link, MQTT, counters, drops
  neighbors              one-hop neighbours (table)
  subscriptions          local subscriptions (table)
  pub TOPIC [name=value ...]     publish an event in the text syntax
  sub FILTER [predicate ...]     subscribe and print deliveries until Ctrl-C
  genkey [--id N]                print a new fleet key: 32 random bytes, hex (no daemon needed)

exit status:
  0  success; sub stopped with Ctrl-C
  1  runtime failure: daemon not running, permission denied, request refused,
     daemon went away
  2  bad usage or bad expression

Every failure is one line on stderr. The socket is group meshsub's (mode 0660): the
role's meshsub_operators may use it without root.
see docs/operations.md
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")


# ====================================================================== meshsubd


def meshsubd_main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="meshsubd", description="meshsub field daemon",
                     epilog=MESHSUBD_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", "-c", default=DEFAULT_CONFIG, help="TOML configuration file")
    parser.add_argument("--check", action="store_true",
                        help="validate the configuration and exit (0 valid, 2 invalid)")
    parser.add_argument("--check-registry", action="store_true",
                        help="check that the installed protocols agree (names, frame ids) and "
                             "record this installation, so the daemon's start skips the check")
    parser.add_argument("--version", action="version", version=f"meshsubd {__version__}")
    args = parser.parse_args(argv)

    if args.check_registry:
        return _check_registry()
    if args.check:
        return _check(args.config)
    try:
        from meshsub.runtime.protocolcheck import isolated
    except ImportError as exc:
        return _fail("meshsubd", f"configuration support is missing: {exc}", EXIT_FAILURE)
    with isolated():  # every protocol is loaded in a child for the registry's checks, one here
        return _meshsubd(args)


def _check(path: str) -> int:
    """``--check``: the configuration alone, with only the protocol it names loaded.

    The deployment runs it on every device before a new configuration may replace
    the running one (deploy/ansible, role meshsub), so it costs what the check needs:
    the file, its keys and its protocol's parameters. Whether the installed protocols
    contradict each other (two claiming one name or frame id) is the installation's
    question, not the file's: the daemon's start answers it (runtime/protocolcheck.py)
    and refuses to run, naming both.
    """
    try:
        from meshsub.core.registry import load_protocol
        from meshsub.runtime.config import ConfigError, load_config
    except ImportError as exc:
        return _fail("meshsubd", f"configuration support is missing: {exc}", EXIT_FAILURE)
    try:
        config = load_config(path, protocol_lookup=load_protocol)
    except ConfigError as exc:
        return _fail("meshsubd", str(exc), EXIT_USAGE)
    for warning in config.security.warnings:
        print(f"meshsubd: warning: {warning}", file=sys.stderr)
    print(f"meshsubd: {path}: configuration is valid")
    return EXIT_OK


def _check_registry() -> int:
    """``--check-registry``: the whole registry, once per installation (as root).

    The deployment runs it after every install (deploy/ansible, role meshsub): it loads
    every installed protocol, as the daemon's start would in a child, and records the
    installation it found consistent in the venv, so each start of the daemon skips
    the check while the installation is unchanged (runtime/protocolcheck.py). A
    collision is one line and exit 2 (nothing recorded: the daemon refuses to start).
    """
    try:
        from meshsub.core.registry import RegistryError
        from meshsub.runtime.protocolcheck import check_and_record, record_path
    except ImportError as exc:
        return _fail("meshsubd", f"configuration support is missing: {exc}", EXIT_FAILURE)
    try:
        count, record = check_and_record()
    except RegistryError as exc:
        return _fail("meshsubd", f"the installed protocols disagree: {exc}", EXIT_USAGE)
    except OSError as exc:
        return _fail("meshsubd", f"cannot record the checked installation in "
                                 f"{record_path()}: {exc.strerror or exc}", EXIT_FAILURE)
    where = (f"record {record}: {record_path()}" if record != "none" else
             "not recorded (an editable or unrecorded installation): every start checks")
    print(f"meshsubd: {count} installed protocols agree (names, frame ids); {where}")
    return EXIT_OK


def _meshsubd(args: argparse.Namespace) -> int:
    try:
        from meshsub.runtime.config import ConfigError, load_config
    except ImportError as exc:
        return _fail("meshsubd", f"configuration support is missing: {exc}", EXIT_FAILURE)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return _fail("meshsubd", str(exc), EXIT_USAGE)

    try:
        from meshsub.runtime.node import run
    except ImportError as exc:
        return _fail("meshsubd", f"the daemon main loop is not available: {exc}", EXIT_FAILURE)
    try:
        result: Any = run(config)
        if inspect.iscoroutine(result):
            import asyncio  # here: ``--check`` and meshsubctl need no event loop

            result = asyncio.run(result)
    except KeyboardInterrupt:
        return EXIT_OK
    except ConfigError as exc:
        return _fail("meshsubd", str(exc), EXIT_USAGE)
    except Exception as exc:
        return _fail("meshsubd", f"fatal: {type(exc).__name__}: {exc}", EXIT_FAILURE)
    return int(result) if isinstance(result, int) else EXIT_OK


def _fail(prog: str, message: str, status: int) -> int:
    first = message.splitlines()[0] if message else "error"
    print(f"{prog}: {first}", file=sys.stderr)
    return status


# ===================================================================== meshsubctl


class CtlError(Exception):
    """A one-line failure with its exit status."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.status = status


def _socket_path(args: argparse.Namespace) -> Path:
    """--socket; else in --state-dir or $MESHSUB_STATE_DIR; else the unit's runtime
    directory if the daemon listens there, else the default state directory."""
    if args.socket:
        return Path(args.socket)
    state = args.state_dir or os.environ.get("MESHSUB_STATE_DIR")
    if state:
        return Path(state) / SOCKET_NAME
    runtime = Path(DEFAULT_RUNTIME_DIR) / SOCKET_NAME
    return runtime if runtime.exists() else Path(DEFAULT_STATE_DIR) / SOCKET_NAME


class _Connection:
    """A blocking newline-delimited JSON client of the control socket."""

    def __init__(self, path: Path, timeout: float | None) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            self.sock.close()
            raise CtlError(f"daemon not running (no control socket at {path})") from None
        except PermissionError:
            self.sock.close()
            raise CtlError(f"permission denied on {path} (is this user in the daemon's group?)",
                           ) from None
        except OSError as exc:
            self.sock.close()
            raise CtlError(f"cannot connect to {path}: {exc.strerror or exc}") from None
        self.file = self.sock.makefile("rb")

    def request(self, obj: Mapping[str, Any]) -> Any:
        try:
            self.sock.sendall(json.dumps(obj).encode() + b"\n")
        except OSError as exc:
            raise CtlError(f"lost the daemon: {exc.strerror or exc}") from None
        reply = self.read()
        if reply is None:
            raise CtlError("the daemon closed the connection")
        if not isinstance(reply, dict) or "ok" not in reply:
            raise CtlError("malformed reply from the daemon")
        if not reply["ok"]:
            raise CtlError(str(reply.get("error", "request refused")))
        return reply.get("result")

    def read(self) -> Any:
        try:
            line = self.file.readline()
        except TimeoutError:
            raise CtlError("the daemon did not answer in time") from None
        except OSError as exc:
            raise CtlError(f"lost the daemon: {exc.strerror or exc}") from None
        if not line:
            return None
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            raise CtlError("malformed reply from the daemon") from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
            self.sock.close()


def meshsubctl_main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = _Parser(prog="meshsubctl", description="query and drive a running meshsubd",
                     usage=MESHSUBCTL_USAGE, epilog=MESHSUBCTL_EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", metavar="DIR",
                        help="directory of the daemon's control socket (default "
                        f"$MESHSUB_STATE_DIR, else {DEFAULT_RUNTIME_DIR} or {DEFAULT_STATE_DIR})")
    parser.add_argument("--socket", metavar="PATH",
                        help="control socket path (overrides --state-dir)")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                        help="seconds to wait for a reply (default 10)")
    parser.add_argument("--version", action="version", version=f"meshsubctl {__version__}")
    # the commands are listed in the epilog, as docs/operations.md lists them
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                prog="meshsubctl", help="one of the commands below")
    sub.add_parser("status")
    sub.add_parser("neighbors")
    sub.add_parser("subscriptions")
    p = sub.add_parser("pub", usage="meshsubctl pub TOPIC [name=value ...]")
    p.add_argument("text", nargs="+", help="the event in text syntax")
    s = sub.add_parser("sub", usage="meshsubctl sub FILTER [predicate ...]")
    s.add_argument("text", nargs="+", help="the subscription in text syntax")
    g = sub.add_parser("genkey")
    g.add_argument("--id", type=int, metavar="N",
                   help="print a key file line '<id> <hex>' (key id 0..255)")
    args = parser.parse_args(argv)
    if args.command == "genkey":
        return _genkey(args.id, out)

    try:
        return _run_ctl(args, out)
    except CtlError as exc:
        return _fail("meshsubctl", str(exc), exc.status)
    except KeyboardInterrupt:
        return EXIT_OK
    except BrokenPipeError:  # `meshsubctl sub | head`
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the interpreter's flush
        return EXIT_OK


def _genkey(key_id: int | None, out: TextIO) -> int:
    """A new fleet key from the OS's CSPRNG; needs no daemon."""
    from meshsub.wire.keys import KEY_ID_MAX, new_key

    if key_id is not None and not 0 <= key_id <= KEY_ID_MAX:
        return _fail("meshsubctl", f"genkey: key id must be in 0..{KEY_ID_MAX}", EXIT_USAGE)
    key = new_key()
    print(key if key_id is None else f"{key_id} {key}", file=out)
    return EXIT_OK


def _run_ctl(args: argparse.Namespace, out: TextIO) -> int:
    from meshsub.core.syntax import format_event, parse_event, parse_subscription
    from meshsub.core.values import ContentError

    text = " ".join(getattr(args, "text", []) or [])
    # a bad expression is refused before any connection is made
    try:
        if args.command == "pub":
            text = format_event(parse_event(text))
        elif args.command == "sub":
            parse_subscription(text)
    except ContentError as exc:
        raise CtlError(str(exc), EXIT_USAGE) from None

    path = _socket_path(args)
    if args.command == "sub":
        return _stream(path, text, args.json, out)
    conn = _Connection(path, args.timeout)
    try:
        if args.command == "pub":
            result = conn.request({"cmd": "pub", "event": text})
        else:
            result = conn.request({"cmd": args.command})
    finally:
        conn.close()
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True, default=str), file=out)
    elif args.command == "status":
        _print_status(result, out)
    elif args.command == "pub":
        print(f"published {result.get('event_id', '?')}", file=out)
    else:
        rows = result if isinstance(result, list) else []
        if not rows:
            print(f"no {args.command}", file=out)
        else:
            _print_table(rows, out)
    return EXIT_OK


def _stream(path: Path, expression: str, as_json: bool, out: TextIO) -> int:
    """Subscribe, then print deliveries until Ctrl-C (exit 0) or the daemon goes (exit 1)."""
    from meshsub.core.content import Event
    from meshsub.core.syntax import format_event

    conn = _Connection(path, None)
    # Ctrl-C must raise KeyboardInterrupt here even if the caller ignored SIGINT
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    if main:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = conn.request({"cmd": "sub", "expr": expression})
        if not as_json:
            print(f"subscribed as {result.get('sub_id', '?')}: {expression} (Ctrl-C to stop)",
                  file=sys.stderr)
        while True:
            line = conn.read()
            if line is None:
                raise CtlError("the daemon ended the subscription")
            if as_json:
                print(json.dumps(line, sort_keys=True), file=out, flush=True)
                continue
            d = line.get("deliver", {}) if isinstance(line, dict) else {}
            try:
                shown = format_event(Event(d.get("topic", ""), d.get("attrs", {})))
            except ValueError:
                shown = json.dumps(d)
            extra = f" (+{line['dropped']} dropped)" if line.get("dropped") else ""
            print(f"{d.get('event_id', '?')} hop={d.get('hop', '?')} {shown}{extra}",
                  file=out, flush=True)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        conn.close()
        if main:
            signal.signal(signal.SIGINT, previous)


def _flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(obj, Mapping) and obj:
        for key in sorted(obj):
            yield from _flatten(obj[key], f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, obj


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value == value else "nan"
    if isinstance(value, list | tuple):
        return ",".join(_cell(v) for v in value) or "-"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={_cell(v)}" for k, v in value.items()) or "-"
    return str(value)


def _print_status(result: Any, out: TextIO) -> None:
    pairs = list(_flatten(result if isinstance(result, Mapping) else {"result": result}))
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        print(f"{key.ljust(width)}  {_cell(value)}", file=out)


def _print_table(rows: list[Any], out: TextIO) -> None:
    columns: list[str] = []
    for row in rows:
        for key in row if isinstance(row, Mapping) else ():
            if key not in columns:
                columns.append(key)
    cells = [[_cell(row.get(c)) if isinstance(row, Mapping) else _cell(row) for c in columns]
             for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
          file=out)
    for r in cells:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip(), file=out)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(meshsubctl_main())
