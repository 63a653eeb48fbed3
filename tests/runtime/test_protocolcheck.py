"""meshsubd keeps one protocol resident; the whole registry is still checked (in a child).

``meshsubd --check`` checks the file alone: it loads only the protocol the file names
and leaves the registry's consistency to the daemon's start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
