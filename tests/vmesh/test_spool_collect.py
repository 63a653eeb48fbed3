"""The collection of a device's telemetry after a run, on a spool directory as a crashed
daemon leaves it (no root: the device's ``tar`` runs here, on a directory)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from meshsim.vmesh import devices, nodes
from meshsim.vmesh.devices import collect_spool, run_records

NODE = 7
CONTAINER = "msub-test-dev"


def line(epoch: int, rec: int) -> str:
    return json.dumps({"run": "r", "node": NODE, "protocol": "flooding", "ts_ns": rec,
                       "event": "rx", "epoch": epoch, "rec": rec}) + "\n"


@pytest.fixture
def spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A spool directory; ``podman exec CONTAINER CMD`` runs CMD here, on it."""
    spool = tmp_path / "spool"
    spool.mkdir()

    def run(cmd: Sequence[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        prefix = [*nodes.PODMAN, "exec", CONTAINER]
        assert list(cmd[:len(prefix)]) == prefix
        local = [str(spool) if arg == devices.SPOOL_DIR else arg for arg in cmd[len(prefix):]]
        return subprocess.run(local, capture_output=True, check=False)

    monkeypatch.setattr(devices.sh, "run", run)
    return spool


def test_a_crashed_daemons_unclosed_records_are_collected(spool: Path,
                                                           tmp_path: Path) -> None:
    # epoch 100 closed one file, then was killed while writing its second (torn last
    # line); epoch 101 was killed before its first line was whole; epoch 102 was killed
    # after a whole line; a closed file of epoch 102 has the number its unclosed one has
    (spool / f"{NODE}-100-1.jsonl").write_text(line(100, 0) + line(100, 1))
    (spool / ".current-100-2.jsonl").write_text(line(100, 2) + line(100, 3) + '{"run": "r", "no')
    (spool / ".current-101-1.jsonl").write_text('{"run": "r"')
    (spool / ".current-102-1.jsonl").write_text(line(102, 5))
    (spool / f"{NODE}-102-1.jsonl").write_text(line(102, 0))
    (spool / ".other.jsonl").write_text(line(1, 0))  # not the spool's: never collected
    (spool / "notes.txt").write_text("x")
    out = tmp_path / "run"
    folder = out / "nodes" / "3"

    assert collect_spool(CONTAINER, folder, NODE) == 4
    assert sorted(p.name for p in folder.iterdir()) == [
        f"{NODE}-100-1.jsonl", f"{NODE}-100-2.jsonl", f"{NODE}-102-1.jsonl",
        f"{NODE}-102-2.jsonl"]
    got = sorted((r["epoch"], r["rec"]) for r in run_records(out))
    assert got == [(100, 0), (100, 1), (100, 2), (100, 3), (102, 0), (102, 5)]
    # the device's files are left as they were (the next start recovers them itself)
    assert (spool / ".current-100-2.jsonl").read_text().endswith('"no')


def test_an_unreadable_spool_is_one_clear_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def run(cmd: Sequence[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(list(cmd), 2, b"", b"tar: /var/lib/meshsub/spool: "
                                           b"Cannot open: No such file or directory")

    monkeypatch.setattr(devices.sh, "run", run)
    with pytest.raises(devices.VmeshError, match="cannot read /var/lib/meshsub/spool"):
        collect_spool(CONTAINER, tmp_path / "n", NODE)
