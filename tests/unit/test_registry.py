"""The protocol registry: ids declared by each class, collisions refused with both names.

Plug-ins are installed for real: a distribution (``*.dist-info`` with an
``entry_points.txt``) and its module on ``sys.path``, as pip would leave them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from meshsim.scenario import ScenarioError, loads_scenario
from meshsub.core.registry import (
    RegistryError,
    UnknownProtocolError,
    available,
    get_protocol,
    load_registry,
)
from meshsub.protocols.bsub import BSub
from meshsub.runtime.config import ConfigError, parse_config


def _plugin(root: Path, dist: str, entries: dict[str, str], module: str) -> None:
    """Install distribution ``dist`` (module ``dist.replace('-', '_')``) into ``root``."""
    mod = dist.replace("-", "_")
    sys.modules.pop(mod, None)  # another test's plug-in of the same name
    (root / f"{mod}.py").write_text(module)
    info = root / f"{mod}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{name} = {value}" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[meshsub.protocols]\n{lines}\n")


def _proto(cls: str, name: str, pid: object) -> str:
    return ("from meshsub.core.protocol import Protocol\n"
            f"class {cls}(Protocol):\n    name = {name!r}\n    protocol_id = {pid!r}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_built_in_protocols_have_distinct_declared_ids() -> None:
    registry = load_registry()
    ids = {name: cls.protocol_id for name, cls in registry.items()}
    assert len(set(ids.values())) == len(ids)
    assert all(1 <= pid <= 255 for pid in ids.values())
    assert sorted(registry) == available()
    assert get_protocol("bsub") is BSub


def test_a_plugin_taking_a_built_in_id_is_refused_naming_both(site: Path) -> None:
    _plugin(site, "acme-proto", {"acme": "acme_proto:Acme"}, _proto("Acme", "acme", 4))
    with pytest.raises(RegistryError) as err:
        get_protocol("flooding")
    text = str(err.value)
    assert "protocol id 4 is claimed by both" in text
    assert "'bsub' (meshsub.protocols.bsub:BSub" in text
    assert "'acme' (acme_proto:Acme, from acme-proto)" in text


def test_two_plugins_with_one_id_are_refused(site: Path) -> None:
    _plugin(site, "one-proto", {"one": "one_proto:One"}, _proto("One", "one", 200))
    _plugin(site, "two-proto", {"two": "two_proto:Two"}, _proto("Two", "two", 200))
    with pytest.raises(RegistryError, match=r"id 200 is claimed by both 'one' .* and 'two'"):
        load_registry()


def test_a_free_id_plugin_is_a_peer_of_the_built_ins(site: Path) -> None:
    _plugin(site, "free-proto", {"free": "free_proto:Free"}, _proto("Free", "free", 201))
    cls = get_protocol("free")
    assert cls.protocol_id == 201 and "free" in available()


@pytest.mark.parametrize(("pid", "problem"), [
    (0, "declares protocol_id 0"), (256, "declares protocol_id 256"),
    ("7", "declares protocol_id '7'"), (True, "declares protocol_id True")])
def test_a_plugin_without_a_valid_id_is_refused(site: Path, pid: object, problem: str) -> None:
    _plugin(site, "bad-proto", {"bad": "bad_proto:Bad"}, _proto("Bad", "bad", pid))
    with pytest.raises(RegistryError, match=problem):
        load_registry()


def test_a_name_registered_twice_is_refused(site: Path) -> None:
    _plugin(site, "dup-proto", {"epidemic": "dup_proto:Dup"}, _proto("Dup", "epidemic", 202))
    with pytest.raises(RegistryError, match="protocol name 'epidemic' is registered twice"):
        load_registry()


def test_class_and_entry_point_names_must_agree(site: Path) -> None:
    _plugin(site, "odd-proto", {"odd": "odd_proto:Odd"}, _proto("Odd", "even", 203))
    with pytest.raises(RegistryError, match="loads a class named 'even'"):
        load_registry()


def test_a_broken_plugin_is_one_line_naming_it(site: Path) -> None:
    _plugin(site, "gone-proto", {"gone": "gone_proto:Missing"}, _proto("Gone", "gone", 204))
    with pytest.raises(RegistryError, match=r"cannot load protocol 'gone'.*AttributeError"):
        load_registry()


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownProtocolError, match=r"known: .*bsub, df, dibs, dr, epidemic"):
        get_protocol("nope")


def test_the_daemon_config_and_the_scenario_answer_a_collision_in_one_line(site: Path) -> None:
    _plugin(site, "acme-proto", {"acme": "acme_proto:Acme"}, _proto("Acme", "acme", 1))
    with pytest.raises(ConfigError) as cfg_err:
        parse_config({"node": {"id": 1}, "protocol": {"name": "flooding"}})
    assert "protocol id 1 is claimed by both 'acme'" in str(cfg_err.value)
    assert "\n" not in str(cfg_err.value)
    with pytest.raises(ScenarioError) as sc_err:
        loads_scenario('[scenario]\nname = "x"\nduration_s = 1\n[area]\nwidth_m = 10\n'
                       'height_m = 10\n[nodes]\ncount = 1\nplacement = "grid"\n'
                       '[protocol]\nname = "flooding"\n')
    assert "'flooding'" in str(sc_err.value) and "'acme'" in str(sc_err.value)
