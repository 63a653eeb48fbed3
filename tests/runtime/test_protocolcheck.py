"""meshsubd keeps one protocol resident; the whole registry is still checked (in a child).

``meshsubd --check`` checks the file alone: it loads only the protocol the file names
and leaves the registry's consistency to the daemon's start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from examplecfg import install_example

from meshsub.core.registry import RegistryError
from meshsub.runtime import protocolcheck

LOADED = """
import json, sys
from meshsub.runtime.config import load_config
from meshsub.runtime.protocolcheck import isolated
with isolated():  # as meshsubd reads its configuration before it runs
    load_config(sys.argv[1])
print(json.dumps([0, sorted(m for m in sys.modules if m.startswith("meshsub.protocols."))]))
"""


def test_the_daemon_loads_only_the_protocol_it_runs(tmp_path: Path) -> None:
    """Every installed protocol stayed resident (8 MiB of the idle daemon's 40)."""
    config = install_example(tmp_path)
    proc = subprocess.run([sys.executable, "-c", LOADED, str(config)], capture_output=True,
                          text=True, check=True)
    code, modules = json.loads(proc.stdout.splitlines()[-1])
    assert code == 0
    assert modules == ["meshsub.protocols.flooding"]


def install_clash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plug-in ``clash`` claiming flooding's frame id 1."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "clash_proto.py").write_text(
        "from meshsub.core.protocol import Protocol\n"
        "class Clash(Protocol):\n    name = 'clash'\n    protocol_id = 1\n")
    info = tmp_path / "clash_proto-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-proto\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[meshsub.protocols]\nclash = clash_proto:Clash\n")


def test_a_collision_found_in_the_child_stops_the_lookup_naming_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_clash(tmp_path, monkeypatch)
    monkeypatch.setattr(protocolcheck, "_state", {"isolated": True, "checked": False})
    with pytest.raises(RegistryError, match=r"protocol id 1 is claimed by both .*'clash'"):
        protocolcheck.lookup("flooding")
    assert "clash_proto" not in sys.modules  # loaded in the child only


def test_meshsubd_in_process_leaves_the_lookup_as_it_found_it(tmp_path: Path) -> None:
    """A later lookup in the same process (a test's) checks the registry again itself."""
    from meshsub.cli import meshsubd_main
    assert meshsubd_main(["--check", "--config", str(install_example(tmp_path))]) == 0
    assert protocolcheck._state == {"isolated": False, "checked": False}


def test_check_loads_only_the_files_protocol(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A deployment runs ``--check`` on every device before it installs a configuration:
    it pays for the file's own protocol, not for loading all fourteen in a child (0.6-0.7 s
    of a device's CPU before, 0.23-0.35 s now, docs/vmesh.md). A broken neighbour in the
    registry is the daemon's start's to refuse (the test above), not the file's."""
    from meshsub.cli import meshsubd_main
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    install_clash(plugins, monkeypatch)
    checked: list[int] = []
    monkeypatch.setattr(protocolcheck, "check_in_child", lambda: checked.append(1))
    assert meshsubd_main(["--check", "--config", str(install_example(tmp_path))]) == 0
    assert "configuration is valid" in capsys.readouterr().out
    assert checked == []
    assert "clash_proto" not in sys.modules


# ---- the registry checked once per installation (meshsubd --check-registry) ----------

def fake_installation(root: Path, record: str = "pkg/a.py,sha256=AAA,10\n",
                      editable: bool = False) -> None:
    """One distribution ``fake-protos`` providing the protocol ``flooding`` by wheel."""
    info = root / "fake_protos-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-protos\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[meshsub.protocols]\nflooding = meshsub.protocols.flooding:Flooding\n")
    (info / "RECORD").write_text(record)
    if editable:
        (info / "direct_url.json").write_text(
            json.dumps({"url": "file:///src", "dir_info": {"editable": True}}))


def use_installation(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """protocolcheck sees the distributions under ``root`` only; its record in ``root``."""
    from importlib.metadata import distributions

    def eps(group: str) -> list[Any]:
        return [ep for d in distributions(path=[str(root)]) for ep in d.entry_points
                if ep.group == group]
    monkeypatch.setattr(protocolcheck, "entry_points", eps)
    record = root / "share" / "meshsub" / protocolcheck.RECORD_NAME
    monkeypatch.setattr(protocolcheck, "record_path", lambda: record)
    return record


def test_the_fingerprint_follows_every_installed_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_installation(tmp_path, monkeypatch)
    fake_installation(tmp_path)
    first = protocolcheck.fingerprint()
    assert first is not None and len(first) == 64
    assert protocolcheck.fingerprint() == first
    # a rebuilt wheel of the same version: one file's hash differs in its RECORD
    fake_installation(tmp_path, record="pkg/a.py,sha256=BBB,10\n")
    assert protocolcheck.fingerprint() not in (None, first)


@pytest.mark.parametrize("editable", [True, False])
def test_no_fingerprint_for_an_editable_or_unrecorded_installation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, editable: bool) -> None:
    use_installation(tmp_path, monkeypatch)
    fake_installation(tmp_path, record="pkg/a.py,sha256=AAA,10\n" if editable else "",
                      editable=editable)
    assert protocolcheck.fingerprint() is None


def test_a_start_skips_the_child_only_for_the_recorded_installation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = use_installation(tmp_path, monkeypatch)
    fake_installation(tmp_path)
    monkeypatch.setattr(protocolcheck, "load_registry", lambda: {"flooding": object()})
    assert protocolcheck.check_and_record() == (1, "recorded")
    assert record.read_text().strip() == protocolcheck.fingerprint()
    assert protocolcheck.check_and_record() == (1, "unchanged")
    checked: list[int] = []
    monkeypatch.setattr(protocolcheck, "check_in_child", lambda: checked.append(1))

    def start() -> None:
        with protocolcheck.isolated():
            assert protocolcheck.lookup("flooding").name == "flooding"
    start()
    assert checked == []  # the recorded installation: no child
    fake_installation(tmp_path, record="pkg/a.py,sha256=CCC,10\n")  # upgraded by hand
    start()
    assert checked == [1]  # another installation: checked again
    record.unlink()
    fake_installation(tmp_path)
    start()
    assert checked == [1, 1]  # no record: checked


def test_check_registry_refuses_a_collision_in_one_line_and_forgets_the_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from meshsub.cli import meshsubd_main
    record = tmp_path / "share" / "meshsub" / protocolcheck.RECORD_NAME
    record.parent.mkdir(parents=True)
    record.write_text("0" * 64 + "\n")
    monkeypatch.setattr(protocolcheck, "record_path", lambda: record)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    install_clash(plugins, monkeypatch)
    assert meshsubd_main(["--check-registry"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("meshsubd: the installed protocols disagree: protocol id 1 is "
                          "claimed by both")
    assert not record.exists()


def test_check_registry_names_an_unwritable_record_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from meshsub.cli import meshsubd_main
    use_installation(tmp_path, monkeypatch)
    fake_installation(tmp_path)
    blocker = tmp_path / "share"
    blocker.write_text("a file where the record's directory should be")
    assert meshsubd_main(["--check-registry"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("meshsubd: cannot record the checked installation in ")
