"""Every log line in the documented format: ours, the libraries', with host:port addresses."""

from __future__ import annotations

import io
import logging
import warnings
from collections.abc import Iterator

import pytest

from meshsub.runtime.logging import RepeatFilter, configure_logging, get_logger

LIBRARIES = ("mqtt", "zeroconf", "asyncio", "py.warnings")


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    for name in LIBRARIES:  # as in the daemon, whatever earlier tests did to them
        logger = logging.getLogger(name)
        logger.disabled = False
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
    logging.captureWarnings(False)  # so that configure_logging installs it here
    buf = io.StringIO()
    handler = configure_logging("info", stream=buf)
    try:
        yield buf
    finally:
        logging.getLogger().removeHandler(handler)
        logging.captureWarnings(False)


def test_library_loggers_use_the_format_and_repeats_are_limited(logged: io.StringIO) -> None:
    mqtt = logging.getLogger("mqtt")  # aiomqtt's logger
    for pending in range(18, 30):
        mqtt.warning("There are %d pending publish calls.", pending)
    logging.getLogger("zeroconf").info("chatty")  # a library's info stays quiet
    logging.getLogger("asyncio").error("Task exception was never retrieved",
                                       exc_info=(RuntimeError, RuntimeError("boom"), None))
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("old API", DeprecationWarning, stacklevel=1)
    lines = logged.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert lines[0] == ('level=warning logger=mqtt '
                        'msg="There are 18 pending publish calls."')
    assert lines[1] == ('level=error logger=asyncio msg="Task exception was never retrieved" '
                        'error="RuntimeError: boom"')
    assert lines[2].startswith("level=warning logger=py.warnings msg=")
    assert len(lines) == 3 and all("\n" not in line for line in lines)


def test_repeat_filter_reports_what_it_suppressed() -> None:
    now = [0.0]
    flt = RepeatFilter(every=30.0, clock=lambda: now[0])

    def record(name: str, msg: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, (), None)

    assert flt.filter(record("mqtt", "x %d")) is True
    assert [flt.filter(record("mqtt", "x %d")) for _ in range(5)] == [False] * 5
    assert flt.filter(record("meshsub.node", "x %d")) is True  # ours are never limited
    now[0] = 31.0
    again = record("mqtt", "x %d")
    assert flt.filter(again) is True
    assert again.meshsub_fields == {"suppressed": 5}  # type: ignore[attr-defined]


def test_addresses_are_host_port_everywhere(logged: io.StringIO) -> None:
    logging.getLogger("meshsub.runtime.discovery").warning(
        "beacon dropped from=%s reason=%s", ("10.77.0.2", 4790), "bad")
    get_logger("meshsub.link").warning("peer", peer=("fe80::1", 4790, 0, 3))
    logging.getLogger("meshsub.x").warning("tuple that is no address %s", ("a", "b"))
    lines = logged.getvalue().splitlines()
    assert lines == [
        'level=warning logger=meshsub.runtime.discovery '
        'msg="beacon dropped from=10.77.0.2:4790 reason=bad"',
        'level=warning logger=meshsub.link msg=peer peer="[fe80::1]:4790"',
        "level=warning logger=meshsub.x msg=\"tuple that is no address ('a', 'b')\"",
    ]
