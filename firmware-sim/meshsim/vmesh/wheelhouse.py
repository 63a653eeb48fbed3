"""The wheelhouse the playbook installs from: the devices have no index to reach.

``pip wheel`` of the field distribution ``meshsub`` (``daemon/``: the daemon's package
and the libraries it imports, nothing of the simulator, the virtual mesh's host side
or the evaluation, which are the workstation's ``meshsub-tools``), and for the devices
of the virtual mesh (``agent=True``) also of ``meshsub-workload`` (``workload/``: the
agent that plays a scenario's applications). Host and image are both bookworm /
CPython 3.11, so the binary wheels match. The wheels are built from a clean copy of
the sources, so that neither setuptools' ``build/`` leftovers (a deleted module would
live on in it) nor anything else outside the package folders reaches a device, and
with a fixed ``SOURCE_DATE_EPOCH``: an unchanged checkout gives a byte-identical wheel, the
playbook's copy stays "ok" and the baked image (keyed by the wheel's hash) is reused.

``version`` builds the same sources as another version, as a release would: the
rolling-upgrade test and bench roll a fleet onto such a "newer build".

``arch`` makes the wheelhouse of another device architecture (arm64, armhf) on this
controller: the same versions as the host's wheelhouse (one resolution for the whole
fleet), pure wheels copied, binary ones downloaded for the target's platform tags
(``pip download --platform --only-binary``), and those the index has no wheel for
(msgpack and mmh3 on armv7) compiled from their sources inside a container of the
target architecture under qemu-user (``build_in_emulation``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from meshsim.host import sh
from meshsim.host.errors import VmeshError

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXED_EPOCH = "1700000000"
SOURCES = ("daemon", "workload")
"""The source trees of the device distributions (each with its own ``pyproject.toml``)."""
DAEMON, AGENT = SOURCES
AGENT_PACKAGE = "meshsub-workload"
"""The workload agent's distribution: a device of the virtual mesh installs it beside
meshsub (the role's ``meshsub_extra_packages``), a field device never."""
AGENT_WHEEL = "meshsub_workload-*.whl"
"""The workload agent's wheel in a wheelhouse (a vmesh one only)."""
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
_VERSION = re.compile(r'^version = "([^"]+)"$', re.M)
_DUNDER = re.compile(r'^__version__ = "([^"]+)"$', re.M)
_PEP440 = re.compile(r"[0-9]+(\.[0-9]+)*([.+-]?[A-Za-z0-9.]+)*")


def source_version(source: Path = REPO_ROOT) -> str:
    """The version the field distribution of ``source`` declares (``daemon/pyproject.toml``)."""
    project = source / DAEMON / "pyproject.toml"
    match = _VERSION.search(project.read_text())
    if match is None:
        raise VmeshError(f"no version in {project}")
    return match.group(1)


def copy_sources(source: Path, dest: Path, version: str | None) -> None:
    """The package sources of ``source`` into ``dest``, declared as ``version`` if given."""
    if version is not None and not _PEP440.fullmatch(version):
        raise VmeshError(f"bad version {version!r} (PEP 440, e.g. 0.1.0.post1)")
    for name in SOURCES:
        src = source / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_IGNORE)
        else:
            shutil.copy2(src, dest / name)
    if version is None:
        return
    for name in SOURCES:
        project = dest / name / "pyproject.toml"
        project.write_text(_VERSION.sub(f'version = "{version}"', project.read_text(), count=1))
    init = dest / DAEMON / "meshsub" / "__init__.py"  # what meshsubd --version says
    init.write_text(_DUNDER.sub(f'__version__ = "{version}"', init.read_text(), count=1))


STAMP_SUFFIX = ".sources.sha256"
"""Beside a wheelhouse ``WH``, ``WH.sources.sha256``: the digest of the sources its
meshsub wheel was built from. Not inside it: the playbook copies the whole wheelhouse
to every device."""


def sources_digest(source: Path = REPO_ROOT, version: str | None = None) -> str:
    """sha256 over the files a wheel is built from (what ``copy_sources`` copies)."""
    h = hashlib.sha256(f"version={version}".encode())
    for name in SOURCES:
        root = source / name
        paths = [root] if root.is_file() else sorted(
            p for p in root.rglob("*") if p.is_file() and not _ignored(p.relative_to(root)))
        for path in paths:
            h.update(str(path.relative_to(source)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _ignored(rel: Path) -> bool:
    return any(part in ("__pycache__", "build", "dist") or part.endswith(".egg-info")
               for part in rel.parts) or rel.suffix == ".pyc"


def build_wheelhouse(dest: Path, source: Path = REPO_ROOT, *,
                     version: str | None = None, arch: str | None = None, agent: bool = False,
                     log: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Build (or refresh) the device wheels of ``source`` and their dependencies into ``dest``.

    An older meshsub wheel in ``dest`` is removed, so the wheelhouse holds one build.
    A wheelhouse already built from the same sources is kept as it is (no ``pip``).
    ``arch`` (a Debian architecture; default the host's) is the devices' one;
    ``agent`` adds the virtual mesh's workload agent (``meshsub-workload``), which a
    field fleet does not install.
    """
    arch = arch or host_arch()
    if arch not in MACHINES:
        raise VmeshError(f"bad architecture {arch!r} (one of {', '.join(MACHINES)})")
    dest.mkdir(parents=True, exist_ok=True)
    digest = (sources_digest(source, version) + ("" if arch == host_arch() else f" {arch}")
              + (" agent" if agent else ""))
    stamp = dest.with_name(dest.name + STAMP_SUFFIX)
    if (stamp.exists() and stamp.read_text().strip() == digest
            and list(dest.glob("meshsub-*.whl"))):
        return sorted(p.name for p in dest.glob("*.whl"))
    if arch != host_arch():
        with tempfile.TemporaryDirectory(prefix="msub-wheels-host-") as tmp:
            host = Path(tmp) / "wheels"
            build_wheelhouse(host, source, version=version, agent=agent)
            _foreign_wheelhouse(host, dest, arch, log)
        stamp.write_text(digest + "\n")
        return sorted(p.name for p in dest.glob("*.whl"))
    with tempfile.TemporaryDirectory(prefix="msub-wheel-") as tmp:
        tree = Path(tmp) / "src"
        tree.mkdir()
        copy_sources(source, tree, version)
        built = Path(tmp) / "out"
        trees = [tree / DAEMON, *([tree / AGENT] if agent else [])]
        sh.run(["env", f"SOURCE_DATE_EPOCH={FIXED_EPOCH}", "PIP_DISABLE_PIP_VERSION_CHECK=1",
                sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(built),
                *map(str, trees)], timeout=900)
        if not list(built.glob("meshsub-*.whl")):
            raise VmeshError(f"pip wheel of {source} made no meshsub wheel")
        for old in [*dest.glob("meshsub-*.whl"), *dest.glob(AGENT_WHEEL)]:
            old.unlink()
        for wheel in built.glob("*.whl"):
            shutil.copy2(wheel, dest / wheel.name)
    stamp.write_text(digest + "\n")
    return sorted(p.name for p in dest.glob("*.whl"))


MACHINES = {"amd64": "x86_64", "arm64": "aarch64", "armhf": "armv7l"}
"""Debian architecture -> the machine in wheel platform tags (and ``uname -m``)."""
GLIBC_MINOR = 36
"""bookworm's glibc is 2.36: manylinux wheels up to manylinux_2_36 run on the devices."""
PYTHON = ("3.11", "cp", "cp311")
"""The devices' interpreter (bookworm's python3): version, implementation, ABI."""


def host_arch() -> str:
    """The host's Debian architecture, from the interpreter's machine."""
    machine = platform.machine()
    for arch, mach in MACHINES.items():
        if mach == machine:
            return arch
    raise VmeshError(f"unknown host machine {machine!r}")


def platform_tags(arch: str) -> list[str]:
    """The wheel platform tags a bookworm device of ``arch`` runs, newest first."""
    m = MACHINES[arch]
    tags = [f"manylinux_2_{minor}_{m}" for minor in range(GLIBC_MINOR, 16, -1)]
    return [*tags, f"manylinux2014_{m}", f"linux_{m}"]


def is_pure(wheel_name: str) -> bool:
    """A wheel that runs anywhere (``...-none-any.whl``)."""
    return wheel_name.endswith("-any.whl")


def wheel_machines(wheel_names: list[str]) -> set[str]:
    """The machines the binary wheels of a wheelhouse are built for (pure ones: none).

    The role does the same on the controller (``meshsub/tasks/arch.yml``) to refuse
    a wheelhouse of another architecture before pip does, obscurely.
    """
    found = set()
    for name in wheel_names:
        if is_pure(name):
            continue
        platforms = name[:-len(".whl")].split("-")[-1].split(".")
        for mach in MACHINES.values():
            if any(tag.endswith("_" + mach) for tag in platforms):
                found.add(mach)
    return found


def _requirement(wheel_name: str) -> str:
    """``name==version`` of a wheel file name."""
    parts = wheel_name.split("-")
    return f"{parts[0]}=={parts[1]}"


def _foreign_wheelhouse(host: Path, dest: Path, arch: str, log: Callable[[str], None]) -> None:
    """The host wheelhouse's versions, as wheels for ``arch`` (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="msub-wheels-arch-") as tmp:
        out = Path(tmp)
        missing = []
        for wheel in sorted(host.glob("*.whl")):
            if is_pure(wheel.name):
                shutil.copy2(wheel, out / wheel.name)
                continue
            req = _requirement(wheel.name)
            res = sh.run(["env", "PIP_DISABLE_PIP_VERSION_CHECK=1", sys.executable, "-m", "pip",
                          "download", "--quiet", "--no-deps", "--only-binary=:all:",
                          "--python-version", PYTHON[0], "--implementation", PYTHON[1],
                          "--abi", PYTHON[2],
                          *[a for tag in platform_tags(arch) for a in ("--platform", tag)],
                          "--dest", str(out), req], check=False, timeout=600)
            if res.returncode != 0:
                missing.append(req)
        missing = [req for req in missing if not _from_cache(req, arch, out)]
        if missing:
            log(f"no {arch} wheels on the index for {', '.join(missing)}: compiling them in an "
                f"emulated {arch} container")
            build_in_emulation(missing, arch, out, log)
            _to_cache(out, arch)
        strays = wheel_machines([p.name for p in out.glob("*.whl")]) - {MACHINES[arch]}
        if strays:
            raise VmeshError(f"the {arch} wheelhouse got wheels for {', '.join(sorted(strays))}")
        for old in dest.glob("*.whl"):
            old.unlink()
        for wheel in out.glob("*.whl"):
            shutil.copy2(wheel, dest / wheel.name)


HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
COMPILED_CACHE = Path("/var/cache/msub-wheels")
"""Wheels compiled under emulation, by architecture: minutes each, so made once per
version and machine (``build_in_emulation``)."""


def _from_cache(requirement: str, arch: str, out: Path) -> bool:
    """Copy a wheel compiled earlier for ``requirement`` (``name==version``) into ``out``."""
    name, version = requirement.split("==")
    for wheel in sorted((COMPILED_CACHE / arch).glob(f"{name}-{version}-*.whl")):
        if MACHINES[arch] in wheel_machines([wheel.name]):
            shutil.copy2(wheel, out / wheel.name)
            return True
    return False


def _to_cache(out: Path, arch: str) -> None:
    """Keep the binary wheels of ``out`` (the compiled ones among them) for next time."""
    with contextlib.suppress(OSError):
        cache = COMPILED_CACHE / arch
        cache.mkdir(parents=True, exist_ok=True)
        for wheel in out.glob("*.whl"):
            if wheel.name.split("-")[-1].startswith("linux_"):  # compiled here, not downloaded
                shutil.copy2(wheel, cache / wheel.name)


BUILD_SCRIPT = """
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends gcc libc6-dev python3-dev >/dev/null
python3 -m venv /tmp/build
/tmp/build/bin/pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir /out "$@"
"""


def build_in_emulation(requirements: list[str], arch: str, out: Path,
                       log: Callable[[str], None]) -> None:
    """Compile ``requirements`` (``name==version``) into wheels in a container of ``arch``.

    The container is the device base image of that architecture (the devices' own
    Debian, glibc and Python), run under qemu-user, with a compiler installed for the
    build only and thrown away with it. Needs root (podman) and the host's network
    (Debian's mirror and the package index): slow (minutes), so the result is
    kept in the wheelhouse and rebuilt only when the sources change.
    """
    from meshsim.vmesh import image, nodes  # the image module needs root and podman

    if os.geteuid() != 0:
        raise VmeshError(f"{', '.join(requirements)} have no {arch} wheels on the index: "
                         f"compiling them in an emulated {arch} container needs root")
    ref = image.ensure_image(arch=arch, log=log)
    out.mkdir(parents=True, exist_ok=True)
    # pip in the container trusts what the controller's pip trusts (a site's TLS proxy)
    trust = ([] if not HOST_CA_BUNDLE.is_file() else
             ["--volume", f"{HOST_CA_BUNDLE}:/etc/ssl/host-ca.crt:ro",
              "--env", "PIP_CERT=/etc/ssl/host-ca.crt"])
    res = sh.run([*nodes.PODMAN, "run", "--rm", "--network", "host", *nodes.ULIMITS, *trust,
                  "--volume", f"{out}:/out", ref, "sh", "-c", BUILD_SCRIPT, "build",
                  *requirements], check=False, timeout=3600)
    if res.returncode != 0:
        raise VmeshError(f"building {', '.join(requirements)} for {arch} failed: "
                         f"{res.stderr.decode(errors='replace').strip()[-300:]}")


def meshsub_wheel(wheelhouse: Path) -> Path:
    """The one meshsub wheel of ``wheelhouse``."""
    wheels = sorted(wheelhouse.glob("meshsub-*.whl"))
    if len(wheels) != 1:
        raise VmeshError(f"{wheelhouse}: expected one meshsub wheel, found {len(wheels)}")
    return wheels[0]


def wheel_version(wheel: Path) -> str:
    """The version in a wheel's file name (``meshsub-0.1.0.post1-py3-none-any.whl``)."""
    parts = wheel.name.split("-")
    if len(parts) < 5 or not wheel.name.endswith(".whl"):
        raise VmeshError(f"not a wheel file name: {wheel.name}")
    return parts[1]


def wheelhouse_digest(wheelhouse: Path) -> str:
    """sha256 over every wheel's name and bytes: what the devices would install."""
    h = hashlib.sha256()
    for wheel in sorted(wheelhouse.glob("*.whl")):
        h.update(wheel.name.encode() + b"\0")
        h.update(hashlib.sha256(wheel.read_bytes()).digest())
    return h.hexdigest()
