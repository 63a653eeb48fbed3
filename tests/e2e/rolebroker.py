"""A mosquitto configured exactly as the Ansible role ``mosquitto`` configures a device.

Ansible renders the role's own templates (``meshsub.conf.j2``, ``meshsub.acl.j2``,
``passwd.plain.j2``) with the role's defaults into a directory; the password list is
hashed with ``mosquitto_passwd -U`` as the role does; the broker runs with that
configuration (in a network namespace for the end-to-end tests). What the tests
check is therefore what the role ships: no anonymous client, the ACL, the passwords.
(A role without the ACL and password templates, as before issue 25, renders to a
broker without logins: ``passwords`` is then empty and clients connect anonymously.)
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "deploy" / "ansible" / "roles" / "mosquitto"
BIN = Path(sys.executable).parent
DAEMON_USER = "meshsubd"


@dataclass
class RoleBroker:
    """The rendered configuration of one device's broker and its users' passwords."""

    directory: Path
    port: int
    passwords: dict[str, str] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        """The main configuration file mosquitto is started with."""
        return self.directory / "mosquitto.conf"

    def password_file(self, user: str) -> Path:
        """The user's password alone, private (what the role puts in credentials/)."""
        path = self.directory / "credentials" / f"{user}.password"
        return path


def render(directory: Path, port: int, apps: list[dict[str, Any]],
           bind: str = "127.0.0.1") -> RoleBroker:
    """Render the role for ``apps`` (role variable ``mosquitto_apps``) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "conf.d").mkdir(exist_ok=True)
    creds = directory / "credentials"
    creds.mkdir(mode=0o711, exist_ok=True)
    logins = (ROLE / "templates" / "passwd.plain.j2").exists()
    users = [DAEMON_USER, *(a["name"] for a in apps)] if logins else []
    passwords = {u: secrets.token_urlsafe(24) for u in users}
    for user, password in passwords.items():
        path = creds / f"{user}.password"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
        with os.fdopen(fd, "w") as fh:
            fh.write(password + "\n")
    made = {"made": [], "handed": [], "passwords": passwords}  # the role's credentials task
    play = directory / "render.yml"
    play.write_text(json.dumps([{
        "name": "Render the mosquitto role", "hosts": "localhost", "connection": "local",
        "gather_facts": False, "vars_files": [str(ROLE / "defaults" / "main.yml")],
        "tasks": [
            {"name": name, "ansible.builtin.template": {
                "src": str(ROLE / "templates" / src), "dest": str(directory / dest),
                "mode": "0600"}}
            for name, src, dest in (("Config", "meshsub.conf.j2", "conf.d/meshsub.conf"),
                                    ("ACL", "meshsub.acl.j2", "meshsub.acl"),
                                    ("Passwords", "passwd.plain.j2", "meshsub.passwd"))
            if (ROLE / "templates" / src).exists()],
    }]))
    extra = directory / "vars.json"
    extra.write_text(json.dumps({
        "mosquitto_config_dir": str(directory), "mosquitto_port": port,
        "mosquitto_bind_address": bind, "mosquitto_apps": apps,
        "mosquitto_credentials": {"stdout": json.dumps(made)},
        "ansible_python_interpreter": sys.executable}))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", PATH=f"{BIN}:{os.environ.get('PATH', '')}",
               ANSIBLE_LOCAL_TEMP=os.environ.get("TMPDIR", "/tmp"),
               ANSIBLE_CONFIG=str(REPO / "deploy" / "ansible" / "ansible.cfg"))
    res = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", str(play),
                          "-e", f"@{extra}"], cwd=directory, env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    if res.returncode != 0:
        raise RuntimeError(res.stdout[-3000:] + res.stderr[-2000:])
    if logins:
        subprocess.run(["mosquitto_passwd", "-U", str(directory / "meshsub.passwd")],
                       check=True, capture_output=True, timeout=60)
    (directory / "mosquitto.conf").write_text(
        f"persistence true\npersistence_location {directory}/\n"
        f"user {getpass.getuser()}\ninclude_dir {directory / 'conf.d'}\n")
    return RoleBroker(directory, port, passwords)
