"""The playbook without devices: lint, syntax, and the rendered config meshsubd accepts.

The templates are rendered by Ansible itself (a local play), then loaded by the
daemon's own ``load_config``: what the role writes is what the daemon reads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = REPO / "deploy" / "ansible"
ROLE = ANSIBLE_DIR / "roles" / "meshsub"
BIN = Path(sys.executable).parent

needs_ansible = pytest.mark.skipif(not (BIN / "ansible-playbook").exists(),
                                   reason="ansible-core is not installed in the venv")


def _env() -> dict[str, str]:
    return dict(os.environ, ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                PATH=f"{BIN}:{os.environ.get('PATH', '')}",
                ANSIBLE_LOCAL_TEMP=os.environ.get("TMPDIR", "/tmp"))


def render(tmp_path: Path, variables: dict[str, Any]) -> tuple[Path, Path]:
    """Render the role's config and key templates locally with its defaults + ``variables``."""
    play = tmp_path / "render.yml"
    out, keys = tmp_path / "meshsub.toml", tmp_path / "fleet.keys"
    play.write_text(json.dumps([{
        "name": "Render", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars_files": [str(ROLE / "defaults" / "main.yml"), str(ROLE / "vars" / "main.yml")],
        "tasks": [
            {"name": "Config", "ansible.builtin.template": {
                "src": str(ROLE / "templates" / "meshsub.toml.j2"), "dest": str(out),
                "mode": "0600"}},
            {"name": "Keys", "ansible.builtin.template": {
                "src": str(ROLE / "templates" / "fleet.keys.j2"), "dest": str(keys),
                "mode": "0600"}},
        ]}]))
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps({"meshsub_config_dir": str(tmp_path),
                                 "ansible_python_interpreter": sys.executable, **variables}))
    res = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", str(play),
                          "-e", f"@{extra}"], cwd=tmp_path, env=_env(), capture_output=True,
                         text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    return out, keys


def private(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o400)


KEY = "5c0e8a19d3f74b62a1c9e07d2b5f8836c4e1a97d03b26f5e8c1d4a7b90e3f216"
KEY2 = "b7a15e3c90d24f68e1c7a30b9d56f2e84a0c3b71d95e26f8c4a1b07e3d92f5c6"
BASE = {"meshsub_node_id": 17, "meshsub_fleet_keys": {"1": KEY, "2": KEY2},
        "meshsub_current_key": 2}


@needs_ansible
def test_no_keys_given_renders_the_key_generated_once_for_the_fleet(tmp_path: Path) -> None:
    """meshsub_fleet_keys empty: the current key is made once on the controller (0600)
    and every later rendering, of any host, reads the same one back."""
    creds = tmp_path / "credentials"
    variables = {**BASE, "meshsub_fleet_keys": {}, "meshsub_current_key": 3,
                 "meshsub_fleet_key_dir": str(creds)}
    _, keys = render(tmp_path, variables)
    generated = (creds / "fleet-key-3").read_text().strip()
    assert len(generated) == 64 and int(generated, 16) >= 0
    assert (creds / "fleet-key-3").stat().st_mode & 0o077 == 0
    assert [ln for ln in keys.read_text().splitlines() if not ln.startswith("#")] \
        == [f"3 {generated}"]
    _, again = render(tmp_path, variables)
    assert again.read_text() == keys.read_text()


@needs_ansible
@pytest.mark.slow
@pytest.mark.parametrize("variables", [
    {"meshsub_location_source": "static", "meshsub_static_position": {"x": 50.0, "y": 100},
     "meshsub_interface": "mesh0", "meshsub_zeroconf": False, "meshsub_protocol": "epidemic",
     "meshsub_beacon_interval": 2.0},
    {"meshsub_location_source": "gpsd",
     "meshsub_origin": {"lat": 52.52, "lon": 13.405, "alt": 34.0},
     "meshsub_static_peers": ["10.42.0.1", "10.42.0.2:4790"],
     "meshsub_protocol": "flooding", "meshsub_protocol_params": {"ttl": 8}},
    {"meshsub_location_source": "nmea", "meshsub_origin": {"lat": 1.5, "lon": 2.5},
     "meshsub_interface": "bat0", "meshsub_link_mode": "batman", "meshsub_node_name": 'pi "7"'},
], ids=["virtual", "field-gpsd", "field-batman-nmea"])
def test_rendered_config_is_what_the_daemon_accepts(tmp_path: Path,
                                                    variables: dict[str, Any]) -> None:
    from meshsub.runtime.config import load_config

    out, keys = render(tmp_path, {**BASE, **variables})
    private(tmp_path / "mqtt.password", "a-broker-password\n")  # the mosquitto role's
    config = load_config(str(out))
    assert config.node.id == 17
    assert "2 " + KEY2 in keys.read_text().splitlines()
    text = out.read_text()
    assert f'key_file = "{tmp_path}/fleet.keys"' in text and KEY not in text
    assert config.mqtt.username == "meshsubd" and config.mqtt.password == "a-broker-password"
    assert config.storage.control_dir == "/run/meshsub"


@needs_ansible
@pytest.mark.slow
def test_a_bad_value_renders_but_the_daemon_rejects_it(tmp_path: Path) -> None:
    from meshsub.runtime.config import ConfigError, load_config

    out, _ = render(tmp_path, {**BASE, "meshsub_location_source": "none",
                               "meshsub_log_level": "loud"})
    private(tmp_path / "mqtt.password", "pw\n")
    with pytest.raises(ConfigError, match=r"log\.level"):
        load_config(str(out))


@needs_ansible
@pytest.mark.parametrize("inventory", ["inventories/pi-fleet"])
def test_site_yml_passes_syntax_check(inventory: str) -> None:
    res = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", "-i", inventory,
                          "site.yml"], cwd=ANSIBLE_DIR, env=_env(), capture_output=True,
                         text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.skipif(not (BIN / "ansible-lint").exists() and shutil.which("ansible-lint") is None,
                    reason="ansible-lint is not installed")
def test_ansible_lint_production_profile_passes() -> None:
    lint = BIN / "ansible-lint"
    res = subprocess.run([str(lint) if lint.exists() else "ansible-lint", "--profile",
                          "production", "--nocolor", "."], cwd=ANSIBLE_DIR, env=_env(),
                         capture_output=True, text=True, timeout=900, check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]


def test_ansible_managed_only_in_templates() -> None:
    """``ansible_managed`` is defined only while a template renders: in a task's
    ``content`` it fails the deployment ("'ansible_managed' is undefined"), which no lint
    and no syntax check catches (it broke every virtual-mesh deployment once)."""
    offenders = [f"{path.relative_to(REPO)}:{n}"
                 for path in sorted(ANSIBLE_DIR.rglob("*.yml"))
                 if "templates" not in path.parts
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if "{{ ansible_managed }}" in line]
    assert offenders == []
