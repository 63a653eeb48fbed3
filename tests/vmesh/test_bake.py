"""The baked image's cache key, the wheelhouse's builds, and the comparison of devices (no root)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from meshsim.host.errors import VmeshError
from meshsim.vmesh import bake, devstate, image, wheelhouse


def fake_wheelhouse(path: Path, meshsub: bytes = b"meshsub wheel",
                    version: str = "0.1.0") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("meshsub-*.whl"):
        old.unlink()
    (path / f"meshsub-{version}-py3-none-any.whl").write_bytes(meshsub)
    (path / "msgpack-1.2.4-cp311-cp311-manylinux2014_x86_64.whl").write_bytes(b"msgpack")
    return path


def test_the_bake_key_follows_every_input_and_nothing_else(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    shutil.copytree(bake.DEPLOY_DIR, deploy)
    wheels = fake_wheelhouse(tmp_path / "wheels")
    key = bake.bake_digest("localhost/msub-device:aaa", wheels, deploy)
    assert key == bake.bake_digest("localhost/msub-device:aaa", wheels, deploy)
    # the same wheels in another directory: the same image
    moved = shutil.copytree(wheels, tmp_path / "elsewhere")
    assert bake.bake_digest("localhost/msub-device:aaa", moved, deploy) == key
    assert bake.baked_ref(key) == f"localhost/msub-device-baked:{key[:12]}"
    changes = {
        "base": lambda: bake.bake_digest("localhost/msub-device:bbb", wheels, deploy),
        "wheel": lambda: bake.bake_digest(
            "localhost/msub-device:aaa", fake_wheelhouse(tmp_path / "w2", b"other"), deploy),
        "version": lambda: bake.bake_digest(
            "localhost/msub-device:aaa", fake_wheelhouse(tmp_path / "w3", version="0.2"),
            deploy),
    }
    for what, digest in changes.items():
        assert digest() != key, what
    for path in ("ansible/roles/meshsub/tasks/bake.yml", "systemd/meshsubd.service",
                 "ansible/site.yml", "ansible/roles/mosquitto/templates/meshsub.conf.j2"):
        target = deploy / path
        original = target.read_bytes()
        target.write_bytes(original + b"\n# changed\n")
        assert bake.bake_digest("localhost/msub-device:aaa", wheels, deploy) != key, path
        target.write_bytes(original)
    # what the bake never reads does not rebuild it
    (deploy / "ansible" / "inventories" / "pi-fleet" / "hosts.yml").write_text("changed")
    assert bake.bake_digest("localhost/msub-device:aaa", wheels, deploy) == key


def test_the_base_recipe_hash_includes_the_architecture() -> None:
    host = image.load_recipe()
    arm = image.load_recipe(arch="arm64")
    assert arm.arch == "arm64" and arm.digest != host.digest and arm.name == host.name
    assert image.load_recipe(arch=host.arch).digest == host.digest
    with pytest.raises(VmeshError, match="bad architecture"):
        image.load_recipe(arch="x86 64")


def test_a_newer_build_rewrites_both_version_declarations(tmp_path: Path) -> None:
    wheelhouse.copy_sources(wheelhouse.REPO_ROOT, tmp_path, "0.1.0.post7")
    assert wheelhouse.source_version(tmp_path) == "0.1.0.post7"
    init = (tmp_path / "daemon" / "meshsub" / "__init__.py").read_text()
    assert '__version__ = "0.1.0.post7"' in init
    assert not list(tmp_path.rglob("__pycache__")) and not (tmp_path / "build").exists()
    with pytest.raises(VmeshError, match="bad version"):
        wheelhouse.copy_sources(wheelhouse.REPO_ROOT, tmp_path / "x", "1.0; rm -rf /")


def test_wheel_names_and_the_wheelhouse_digest(tmp_path: Path) -> None:
    wheels = fake_wheelhouse(tmp_path, version="0.1.0.post2")
    wheel = wheelhouse.meshsub_wheel(wheels)
    assert wheelhouse.wheel_version(wheel) == "0.1.0.post2"
    digest = wheelhouse.wheelhouse_digest(wheels)
    (wheels / "extra-1.0-py3-none-any.whl").write_bytes(b"x")
    assert wheelhouse.wheelhouse_digest(wheels) != digest
    (wheels / "meshsub-0.2-py3-none-any.whl").write_bytes(b"second")
    with pytest.raises(VmeshError, match="expected one meshsub wheel"):
        wheelhouse.meshsub_wheel(wheels)
    with pytest.raises(VmeshError, match="not a wheel"):
        wheelhouse.wheel_version(Path("meshsub.tar.gz"))


def snap(files: dict[str, dict[str, str]], version: str = "0.1.0") -> dict[str, object]:
    return {"files": files, "user": {"shell": "/usr/sbin/nologin"},
            "packages": {"gpsd": "3.22"},
            "services": {"meshsubd.service": {"enabled": "enabled", "active": "active"}},
            "unit": {"User": "meshsub"}, "versions": {"meshsubd": f"meshsubd {version}"}}


CONF = {"type": "file", "mode": "0o640", "owner": "root", "group": "meshsub", "sha256": "aa"}
PYC = {"type": "file", "mode": "0o644", "owner": "root", "group": "root"}


def test_device_differences_name_each_difference() -> None:
    a = snap({"/conf": CONF, "/pyc": PYC})
    assert devstate.differences(a, snap({"/conf": dict(CONF), "/pyc": dict(PYC)})) == []
    b = snap({"/conf": {**CONF, "sha256": "bb", "mode": "0o644"}, "/extra": CONF}, "0.2")
    assert devstate.differences(a, b) == [
        "/conf: mode '0o640' != '0o644', sha256 'aa' != 'bb'",
        "/extra: only on the second device", "/pyc: only on the first device",
        "versions meshsubd: 'meshsubd 0.1.0' != 'meshsubd 0.2'"]
    # a per-device secret is compared by its metadata only
    c = snap({"/conf": {**CONF, "sha256": "cc"}, "/pyc": PYC})
    assert devstate.differences(a, c, secret_paths=["/conf"]) == []
    assert devstate.differences(a, c) == ["/conf: sha256 'aa' != 'cc'"]


def test_the_units_command_line_is_compared_without_its_last_runs_time_and_pid() -> None:
    """Two devices that installed the same unit differ in when their daemon started."""
    shown = ("{ path=/opt/meshsub/bin/meshsubd ; argv[]=/opt/meshsub/bin/meshsubd --config "
             "/etc/meshsub/meshsub.toml ; ignore_errors=no ; start_time=[Fri 2026-11-27 "
             "13:49:00 UTC] ; stop_time=[n/a] ; pid=166 ; code=(null) ; status=0/0 }")
    assert devstate.installed_unit({"ExecStart": shown, "User": "meshsub"}) == {
        "ExecStart": "{ path=/opt/meshsub/bin/meshsubd ; argv[]=/opt/meshsub/bin/meshsubd "
                     "--config /etc/meshsub/meshsub.toml ; ignore_errors=no }",
        "User": "meshsub"}
    other = shown.replace("13:49:00", "13:49:07").replace("pid=166", "pid=127")
    assert devstate.installed_unit({"ExecStart": other}) == devstate.installed_unit(
        {"ExecStart": shown})
    # the command line itself is still compared
    moved = shown.replace("--config /etc", "--config /srv")
    assert devstate.installed_unit({"ExecStart": moved}) != devstate.installed_unit(
        {"ExecStart": shown})
