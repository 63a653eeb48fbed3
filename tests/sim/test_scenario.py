"""Scenario validation, overrides, placement and workload generation."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from simhelpers import SCENARIOS, base_doc

from meshsim.radio import compute_links, is_connected, make_model
from meshsim.scenario import ScenarioError, from_dict, load_scenario, loads_scenario, make_plan
from meshsim.scenario.overrides import apply_override, split_path
from meshsub.core.params import params_to_dict
from meshsub.core.predicates import Op
from meshsub.core.registry import available, get_protocol


def error_of(doc: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        from_dict(doc)
    return str(info.value)


def test_the_base_document_is_valid() -> None:
    scenario = from_dict(base_doc())
    assert scenario.nodes.ids == (1, 2, 3, 4, 5)
    assert scenario.radio.delay_s == 0.001 and scenario.meta.drain_s == 2.0
    assert scenario.contacts is None and scenario.mobility.model == "static"
    assert scenario.end_s == 12.0


@pytest.mark.parametrize("name", ["demo.toml", "random50.toml", "flooding-200.toml",
                                  "epidemic-partition.toml"])
def test_shipped_scenarios_are_valid(name: str) -> None:
    plan = make_plan(load_scenario(SCENARIOS / name))
    assert plan.positions and plan.publications and plan.subscriptions


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("scenario"), "scenario: required key is missing"),
        (lambda d: d["scenario"].pop("duration_s"), "scenario.duration_s: required key"),
        (lambda d: d["scenario"].update(seed="x"),
         "scenario.seed: expected an integer, got string"),
        (lambda d: d["scenario"].update(seed=True), "scenario.seed: expected an integer, got bool"),
        (lambda d: d["scenario"].update(duration_s=-1), "scenario.duration_s: must be > 0"),
        (lambda d: d["scenario"].update(warmup_s=20.0), "scenario.warmup_s: must be less"),
        (lambda d: d.update(extra={}), "extra: unknown key"),
        (lambda d: d["area"].update(width=3), "area.width: unknown key"),
        (lambda d: d["radio"].update(model="magic"), "radio.model: must be one of"),
        (lambda d: d["radio"].update(loss=1.5), "radio.loss: must be <= 1"),
        (lambda d: d["radio"].update(links=[{"a": 1, "b": 9, "loss": 0.1}]),
         "radio.links[0].b: unknown node 9"),
        (lambda d: d["radio"].update(links=[{"a": 1, "b": 2}]), "radio.links[0].loss:"),
        (lambda d: d["radio"].update(links=[{"a": 1, "b": 2, "delay_s": -1}]),
         "radio.links[0].delay_s: must be >= 0"),
        (lambda d: d["radio"].update(vmesh_delay="yes"),
         "radio.vmesh_delay: expected true or false"),
        (lambda d: d["radio"].update(tx_power_dbm=10),
         "radio.tx_power_dbm: log_distance only (radio.model is 'unit_disk')"),
        (lambda d: d["radio"].update(model="log_distance"),
         "radio.range_m: not used by log_distance"),
        (lambda d: d.update(radio={"model": "log_distance", "ramp_start": 0.5}),
         "radio.ramp_start: not used by log_distance"),
        (lambda d: d.update(radio={"model": "log_distance", "tx_power_dbm": -60.0}),
         "radio.tx_power_dbm: no link at any distance"),
        (lambda d: d.update(radio={"model": "log_distance", "path_loss_exp": 0}),
         "radio.path_loss_exp: must be > 0"),
        (lambda d: d.update(radio={"model": "log_distance", "frame_bytes": 70000}),
         "radio.frame_bytes: must be <= 65535"),
        (lambda d: d.update(radio={"model": "log_distance", "loss": 0.999}),
         "radio.loss: must be < 0.995 with log_distance"),
        (lambda d: d["nodes"].update(placement="hex"), "nodes.placement: must be one of"),
        (lambda d: d["nodes"].update(count=0), "nodes.count: must be >= 1"),
        (lambda d: d["nodes"].update(connected=True), "nodes.connected: only for"),
        (lambda d: d["protocol"].update(name="nope"), "protocol.name: unknown protocol 'nope'"),
        (lambda d: d["protocol"].update(flooding={"ttl": "x"}),
         "protocol.flooding.ttl: expected"),
        (lambda d: d["protocol"].update(flooding={"hops": 1}),
         "protocol.flooding.hops: unknown parameter (known: "),
        (lambda d: d["protocol"].update(epidemic={"hops": 1}),  # not selected, still checked
         "protocol.epidemic.hops: unknown parameter (known: "),
        (lambda d: d["protocol"].update(flodding={"ttl": 3}),
         "protocol.flodding: not a protocol's parameter table (protocol 'flodding' (known: "),
        (lambda d: d["protocol"].update(flooding=3), "protocol.flooding: expected a table"),
        (lambda d: d["protocol"].update(params={"ttl": 3}),
         "protocol.params: parameters go in a table per protocol, [protocol.flooding]"),
        (lambda d: d["workload"]["subscriptions"].append({"node": 2, "expr": "a/b x >"}),
         "workload.subscriptions[1].expr: "),
        (lambda d: d["workload"]["subscriptions"].append({"node": 7, "expr": "a/b"}),
         "workload.subscriptions[1].node: unknown node 7"),
        (lambda d: d["workload"]["subscriptions"].append({"node": 5, "expr": "a/b", "id": "s0"}),
         "workload.subscriptions[1].id: duplicate id 's0'"),
        (lambda d: d["workload"]["subscriptions"].append({"node": 5, "expr": "a/b",
                                                           "id": "a/b/c"}),
         "workload.subscriptions[1].id: subscription id 'a/b/c' must match"),
        (lambda d: d["workload"]["subscriptions"].append({"node": 5, "expr": "a/b",
                                                           "id": "ctl-1"}),
         "workload.subscriptions[1].id: subscription ids starting 'ctl-' are reserved"),
        (lambda d: d["workload"]["publications"][0].update(event="a/+ x=1"),
         "workload.publications[0].event: "),
        (lambda d: d["workload"]["publications"][0].update(t=10.0),
         "workload.publications[0].t: must be before"),
        (lambda d: d["workload"].update(subscribers={"count": 2, "fraction": 0.5,
                                                      "expressions": [{"expr": "a"}]}),
         "workload.subscribers.count: give exactly one"),
        (lambda d: d["workload"].update(subscribers={"count": 9,
                                                      "expressions": [{"expr": "a"}]}),
         "workload.subscribers.count: is 9 but only 5"),
        (lambda d: d["workload"].update(generator={"rate_per_s": 1.0, "templates": [
            {"topic": "t", "attrs": {"v": {"uniform_int": [5, 1]}}}]}),
         "workload.generator.templates[0].attrs.v.uniform_int: low must not exceed"),
        (lambda d: d["workload"].update(generator={"rate_per_s": 1.0, "templates": [
            {"topic": "t", "attrs": {"v": {"gauss": [5, 1]}}}]}),
         "workload.generator.templates[0].attrs.v.gauss: unknown key"),
        (lambda d: d["workload"].update(generator={"rate_per_s": 1.0, "templates": [
            {"topic": "t", "attrs": {"v": {"const": 1, "choice": [2]}}}]}),
         "workload.generator.templates[0].attrs.v: give exactly one of"),
        (lambda d: d["workload"].update(generator={"rate_per_s": 1.0, "templates": [
            {"topic": "a/#", "attrs": {}}]}), "workload.generator.templates[0].topic: "),
        (lambda d: d["workload"].update(generator={"rate_per_s": 0, "templates": []}),
         "workload.generator.templates: at least one"),
        (lambda d: d.update(contacts={"events": ["1 CONN 1 1 up"]}), "contacts.events[0]:"),
        (lambda d: d.update(contacts={"events": ["1 CONN 1 9 up"]}), "unknown node 9"),
        (lambda d: d.update(contacts={"events": [3]}), "contacts.events[0]: expected a string"),
        (lambda d: d.update(mobility={"model": "scripted"}), "mobility.waypoints: scripted"),
        (lambda d: d.update(mobility={"model": "scripted", "waypoints": [[1, 2, 3]]}),
         "mobility.waypoints[0]: expected [t, node, x, y]"),
    ],
)
def test_errors_name_the_key_path(mutate: Any, message: str) -> None:
    doc = base_doc()
    mutate(doc)
    assert message in error_of(doc)


def test_bad_toml_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="invalid TOML"):
        loads_scenario("[scenario\n")


def test_overrides_use_toml_values_and_paths() -> None:
    doc = base_doc()
    apply_override(doc, "radio.range_m=75")
    apply_override(doc, "protocol.name=epidemic")  # not TOML: taken as a string
    apply_override(doc, "workload.subscriptions[0].expr=\"a/b x>5\"")
    apply_override(doc, "protocol.epidemic.ttl_s=60.5")
    apply_override(doc, "nodes.first_id=10")
    assert doc["radio"]["range_m"] == 75 and doc["protocol"]["name"] == "epidemic"
    assert doc["protocol"]["epidemic"] == {"ttl_s": 60.5}
    assert doc["workload"]["subscriptions"][0]["expr"] == "a/b x>5"
    assert split_path("a.b[2].c") == ["a", "b", 2, "c"]
    with pytest.raises(ScenarioError, match="no array element"):
        apply_override(doc, "workload.subscriptions[5].expr=x")
    with pytest.raises(ScenarioError, match=r"expected key\.path=value"):
        apply_override(doc, "radio.range_m")
    with pytest.raises(ScenarioError, match="bad key path"):
        apply_override(doc, "radio..x=1")
    # An override is validated like the file itself.
    with pytest.raises(ScenarioError, match=r"^radio\.range_m: expected a number"):
        loads_scenario((SCENARIOS / "random50.toml").read_text(), ["radio.range_m=far"])


@pytest.mark.parametrize("name", available())
def test_one_scenario_runs_under_every_protocol(name: str) -> None:
    """``--set protocol.name=X`` selects X's own table; the other tables are ignored."""
    scenario = load_scenario(SCENARIOS / "random50.toml", [f"protocol.name={name}"])
    assert scenario.protocol.name == name
    own = scenario.source["protocol"].get(name, {})
    assert params_to_dict(scenario.protocol.params) == {
        **params_to_dict(get_protocol(name).Params()), **own}


def test_a_protocol_without_a_table_takes_its_defaults() -> None:
    doc = base_doc()
    doc["protocol"] = {"name": "epidemic", "flooding": {"ttl": 3}}
    assert from_dict(doc).protocol.params == get_protocol("epidemic").Params()
    doc["protocol"]["name"] = "flooding"
    assert params_to_dict(from_dict(doc).protocol.params)["ttl"] == 3


def test_seed_override_and_manifest_source() -> None:
    scenario = load_scenario(SCENARIOS / "random50.toml", ["radio.loss=0.1"], seed=99)
    assert scenario.meta.seed == 99 and scenario.radio.loss == 0.1
    assert scenario.source["scenario"]["seed"] == 99
    assert scenario.overrides == ("radio.loss=0.1", "scenario.seed=99")


def test_placements() -> None:
    doc = base_doc()
    doc["nodes"] = {"count": 10, "placement": "grid"}
    doc["workload"] = {}
    grid = make_plan(from_dict(doc)).positions
    assert len(grid) == 10 and len(set(grid.values())) == 10
    assert all(0 <= x <= 300 and 0 <= y <= 100 for x, y in grid.values())
    doc["nodes"] = {"count": 3, "placement": "line", "spacing_m": 100.0, "first_id": 7}
    line = make_plan(from_dict(doc)).positions
    assert line == {7: (50.0, 50.0), 8: (150.0, 50.0), 9: (250.0, 50.0)}
    doc["nodes"] = {"count": 5, "placement": "line", "spacing_m": 100.0}
    with pytest.raises(ScenarioError, match="not fit"):
        make_plan(from_dict(doc))
    doc["nodes"] = {"placement": "explicit", "positions": [{"id": 4, "x": 1.0, "y": 2.0},
                                                           {"id": 9, "x": 3.0, "y": 4.0}]}
    assert make_plan(from_dict(doc)).positions == {4: (1.0, 2.0), 9: (3.0, 4.0)}
    doc["nodes"]["positions"].append({"id": 4, "x": 1.0, "y": 1.0})
    assert "node id 4 appears twice" in error_of(doc)


def test_random_connected_placement_is_connected_and_seeded() -> None:
    doc = base_doc()
    doc["area"] = {"width_m": 500.0, "height_m": 500.0}
    doc["radio"]["range_m"] = 120.0
    doc["nodes"] = {"count": 40, "placement": "random", "connected": True}
    scenario = from_dict(doc)
    plan = make_plan(scenario)
    assert is_connected(compute_links(plan.positions, make_model(scenario.radio)))
    assert make_plan(from_dict(doc)).positions == plan.positions
    doc["radio"]["range_m"] = 1.0
    doc["nodes"]["max_tries"] = 3
    with pytest.raises(ScenarioError, match="no connected placement"):
        make_plan(from_dict(doc))


def test_generated_workload_is_seeded_and_bounded() -> None:
    doc = base_doc()
    doc["nodes"]["count"] = 20
    doc["nodes"]["spacing_m"] = 10.0
    doc["scenario"]["duration_s"] = 100.0
    doc["workload"] = {
        "subscribers": {"fraction": 0.5, "per_node": 2, "t": 1.5,
                        "expressions": [{"expr": "a/b x>1", "weight": 3}, {"expr": "a/#"}]},
        "generator": {"rate_per_s": 2.0, "start_s": 10.0, "stop_s": 60.0, "publishers": [1, 2],
                      "templates": [{"topic": "a/b", "attrs": {
                          "x": {"uniform_int": [0, 9]}, "y": {"uniform_float": [0, 1],
                                                              "decimals": 2},
                          "room": {"choice": ["lab", "hall"]}, "ok": True}}]},
    }
    plan = make_plan(from_dict(doc))
    assert len(plan.subscriptions) == 20 and len({s.node for s in plan.subscriptions}) == 10
    assert all(s.t == 1.5 for s in plan.subscriptions)
    pubs = plan.publications
    assert 60 < len(pubs) < 140  # Poisson, mean 100
    assert all(10.0 < p.t < 60.0 and p.node in (1, 2) for p in pubs)
    assert [p.t for p in pubs] == sorted(p.t for p in pubs)
    for p in pubs:
        attrs = dict(p.event.attrs)
        assert 0 <= attrs["x"] <= 9 and attrs["room"] in ("lab", "hall") and attrs["ok"] is True
        assert attrs["y"] == round(attrs["y"], 2)
    assert make_plan(from_dict(doc)) == plan
    doc["workload"]["generator"].update(process="periodic", count=5)
    periodic = make_plan(from_dict(doc)).publications
    assert [p.t for p in periodic] == [10.0, 10.5, 11.0, 11.5, 12.0]


def test_files_for_contacts_and_waypoints(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("# ONE trace\n5 CONN 1 2 up\n\n9.5 CONN 1 2 down\n")
    (tmp_path / "w.txt").write_text("0 1 0 50\n4 1 40 50  # move east\n")
    doc = base_doc()
    doc["contacts"] = {"file": "c.txt", "events": ["1 CONN 2 3 up"]}
    doc["mobility"] = {"model": "scripted", "file": "w.txt", "tick_s": 0.5}
    scenario = from_dict(doc, base_dir=tmp_path)
    assert [(c.t, c.a, c.b, c.up) for c in scenario.contacts or ()] == [
        (1.0, 2, 3, True), (5.0, 1, 2, True), (9.5, 1, 2, False)]
    assert [(w.t, w.x) for w in scenario.mobility.waypoints] == [(0.0, 0.0), (4.0, 40.0)]
    (tmp_path / "c.txt").write_text("5 CONN 1 2 sideways\n")
    with pytest.raises(ScenarioError, match=r"contacts.file c.txt:1: expected 'time CONN"):
        from_dict(doc, base_dir=tmp_path)
    doc["contacts"] = {"file": "missing.txt"}
    with pytest.raises(ScenarioError, match=r"contacts\.file: cannot read"):
        from_dict(doc, base_dir=tmp_path)


def test_radio_models_and_overrides() -> None:
    doc = base_doc()
    doc["radio"] = {"model": "linear_ramp", "range_m": 100.0, "loss": 0.1, "ramp_start": 0.5,
                    "links": [{"a": 1, "b": 5, "connected": True, "loss": 0.3},
                              {"a": 1, "b": 2, "connected": False}]}
    scenario = from_dict(doc)
    model = make_model(scenario.radio)
    assert model.loss_at(40.0) == 0.1
    assert math.isclose(model.loss_at(75.0) or 0.0, 0.55)
    assert model.loss_at(100.0) is None
    links = compute_links(make_plan(scenario).positions, model, scenario.radio.links)
    assert 2 not in links[1] and links[1][5] == links[5][1] == 0.3
    assert math.isclose(links[2][3], 0.1)  # 50 m apart: flat part of the ramp


def test_log_distance_radio_computes_its_range() -> None:
    doc = base_doc()
    doc["radio"] = {"model": "log_distance", "tx_power_dbm": 15.0, "path_loss_exp": 3.2,
                    "payload_size": 600}
    scenario = from_dict(doc)
    model = make_model(scenario.radio)
    assert scenario.radio.range_m == model.range_m
    assert 100.0 < model.range_m < 300.0
    assert model.loss_at(model.range_m / 2) == pytest.approx(0.0, abs=1e-6)
    assert make_model(dataclasses.replace(scenario.radio, frame_bytes=60)).range_m > model.range_m


def test_the_documented_full_example_is_valid() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
    example = doc.split("## Full example", 1)[1].split("```toml", 1)[1].split("```", 1)[0]
    plan = make_plan(loads_scenario(example))
    assert len(plan.positions) == 60 and plan.publications


def test_contains_predicates_and_half_open_pairs_give_brvst_workload() -> None:
    """BRVST's workload (Li and Wang 2014, §III, §V): an event's range pair ``[a, b + 1)``
    and a subscription's containment ``x_lo >= c x_hi <= d + 1`` for integer ranges
    ``a..b`` and ``c..d`` drawn as two sorted endpoints (equal endpoints stay non-empty)."""
    pair = {"low": 0, "high": 9, "draw": "sorted", "half_open": True}
    doc = base_doc()
    doc["workload"] = {
        "arrivals": {"rate_per_s": 20.0, "start_s": 0.0, "stop_s": 9.0, "templates": [
            {"topic": "brvst", "pick": {"names": {"prefix": "a", "count": 3}, "k": [1, 3],
                                        "predicate": {"contains": pair}}}]},
        "generator": {"rate_per_s": 20.0, "start_s": 0.0, "stop_s": 9.0, "templates": [
            {"topic": "brvst", "pick": {"names": {"prefix": "a", "count": 3}, "k": [1, 3],
                                        "value": {"range": pair}}}]},
    }
    plan = make_plan(from_dict(doc))
    assert len(plan.subscriptions) > 50 and len(plan.publications) > 50
    for s in plan.subscriptions:
        by_attr: dict[str, dict[str, Any]] = {}
        for p in s.subscription.predicates:
            by_attr.setdefault(p.attr[:-3], {})[p.attr[-2:]] = p
        assert 1 <= len(by_attr) <= 3
        for preds in by_attr.values():
            lo, hi = preds["lo"], preds["hi"]
            assert (lo.op, hi.op) == (Op.GE, Op.LE)
            assert 0 <= lo.value < hi.value <= 10
    widths = set()
    for p in plan.publications:
        attrs = dict(p.event.attrs)
        for name in {a[:-3] for a in attrs}:
            lo, hi = attrs[f"{name}_lo"], attrs[f"{name}_hi"]
            assert isinstance(lo, int) and 0 <= lo < hi <= 10
            widths.add(hi - lo)
    assert 1 in widths  # equal endpoints a..a give [a, a + 1), not an empty pair
    doc["workload"]["generator"]["templates"][0]["pick"]["value"]["range"] = {
        "low": 0.0, "high": 9.0, "half_open": True}
    assert "half_open: only for integer pairs" in error_of(doc)
