"""The mosquitto role's credentials script, run on its own (no Ansible, no device).

One Python on the device writes the passwords the inventory gives (on stdin), makes
the missing ones and reads them all back (roles/mosquitto/tasks/main.yml): the task
that copied the given passwords one by one is folded into it, so what it did is
checked here: a given password ends in its file, a changed one replaces it, an
unchanged one changes nothing, and the made ones are kept across runs.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

TASKS = (Path(__file__).resolve().parents[2] / "deploy" / "ansible" / "roles" / "mosquitto"
         / "tasks" / "main.yml")


def script() -> str:
    tasks = yaml.safe_load(TASKS.read_text())
    found = [t["vars"]["mosquitto_credentials_script"] for t in tasks
             if "mosquitto_credentials_script" in t.get("vars", {})]
    assert len(found) == 1, "one task holds the credentials script"
    return str(found[0])


def run(creds: Path, given: dict[str, str], *names: str) -> dict[str, Any]:
    """The task's argv with OWNER empty (root keeps the files: no chown needed here)."""
    res = subprocess.run([sys.executable, "-c", script(), str(creds), *(f"{n}:" for n in names)],
                         input=json.dumps(given), capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_given_passwords_are_written_and_the_missing_ones_made(tmp_path: Path) -> None:
    first = run(tmp_path, {"sensors": "a-given-password"}, "meshsubd", "sensors")
    assert first["given"] == ["sensors"] and first["made"] == ["meshsubd"]
    assert (tmp_path / "sensors.password").read_text() == "a-given-password\n"
    assert first["passwords"]["sensors"] == "a-given-password"
    made = first["passwords"]["meshsubd"]
    assert len(made) >= 32 and (tmp_path / "meshsubd.password").read_text() == made + "\n"
    for name in ("meshsubd", "sensors"):
        assert stat.S_IMODE((tmp_path / f"{name}.password").stat().st_mode) == 0o600

    again = run(tmp_path, {"sensors": "a-given-password"}, "meshsubd", "sensors")
    assert again["given"] == [] and again["made"] == []  # nothing changed
    assert again["passwords"] == first["passwords"]

    changed = run(tmp_path, {"sensors": "another-password"}, "meshsubd", "sensors")
    assert changed["given"] == ["sensors"] and changed["made"] == []
    assert (tmp_path / "sensors.password").read_text() == "another-password\n"
    assert changed["passwords"]["meshsubd"] == made
    assert not list(tmp_path.glob("*.new"))


def test_a_password_no_longer_given_is_kept_not_regenerated(tmp_path: Path) -> None:
    """As before the fold: the copy wrote it, and a later run without it kept the file."""
    run(tmp_path, {"sensors": "a-given-password"}, "sensors")
    later = run(tmp_path, {}, "sensors")
    assert later["made"] == [] and later["passwords"]["sensors"] == "a-given-password"
