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
import time
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
    started = time.monotonic()
    try:
        log(f"debootstrap {recipe.suite} ({len(recipe.packages)} packages, {recipe.arch}) "
            "from the host mirror; a few minutes")
        _debootstrap(recipe, rootfs, mirror, log)
        t = time.monotonic()
        shutil.copy(RECIPE_DIR / "customize.sh", rootfs / "tmp" / "customize.sh")
        sh.run(["chroot", str(rootfs), "/bin/sh", "/tmp/customize.sh",
                *recipe.masked_units], timeout=600)
        log(f"customize.sh: {time.monotonic() - t:.0f} s; importing {recipe.ref}")
        t = time.monotonic()
        _import(rootfs, recipe)
        log(f"import: {time.monotonic() - t:.0f} s; {recipe.ref} built in "
            f"{time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


HOST_TOOLS = "msub-host-tools"
"""The directory, in a foreign root during its second stage only, of the host's dpkg-deb."""


def _debootstrap(recipe: Recipe, rootfs: Path, mirror: str, log: Log) -> None:
    """debootstrap the recipe's root; a foreign one with its unpacking done natively.

    For a foreign architecture debootstrap's first stage downloads and extracts
    natively, and its second stage installs every package again with the target's
    own dpkg, under qemu-user: there, the decompression of each package's data
    (``dpkg-deb --fsys-tarfile``, xz) ran emulated and was most of the build (measured
    in docs/vmesh.md, "Device architectures"). dpkg runs ``dpkg-deb`` from the PATH
    (debootstrap gives it ``/sbin:/usr/sbin:/bin:/usr/bin``), so the second stage
    finds the host's own first (the same bookworm dpkg, a program that only reads
    archives and writes a tar stream), with its libraries, both removed afterwards;
    the maintainer scripts still run as the target's programs.
    dpkg's fsyncs are off for the build (``force-unsafe-io``): a half-written root is
    thrown away anyway. And the second stage resolves pre-dependencies with the
    target's perl reading the whole Packages index (49 MB for bookworm's main on
    arm64) once per pass, emulated: it is given the index of the packages the first
    stage chose, and nothing else (``_trim_package_lists``).
    """
    args = [f"--arch={recipe.arch}", f"--variant={recipe.variant}",
            f"--components={','.join(recipe.components)}",
            f"--include={','.join(recipe.packages)}", recipe.suite, str(rootfs), mirror]
    t = time.monotonic()
    if recipe.arch == host_arch():
        sh.run(["debootstrap", *args], timeout=1800)
        log(f"debootstrap: {time.monotonic() - t:.0f} s")
        return
    sh.run(["debootstrap", "--foreign", *args], timeout=1800)
    log(f"debootstrap first stage (native): {time.monotonic() - t:.0f} s; "
        f"package lists {_trim_package_lists(rootfs)}")
    t = time.monotonic()
    with _host_unpacker(rootfs):
        sh.run(["chroot", str(rootfs), "/debootstrap/debootstrap", "--second-stage"],
               timeout=3600)
    log(f"debootstrap second stage (qemu-user, host dpkg-deb): {time.monotonic() - t:.0f} s")


def _trim_package_lists(rootfs: Path) -> str:
    """Keep in ``rootfs``'s Packages indexes only the packages the first stage chose.

    The second stage looks packages up only among those (``/debootstrap/required``
    and ``base``: the first stage's closure of the recipe's packages, all
    downloaded); a name outside them has no .deb to install either way, so the
    result is the same. ``customize.sh`` removes the lists from the image. Returns
    the sizes before and after, for the build's log.
    """
    chosen: set[str] = set()
    for name in ("required", "base"):
        with contextlib.suppress(OSError):
            chosen.update((rootfs / "debootstrap" / name).read_text().split())
    if not chosen:
        return "kept (no /debootstrap/required or base)"
    before = after = 0
    for index in sorted((rootfs / "var" / "lib" / "apt" / "lists").glob("*_Packages")):
        text = index.read_text(encoding="utf-8", errors="surrogateescape")
        kept = [stanza for stanza in re.split(r"\n\s*\n", text)
                if (m := re.match(r"Package:\s*(\S+)", stanza)) and m.group(1) in chosen]
        trimmed = "\n\n".join(kept) + "\n"
        index.write_text(trimmed, encoding="utf-8", errors="surrogateescape")
        before += len(text)
        after += len(trimmed)
    return f"{before / 1e6:.1f} MB -> {after / 1e6:.2f} MB ({len(chosen)} packages)"


@contextlib.contextmanager
def _host_unpacker(rootfs: Path) -> Iterator[None]:
    """The host's ``dpkg-deb`` as ``/usr/sbin/dpkg-deb`` of ``rootfs`` while the block runs.

    ``/usr/sbin`` comes before the target's own ``/usr/bin/dpkg-deb`` in the PATH the
    second stage gives dpkg. A wrapper (the target's ``sh``) runs the host's binary
    through the host's dynamic loader with the host's libraries, all copied to
    ``rootfs/msub-host-tools`` (nothing of the target's used or changed). Everything
    is removed afterwards, so the image is the one a native second stage makes.
    """
    tools = rootfs / HOST_TOOLS
    wrapper = rootfs / "usr" / "sbin" / "dpkg-deb"
    if wrapper.exists() or wrapper.is_symlink():
        raise VmeshError(f"{wrapper} exists already: not a fresh first stage")
    unsafe_io = rootfs / "etc" / "dpkg" / "dpkg.cfg.d" / "msub-unsafe-io"
    binary = shutil.which("dpkg-deb")
    if binary is None:
        raise VmeshError("dpkg-deb: not installed (see scripts/apt-packages.txt)")
    loader, libs = _shared_objects(binary)
    tools.mkdir()
    try:
        for obj in (loader, *libs):
            shutil.copy(obj, tools / Path(obj).name)
        shutil.copy(binary, tools / "dpkg-deb.host")
        wrapper.write_text(
            "#!/bin/sh\n"
            f'exec /{HOST_TOOLS}/{Path(loader).name} --library-path /{HOST_TOOLS} '
            f'--argv0 dpkg-deb /{HOST_TOOLS}/dpkg-deb.host "$@"\n')
        wrapper.chmod(0o755)
        unsafe_io.parent.mkdir(parents=True, exist_ok=True)
        unsafe_io.write_text("force-unsafe-io\n")
        yield
    finally:
        wrapper.unlink(missing_ok=True)
        shutil.rmtree(tools, ignore_errors=True)
        unsafe_io.unlink(missing_ok=True)


def _shared_objects(binary: str) -> tuple[str, list[str]]:
    """The dynamic loader and the libraries ``binary`` loads, from ``ldd``."""
    loader = ""
    libs: list[str] = []
    for line in sh.out(["ldd", binary]).splitlines():
        m = re.search(r"=>\s*(/\S+)", line)
        if m:
            libs.append(m.group(1))
        elif re.match(r"\s*/\S+ld-linux\S*\s", line):
            loader = line.split()[0]
    if not loader:
        raise VmeshError(f"no dynamic loader found for {binary} (ldd)")
    return loader, libs


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
