"""Device architectures without root: names, wheel tags, emulation check, inventory, scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshsim.host.errors import VmeshError
from meshsim.scenario import ScenarioError, load_scenario, loads_scenario
from meshsim.vmesh import image, inventory, lifecycle, wheelhouse
from meshsim.vmesh.plan import make_plan

SCENARIOS = Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
HOST = wheelhouse.host_arch()
OTHER = "arm64" if HOST != "arm64" else "amd64"


def test_device_arches_one_for_all_or_one_each() -> None:
    assert lifecycle.device_arches(None, 2) == (HOST, HOST)
    assert lifecycle.device_arches("arm64", 3) == ("arm64",) * 3
    assert lifecycle.device_arches("arm64, amd64,armhf", 3) == ("arm64", "amd64", "armhf")
    with pytest.raises(VmeshError, match="2 architectures for 3 devices"):
        lifecycle.device_arches("arm64,amd64", 3)
    with pytest.raises(VmeshError, match="bad architecture 'sparc'"):
        lifecycle.device_arches("sparc", 1)
    assert lifecycle.image_label(["a", "a"]) == "a"
    assert lifecycle.image_label(["a", "b"]) == "a,b"


def test_wheel_tags_name_the_machine() -> None:
    tags = wheelhouse.platform_tags("armhf")
    assert tags[0] == "manylinux_2_36_armv7l" and "linux_armv7l" in tags
    assert "manylinux2014_aarch64" in wheelhouse.platform_tags("arm64")
    names = ["meshsub-0.1.0-py3-none-any.whl",
             "msgpack-1.2.4-cp311-cp311-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
             "mmh3-5.3.1-cp311-cp311-linux_armv7l.whl"]
    assert wheelhouse.wheel_machines(names) == {"aarch64", "armv7l"}
    assert wheelhouse.wheel_machines(names[:1]) == set()


def test_no_binfmt_handler_is_one_clear_line(tmp_path: Path) -> None:
    if HOST != "amd64":
        pytest.skip("the handler names are those of an amd64 host")
    with pytest.raises(VmeshError, match=r"cannot run arm64 programs on this amd64 host: no "
                       r"enabled binfmt handler .*qemu-aarch64.*qemu-user-static"):
        image.check_emulation("arm64", tmp_path)
    (tmp_path / "qemu-aarch64").write_text("disabled\ninterpreter /x\n")
    with pytest.raises(VmeshError, match="no enabled binfmt handler"):
        image.check_emulation("arm64", tmp_path)
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /x\nflags: PF\n")
    image.check_emulation("arm64", tmp_path)
    image.check_emulation("amd64", tmp_path)  # the host's own: nothing to emulate


def test_each_device_installs_from_its_architecture_s_wheelhouse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MSUB_VMESH_HOME", str(tmp_path))
    plan = make_plan(3, "arch1")
    arches = {plan.nodes[1].hostname: OTHER, plan.nodes[0].hostname: HOST}
    path = inventory.write_inventory(plan, tmp_path, "flooding", arches=arches)
    text = path.read_text()
    data = json.loads(text[text.index("{"):])
    group = data[inventory.group_name("arch1")]
    hosts = group["hosts"]
    assert group["vars"]["meshsub_wheelhouse_dir"] == str(tmp_path / "wheelhouse")
    assert hosts[plan.nodes[1].hostname]["meshsub_wheelhouse_dir"] == str(
        tmp_path / f"wheelhouse-{OTHER}")
    assert "meshsub_wheelhouse_dir" not in hosts[plan.nodes[0].hostname]
    assert "meshsub_wheelhouse_dir" not in hosts[plan.nodes[2].hostname]
    # an emulated device gets time to log in and start its Python under qemu-user
    assert hosts[plan.nodes[1].hostname]["ansible_ssh_timeout"] \
        == inventory.EMULATED_CONNECT_TIMEOUT_S
    assert "ansible_ssh_timeout" not in hosts[plan.nodes[0].hostname]


def test_a_scenario_names_its_devices_architectures() -> None:
    scenario = load_scenario(SCENARIOS / "vmesh-mixed-arch.toml")
    assert scenario.nodes.arch == ("amd64", "arm64", "arm64")
    base = (SCENARIOS / "vmesh-line6.toml").read_text()
    one = loads_scenario(base.replace('placement = "line"', 'placement = "line"\narch = "armhf"'))
    assert one.nodes.arch == ("armhf",)
    assert loads_scenario(base).nodes.arch == ()
    with pytest.raises(ScenarioError, match=r"nodes\.arch.*2 architectures for 6 nodes"):
        loads_scenario(base.replace('placement = "line"',
                                    'placement = "line"\narch = ["arm64", "amd64"]'))
    with pytest.raises(ScenarioError, match=r"nodes\.arch.*must be one of"):
        loads_scenario(base.replace('placement = "line"', 'placement = "line"\narch = "mips"'))


def test_each_architecture_has_its_own_image_names() -> None:
    """Keeping the newest tags of one architecture must never remove another's images."""
    from meshsim.vmesh import bake

    assert image.load_recipe(arch="arm64").ref.startswith("localhost/msub-device-arm64:")
    assert image.load_recipe(arch="armhf").ref.startswith("localhost/msub-device-armhf:")
    assert image.load_recipe(arch="amd64").ref.startswith("localhost/msub-device:")
    assert bake.baked_ref("ab" * 32, "arm64") == f"localhost/msub-device-baked-arm64:{'ab' * 6}"
    assert bake.baked_ref("ab" * 32) == f"localhost/msub-device-baked:{'ab' * 6}"


def test_wheels_compiled_under_emulation_are_kept_per_architecture(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wheelhouse, "COMPILED_CACHE", tmp_path / "cache")
    built, out = tmp_path / "built", tmp_path / "out"
    built.mkdir()
    out.mkdir()
    (built / "mmh3-5.3.1-cp311-cp311-linux_armv7l.whl").write_bytes(b"compiled")
    (built / "zeroconf-0.154.0-cp311-cp311-manylinux_2_17_armv7l.whl").write_bytes(b"fetched")
    wheelhouse._to_cache(built, "armhf")
    assert [p.name for p in (tmp_path / "cache" / "armhf").iterdir()] == [
        "mmh3-5.3.1-cp311-cp311-linux_armv7l.whl"]  # only what was compiled here
    assert wheelhouse._from_cache("mmh3==5.3.1", "armhf", out)
    assert (out / "mmh3-5.3.1-cp311-cp311-linux_armv7l.whl").read_bytes() == b"compiled"
    assert not wheelhouse._from_cache("mmh3==5.3.2", "armhf", out)
    assert not wheelhouse._from_cache("mmh3==5.3.1", "arm64", out)


def test_a_foreign_second_stage_reads_only_the_packages_the_first_stage_chose(
        tmp_path: Path) -> None:
    (tmp_path / "debootstrap").mkdir()
    (tmp_path / "debootstrap" / "required").write_text("libc6 dpkg\n")
    (tmp_path / "debootstrap" / "base").write_text("systemd\n")
    lists = tmp_path / "var" / "lib" / "apt" / "lists"
    lists.mkdir(parents=True)
    stanzas = [f"Package: {name}\nVersion: 1\nDepends: libc6\nDescription: {name}\n more"
               for name in ("0ad", "libc6", "dpkg", "emacs", "systemd", "zsh")]
    index = lists / "mirror_dists_bookworm_main_binary-arm64_Packages"
    index.write_text("\n\n".join(stanzas) + "\n")
    summary = image._trim_package_lists(tmp_path)
    kept = [s.split("\n")[0] for s in index.read_text().strip().split("\n\n")]
    assert kept == ["Package: libc6", "Package: dpkg", "Package: systemd"]
    assert index.read_text().split("\n\n")[1] == stanzas[2]  # stanzas kept whole
    assert summary.endswith("(3 packages)")


def test_the_host_unpacker_comes_with_its_loader_and_libraries() -> None:
    loader, libs = image._shared_objects("/usr/bin/dpkg-deb")
    assert Path(loader).name.startswith("ld-linux") and Path(loader).exists()
    assert any(Path(lib).name.startswith("libc.so") for lib in libs)
    assert any(Path(lib).name.startswith("liblzma") for lib in libs)  # dpkg-deb's xz
