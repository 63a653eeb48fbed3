"""The parts of the virtual mesh that need no root: plan, recipe, mirror, state, inventory."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.host.errors import VmeshError
from meshsim.vmesh import image, inventory
from meshsim.vmesh.plan import DEFAULT_RUN, make_plan
from meshsim.vmesh.runstate import RunState, forget, load_state

runs = st.one_of(st.just(DEFAULT_RUN), st.from_regex(r"[a-z][a-z0-9]{0,4}", fullmatch=True))


@settings(max_examples=100, deadline=None)
@given(n=st.one_of(st.integers(1, 40), st.integers(250, 270)), run=runs)
def test_plan_names_and_addresses_are_unique_and_valid(n: int, run: str) -> None:
    plan = make_plan(n, run)
    mesh = ipaddress.IPv4Network(plan.mesh_net)
    mgmt = ipaddress.IPv4Network(plan.mgmt_net)
    assert mesh.is_private and mgmt.is_private and not mesh.overlaps(mgmt)
    host_ip = ipaddress.IPv4Interface(plan.host_mgmt_addr).ip
    for field in ("netns", "hostname", "medium_port", "mgmt_host_if", "mesh_addr",
                  "mgmt_addr", "mesh_mac"):
        values = [getattr(node, field) for node in plan.nodes]
        assert len(set(values)) == n, field
    for node in plan.nodes:
        assert node.netns.startswith("msub-") and node.mgmt_host_if.startswith("msub")
        assert len(node.mgmt_host_if) <= 15 and len(node.medium_port) <= 15
        assert ipaddress.IPv4Interface(node.mesh_addr).ip in mesh
        assert ipaddress.IPv4Address(node.mgmt_ip) in mgmt
        assert ipaddress.IPv4Address(node.mgmt_ip) != host_ip
        assert ipaddress.IPv4Address(node.mesh_ip) not in (mesh.network_address,
                                                            mesh.broadcast_address)
    assert len(plan.mgmt_bridge) <= 15 and plan.mgmt_bridge.startswith("msub-")


def test_default_run_uses_the_documented_names() -> None:
    plan = make_plan(3)
    n2 = plan.nodes[1]
    assert (plan.medium_netns, plan.medium_bridge, plan.mgmt_bridge) == \
        ("msub-medium", "msub-br0", "msub-mg0")
    assert (n2.netns, n2.container, n2.hostname, n2.node_id) == \
        ("msub-n2", "msub-n2", "msub-node-2", 2)
    assert (n2.mesh_addr, n2.mgmt_addr) == ("10.201.0.2/16", "10.202.0.2/16")
    assert (n2.x, n2.y) == (50.0, 0.0) and plan.nodes[2].y == 50.0
    assert plan.node("msub-node-3") is plan.nodes[2] and plan.node("1") is plan.nodes[0]
    big = make_plan(1000)
    assert big.nodes[-1].mgmt_host_if == "msub-m1000" and big.nodes[-1].mesh_ip == "10.201.3.232"


def test_other_runs_do_not_share_names_or_subnets_with_the_default() -> None:
    a, b = make_plan(4), make_plan(4, "ci")
    assert not ({n.netns for n in a.nodes} & {n.netns for n in b.nodes})
    assert not ({n.mgmt_host_if for n in a.nodes} & {n.mgmt_host_if for n in b.nodes})
    assert a.mesh_net != b.mesh_net and a.mgmt_net != b.mgmt_net
    assert a.mgmt_bridge != b.mgmt_bridge and a.medium_netns != b.medium_netns


@pytest.mark.parametrize("nodes,run", [(0, DEFAULT_RUN), (1001, DEFAULT_RUN), (2, "Bad"),
                                       (2, "toolong"), (2, "1abc"), (2, "a-b")])
def test_bad_plans_are_one_line_errors(nodes: int, run: str) -> None:
    with pytest.raises(VmeshError):
        make_plan(nodes, run)
    with pytest.raises(VmeshError, match="no node"):
        make_plan(2).node("7")


def test_mirror_from_deb822_and_one_line_sources() -> None:
    deb822 = ("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
              "Components: main\n\nTypes: deb\nURIs: http://mirror.example/security\n"
              "Suites: bookworm-security\n")
    assert image.parse_mirror({"debian.sources": deb822}, "bookworm") == \
        "http://mirror.example/debian"
    assert image.parse_mirror({"debian.sources": deb822}, "trixie") is None
    one_line = ("# deb http://old.example/debian bookworm main\n"
                "deb-src http://src.example/debian bookworm main\n"
                "deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main\n")
    assert image.parse_mirror({"sources.list": one_line}, "bookworm") == \
        "http://m.example/debian"


def test_recipe_hash_follows_the_recipe_files(tmp_path: Path) -> None:
    for name in image.RECIPE_FILES:
        (tmp_path / name).write_bytes((image.RECIPE_DIR / name).read_bytes())
    recipe = image.load_recipe(tmp_path)
    assert recipe.digest == image.load_recipe().digest
    assert recipe.ref == f"localhost/msub-device:{recipe.digest}"
    assert "gpsd" in recipe.packages and "gpsd-clients" not in recipe.packages
    (tmp_path / "customize.sh").write_text("#!/bin/sh\ntrue\n")
    assert image.load_recipe(tmp_path).digest != recipe.digest
    (tmp_path / "recipe.toml").write_text("[image]\nname = 1\n")
    with pytest.raises(VmeshError, match="bad image recipe"):
        image.load_recipe(tmp_path)


def test_state_round_trips_and_bad_state_is_an_error(tmp_path: Path) -> None:
    assert load_state(tmp_path) is None
    state = RunState(run="ci", nodes=3, image="localhost/x:1", spacing_m=50.0,
                     protocol="flooding")
    state.remember("netns", "msub-ci-n1", tmp_path)
    state.remember("netns", "msub-ci-n1", tmp_path)
    loaded = load_state(tmp_path)
    assert loaded == state and loaded is not None and loaded.netns == ["msub-ci-n1"]
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(VmeshError, match="unreadable run state"):
        load_state(tmp_path)
    (tmp_path / "state.json").write_text('{"run": "ci"}')
    with pytest.raises(VmeshError, match="bad run state"):
        load_state(tmp_path)
    forget(tmp_path)
    assert load_state(tmp_path) is None


def test_inventory_has_every_host_and_keeps_the_fleet_key(tmp_path: Path) -> None:
    plan = make_plan(3, "ci")
    path = inventory.write_inventory(plan, tmp_path, "epidemic")
    assert path.stat().st_mode & 0o077 == 0
    text = path.read_text()
    data = json.loads(text[text.index("{"):])
    group = data["vmesh_ci"]
    assert sorted(group["hosts"]) == [f"msub-ci-node-{i}" for i in (1, 2, 3)]
    h2 = group["hosts"]["msub-ci-node-2"]
    assert h2["meshsub_node_id"] == 2 and h2["ansible_host"] == plan.nodes[1].mgmt_ip
    v = group["vars"]
    assert v["meshsub_interface"] == "mesh0" and v["mesh_link_enabled"] is False
    assert v["meshsub_protocol"] == "epidemic" and v["meshsub_zeroconf"] is False
    key = v["meshsub_fleet_keys"]["1"]
    assert len(bytes.fromhex(key)) == 32
    inventory.write_inventory(plan, tmp_path, "epidemic")
    again = path.read_text()
    assert json.loads(again[again.index("{"):])["vmesh_ci"]["vars"]["meshsub_fleet_keys"]["1"] \
        == key


def test_inventory_floats_stay_floats_for_ansibles_yaml(tmp_path: Path) -> None:
    """PyYAML (YAML 1.1, what Ansible parses inventories with) reads JSON's 5e-08 as a
    string; HESPER's E_elec must reach the daemon's config as a number."""
    yaml = pytest.importorskip("yaml")
    params = {"E_elec": 5e-08, "e_mp": 1.3e-15, "big": 1e20, "TR": 60.0, "M_b": 320,
              "list": [2e-05, 0.5], "text": "5e-08"}
    path = inventory.write_inventory(make_plan(2, "ci"), tmp_path, "hesper",
                                     group_vars={"meshsub_protocol_params": params})
    text = path.read_text()
    for loaded in (yaml.safe_load(text), json.loads(text[text.index("{"):])):
        got = loaded["vmesh_ci"]["vars"]["meshsub_protocol_params"]
        assert got == params
        assert all(type(got[k]) is type(params[k]) for k in params)
