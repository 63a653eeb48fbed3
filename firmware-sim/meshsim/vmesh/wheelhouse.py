"""The wheelhouse the playbook installs from: the devices have no index to reach.

``pip wheel`` of this checkout (core dependencies only; the ``eval`` extra with Spark
never goes onto a device). Host and image are both bookworm / CPython 3.11, so the
binary wheels match. The wheel is built from a clean copy of the sources, so that
neither setuptools' ``build/`` leftovers (a deleted module would live on in it) nor
anything else outside the package folders reaches a device, and with a fixed
``SOURCE_DATE_EPOCH``: an unchanged checkout gives a byte-identical wheel, the
playbook's copy stays "ok" and the baked image (keyed by the wheel's hash) is reused.

``version`` builds the same sources as another version, as a release would: the
rolling-upgrade test and bench roll a fleet onto such a "newer build".
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import tempfile
from pathlib import Path

from meshsim.host import sh
from meshsim.host.errors import VmeshError

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXED_EPOCH = "1700000000"
SOURCES = ("pyproject.toml", "README.md", "daemon", "firmware-sim", "telemetry")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
_VERSION = re.compile(r'^version = "([^"]+)"$', re.M)
_DUNDER = re.compile(r'^__version__ = "([^"]+)"$', re.M)
_PEP440 = re.compile(r"[0-9]+(\.[0-9]+)*([.+-]?[A-Za-z0-9.]+)*")


def source_version(source: Path = REPO_ROOT) -> str:
    """The version ``pyproject.toml`` of ``source`` declares."""
    match = _VERSION.search((source / "pyproject.toml").read_text())
    if match is None:
        raise VmeshError(f"no version in {source / 'pyproject.toml'}")
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
    project = dest / "pyproject.toml"
    project.write_text(_VERSION.sub(f'version = "{version}"', project.read_text(), count=1))
    init = dest / "daemon" / "meshsub" / "__init__.py"  # what meshsubd --version says
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
                     version: str | None = None) -> list[str]:
    """Build (or refresh) the wheels of ``source`` and its dependencies into ``dest``.

    An older meshsub wheel in ``dest`` is removed, so the wheelhouse holds one build.
    A wheelhouse already built from the same sources is kept as it is (no ``pip``).
    """
    dest.mkdir(parents=True, exist_ok=True)
    digest = sources_digest(source, version)
    stamp = dest.with_name(dest.name + STAMP_SUFFIX)
    if (stamp.exists() and stamp.read_text().strip() == digest
            and list(dest.glob("meshsub-*.whl"))):
        return sorted(p.name for p in dest.glob("*.whl"))
    with tempfile.TemporaryDirectory(prefix="msub-wheel-") as tmp:
        tree = Path(tmp) / "src"
        tree.mkdir()
        copy_sources(source, tree, version)
        built = Path(tmp) / "out"
        sh.run(["env", f"SOURCE_DATE_EPOCH={FIXED_EPOCH}", "PIP_DISABLE_PIP_VERSION_CHECK=1",
                sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(built),
                str(tree)], timeout=900)
        if not list(built.glob("meshsub-*.whl")):
            raise VmeshError(f"pip wheel of {source} made no meshsub wheel")
        for old in dest.glob("meshsub-*.whl"):
            old.unlink()
        for wheel in built.glob("*.whl"):
            shutil.copy2(wheel, dest / wheel.name)
    stamp.write_text(digest + "\n")
    return sorted(p.name for p in dest.glob("*.whl"))


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
