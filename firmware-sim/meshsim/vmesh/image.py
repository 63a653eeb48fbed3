"""The base device image: debootstrap from the host's apt mirror, customise, ``podman import``.

No registry is reachable, so the image is made here. Its tag is the hash of the
recipe (``recipe/recipe.toml``, ``recipe/customize.sh`` and the architecture): the
image is rebuilt only when the recipe changes, and a finished build is found by its
tag. The mirror is read from the host's apt configuration at build time, never
stored. The architecture is an input (default: the host's) so that images for other
device architectures can be made from the same recipe.

This is the operating system only; ``meshsim.vmesh.bake`` applies the playbook's
``bake`` tasks to it once and saves the device image fleets start from.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import re
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.vmesh.wheelhouse import host_arch

RECIPE_DIR = Path(__file__).with_name("recipe")
RECIPE_FILES = ("recipe.toml", "customize.sh")
LABEL = "org.meshsub.recipe"
LOCK_DIR = Path("/run/lock")
APT_SOURCES = (Path("/etc/apt/sources.list.d"), Path("/etc/apt/sources.list"))

Log = Callable[[str], None]

ARCHES = {"amd64": ("amd64", ""), "arm64": ("arm64", ""), "armhf": ("arm", "v7")}
"""The device architectures: Debian name -> (OCI architecture, OCI variant).
amd64 for laptops, arm64 for 64-bit Raspberry Pi OS (Pi 3/4/5, Zero 2), armhf for
32-bit Raspberry Pi OS on ARMv7 (Pi 2/3/4). ARMv6 (Pi 1, Zero) is not supported: the
armhf wheels are built for ARMv7."""


@dataclass(frozen=True)
class Recipe:
    name: str
    suite: str
    variant: str
    components: tuple[str, ...]
    packages: tuple[str, ...]
    masked_units: tuple[str, ...]
    arch: str
    """Debian architecture of the image (``amd64``, ``arm64``, ...)."""
    digest: str

    @property
    def ref(self) -> str:
        """The local image reference, e.g. ``localhost/msub-device-arm64:3f2a...``."""
        return f"localhost/{arch_name(self.name, self.arch)}:{self.digest}"


def arch_name(name: str, arch: str) -> str:
    """An image name per architecture (amd64's unsuffixed): each keeps its own newest
    tags, so building one architecture never removes another's images."""
    return name if arch == "amd64" else f"{name}-{arch}"


def recipe_digest(recipe_dir: Path = RECIPE_DIR, arch: str | None = None) -> str:
    """12 hex digits over the recipe files and the architecture: the image tag."""
    h = hashlib.sha256()
    for name in RECIPE_FILES:
        h.update(name.encode() + b"\0" + (recipe_dir / name).read_bytes() + b"\0")
    h.update(b"arch\0" + (arch or host_arch()).encode())
    return h.hexdigest()[:12]


def load_recipe(recipe_dir: Path = RECIPE_DIR, arch: str | None = None) -> Recipe:
    arch = arch or host_arch()
    if arch not in ARCHES:
        raise VmeshError(f"bad architecture {arch!r} (one of {', '.join(ARCHES)})")
    try:
        data = tomllib.loads((recipe_dir / "recipe.toml").read_text())
        img = data["image"]
        recipe = Recipe(
            name=str(img["name"]), suite=str(img["suite"]), variant=str(img["variant"]),
            components=tuple(img["components"]), packages=tuple(img["packages"]),
            masked_units=tuple(img["masked_units"]), arch=arch,
            digest=recipe_digest(recipe_dir, arch))
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise VmeshError(f"bad image recipe in {recipe_dir}: {exc}") from exc
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", recipe.name):
        raise VmeshError(f"bad image name in recipe: {recipe.name!r}")
    return recipe


def parse_mirror(sources: dict[str, str], suite: str) -> str | None:
    """The first Debian archive URI serving ``suite`` (not -security), from apt files.

    ``sources`` maps a file name to its text; both deb822 ``.sources`` files and
    one-line ``sources.list`` entries are understood.
    """
    for fname, text in sorted(sources.items()):
        if fname.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
                    if m:
                        fields[m.group(1).lower()] = m.group(2)
                if "deb" not in fields.get("types", "").split():
                    continue
                if suite in fields.get("suites", "").split() and fields.get("uris"):
                    return fields["uris"].split()[0]
        else:
            for line in text.splitlines():
                parts = re.sub(r"\[[^\]]*\]", "", line.split("#", 1)[0]).split()
                if len(parts) >= 3 and parts[0] == "deb" and parts[2] == suite:
                    return parts[1]
    return None


def host_mirror(suite: str) -> str:
    texts: dict[str, str] = {}
    for src in APT_SOURCES:
        files = sorted(src.glob("*.sources")) + sorted(src.glob("*.list")) \
            if src.is_dir() else [src]
        for f in files:
            with contextlib.suppress(OSError):
                texts[str(f)] = f.read_text()
    mirror = parse_mirror(texts, suite)
    if mirror is None:
        raise VmeshError(f"no apt mirror for {suite} in /etc/apt/sources.list(.d)")
    return mirror


BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
QEMU_HANDLERS = {"arm64": "qemu-aarch64", "armhf": "qemu-arm"}


def check_emulation(arch: str, binfmt_dir: Path = BINFMT_DIR) -> None:
    """Refuse, in one line, a foreign architecture this host cannot run.

    Foreign devices run their programs through qemu-user, which the kernel starts for
    them by binfmt_misc (Debian's qemu-user-static registers the handlers, with the
    ``F`` flag, so they work inside chroots and containers too).
    """
    if arch == host_arch() or arch not in QEMU_HANDLERS:
        return
    handler = binfmt_dir / QEMU_HANDLERS[arch]
    try:
        enabled = handler.read_text().splitlines()[0].strip() == "enabled"
    except (OSError, IndexError):
        enabled = False
    if not enabled:
        raise VmeshError(
            f"cannot run {arch} programs on this {host_arch()} host: no enabled binfmt handler "
            f"{handler} (install qemu-user-static and binfmt-support, `mount -t binfmt_misc "
            f"binfmt_misc {binfmt_dir}` if it is empty, then `update-binfmts --enable`)")


def image_exists(ref: str) -> bool:
    return sh.ok(["podman", "image", "exists", ref])


@contextlib.contextmanager
def build_lock(arch: str) -> Iterator[None]:
    """One build per architecture at a time on this machine (tests and bench may race).

    Per architecture: an arm64 build under emulation takes many minutes and must not
    hold up the amd64 image a fleet of the host's architecture is waiting for.
    """
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with (LOCK_DIR / f"msub-image-{arch}.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_image(*, rebuild: bool = False, arch: str | None = None, log: Log = print) -> str:
    """Return the base image reference for the current recipe, building it if missing."""
    recipe = load_recipe(arch=arch)
    check_emulation(recipe.arch)
    with build_lock(recipe.arch):
        if image_exists(recipe.ref) and not rebuild:
            return recipe.ref
        _build(recipe, log)
        remove_stale(arch_name(recipe.name, recipe.arch), keep=2, log=log)
    return recipe.ref


def _build(recipe: Recipe, log: Log) -> None:
    mirror = host_mirror(recipe.suite)
    work = Path(tempfile.mkdtemp(prefix="msub-image-", dir="/var/tmp"))
    rootfs = work / "rootfs"
    try:
        log(f"debootstrap {recipe.suite} ({len(recipe.packages)} packages) from the host "
            "mirror; a few minutes")
        sh.run(["debootstrap", f"--arch={recipe.arch}", f"--variant={recipe.variant}",
                f"--components={','.join(recipe.components)}",
                f"--include={','.join(recipe.packages)}",
                recipe.suite, str(rootfs), mirror], timeout=1800)
        shutil.copy(RECIPE_DIR / "customize.sh", rootfs / "tmp" / "customize.sh")
        sh.run(["chroot", str(rootfs), "/bin/sh", "/tmp/customize.sh",
                *recipe.masked_units], timeout=600)
        log(f"importing {recipe.ref}")
        _import(rootfs, recipe)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _import(rootfs: Path, recipe: Recipe) -> None:
    oci_arch, variant = ARCHES[recipe.arch]
    tar = subprocess.Popen(["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-c", "."],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert tar.stdout is not None
    try:
        imp = subprocess.run(
            ["podman", "import", "--arch", oci_arch, *(["--variant", variant] if variant else []),
             "--change", f"LABEL {LABEL}={recipe.digest}",
             "--change", 'CMD ["/sbin/init"]', "-", recipe.ref],
            stdin=tar.stdout, capture_output=True, check=False, timeout=1200)
    finally:
        tar.stdout.close()
        tar_err = tar.stderr.read().decode(errors="replace") if tar.stderr else ""
        tar.wait()
    if tar.returncode != 0:
        raise VmeshError(f"tar of the image root failed: {tar_err.strip()[-300:]}")
    if imp.returncode != 0:
        raise VmeshError(f"podman import failed: {imp.stderr.decode(errors='replace')[-300:]}")


def remove_stale(name: str, *, keep: int, log: Log) -> None:
    """Keep the ``keep`` newest tags of ``localhost/<name>``, drop older ones.

    Removal fails, and the image stays, while a container still uses it. Keeping a few
    lets worktrees of different checkouts on one machine alternate without rebuilding.
    """
    text = sh.out(["podman", "images", "--format", "{{.CreatedAt}}\t{{.Repository}}:{{.Tag}}",
                   f"localhost/{name}"], check=False)
    rows = sorted((line.split("\t") for line in text.splitlines() if "\t" in line),
                  reverse=True)  # newest first: CreatedAt is "YYYY-MM-DD hh:mm:ss +0000 UTC"
    for _created, ref in rows[keep:]:
        if sh.ok(["podman", "rmi", ref]):
            log(f"removed stale image {ref}")
