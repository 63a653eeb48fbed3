"""The installed state of a device, to compare two devices (a baked one and one deployed over SSH).

A snapshot lists what a deployment makes a device: every file under the paths the
roles write (type, mode, owner, group, and a sha256 of its content or a link's
target), the meshsub user and group, the Debian packages with their versions, the
services' enabled and active states, meshsubd's unit as systemd loaded it, and the
versions meshsub reports. It is taken by a small Python program run in the device
(``python3``, standard library only), so it reads the device as it is, not as the
playbook reported it.

Compiled bytecode (``*.pyc``) is listed without its content: it embeds the time its
source file was written, which is the install time of that device. Paths listed as
secret (per-device credentials) are compared by their metadata only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from meshsim.host.errors import VmeshError
from meshsim.vmesh import nodes

ROOTS = ("/opt/meshsub", "/etc/meshsub", "/etc/systemd/system", "/etc/mosquitto",
         "/etc/default/gpsd", "/var/cache/meshsub", "/usr/local/sbin", "/etc/pip.conf")
SERVICES = ("meshsubd.service", "mosquitto.service", "gpsd.service", "gpsd.socket",
            "ssh.service")
UNIT_PROPERTIES = ("User", "Group", "ExecStart", "Type", "Restart", "WatchdogUSec",
                   "CapabilityBoundingSet", "AmbientCapabilities", "ProtectSystem",
                   "NoNewPrivileges", "FragmentPath", "DropInPaths", "StateDirectory")

_PROGRAM = r"""
import grp, hashlib, json, os, pwd, stat, subprocess, sys

roots, services, props = json.loads(sys.argv[1])

def owner(st):
    try:
        u = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        u = str(st.st_uid)
    try:
        g = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        g = str(st.st_gid)
    return u, g

def entry(path):
    st = os.lstat(path)
    u, g = owner(st)
    e = {"mode": oct(stat.S_IMODE(st.st_mode)), "owner": u, "group": g}
    if stat.S_ISLNK(st.st_mode):
        e["type"] = "link"; e["target"] = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        e["type"] = "dir"
    elif stat.S_ISREG(st.st_mode):
        e["type"] = "file"
        if not path.endswith(".pyc"):
            with open(path, "rb") as fh:
                e["sha256"] = hashlib.sha256(fh.read()).hexdigest()
    else:
        e["type"] = "other"
    return e

files = {}
for root in roots:
    if not os.path.lexists(root):
        continue
    files[root] = entry(root)
    if os.path.isdir(root) and not os.path.islink(root):
        for d, dirs, names in os.walk(root):
            dirs.sort()
            for n in sorted(dirs) + sorted(names):
                p = os.path.join(d, n)
                files[p] = entry(p)

def run(*cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.stdout.strip()

def account(name):
    try:
        p = pwd.getpwnam(name)
        return {"shell": p.pw_shell, "home": p.pw_dir,
                "group": grp.getgrgid(p.pw_gid).gr_name,
                "groups": sorted(g.gr_name for g in grp.getgrall() if name in g.gr_mem)}
    except KeyError:
        return None

dpkg = run("dpkg-query", "-W", "-f", "${Package} ${Version}\n")
packages = dict(line.split(" ", 1) for line in dpkg.splitlines() if " " in line)
state = {s: {"enabled": run("systemctl", "is-enabled", s),
             "active": run("systemctl", "is-active", s)} for s in services}
shown = run("systemctl", "show", "meshsubd.service", *("--property=" + p for p in props))
unit = dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)
venv = "/opt/meshsub/bin/"
have = os.path.exists(venv + "meshsubd")
versions = {"meshsubd": run(venv + "meshsubd", "--version") if have else None,
            "pip freeze": sorted(run(venv + "pip", "freeze", "--disable-pip-version-check")
                                 .splitlines()) if have else None,
            "python": run("python3", "--version")}
print(json.dumps({"files": files, "user": account("meshsub"), "packages": packages,
                  "services": state, "unit": unit, "versions": versions}))
"""


_RUNTIME = re.compile(r" ; (?:start_time|stop_time|pid|code|status)=(?:\[[^\]]*\]|[^ ;}]*)")


def installed_unit(unit: Mapping[str, str]) -> dict[str, str]:
    """The unit's properties without what its last run wrote into them.

    ``ExecStart`` as systemd shows it carries the last start's time, PID and exit
    status after the command line; a reload of systemd's units clears them, so whether
    they show depends on whether the playbook's last act was a reload, not on what it
    installed. The command line (``path``, ``argv[]``, ``ignore_errors``) stays.
    """
    return {key: _RUNTIME.sub("", value) for key, value in unit.items()}


def snapshot(container: str) -> dict[str, Any]:
    """The installed state of one running device (see the module docstring)."""
    args = json.dumps([list(ROOTS), list(SERVICES), list(UNIT_PROPERTIES)])
    text = nodes.exec_in(container, ["python3", "-c", _PROGRAM, args], timeout=300)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise VmeshError(f"{container}: unreadable state snapshot: {text[-200:]!r}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("unit"), dict):
        raise VmeshError(f"{container}: unreadable state snapshot")
    doc["unit"] = installed_unit(doc["unit"])
    return doc


def differences(a: Mapping[str, Any], b: Mapping[str, Any],
                secret_paths: Iterable[str] = ()) -> list[str]:
    """Every way two snapshots differ, one line each (empty: the same device)."""
    secret = set(secret_paths)
    out: list[str] = []
    fa, fb = a.get("files", {}), b.get("files", {})
    for path in sorted(set(fa) | set(fb)):
        if path not in fa or path not in fb:
            out.append(f"{path}: only on {'the first' if path in fa else 'the second'} device")
            continue
        ea, eb = dict(fa[path]), dict(fb[path])
        if path in secret:
            ea.pop("sha256", None)
            eb.pop("sha256", None)
        if ea != eb:
            keys = sorted(k for k in set(ea) | set(eb) if ea.get(k) != eb.get(k))
            out.append(f"{path}: " + ", ".join(f"{k} {ea.get(k)!r} != {eb.get(k)!r}"
                                               for k in keys))
    for part in ("user", "packages", "services", "unit", "versions"):
        pa, pb = a.get(part), b.get(part)
        if pa == pb:
            continue
        if isinstance(pa, dict) and isinstance(pb, dict):
            for key in sorted(set(pa) | set(pb)):
                if pa.get(key) != pb.get(key):
                    out.append(f"{part} {key}: {pa.get(key)!r} != {pb.get(key)!r}")
        else:
            out.append(f"{part}: {pa!r} != {pb!r}")
    return out
