"""The social contact-trace generator, the ONE writer/reader and the scenario hooks."""

from __future__ import annotations

import io
import statistics
from collections import Counter
from pathlib import Path

import pytest

from meshsim.scenario import ScenarioError
from meshsim.scenario.load import from_dict
from meshsim.scenario.plan import make_plan
from meshsim.traces import (
    PRESETS,
    SocialModel,
    TraceModelError,
    degree_centrality,
    generate,
    preset,
    read_one,
    trace_stats,
    write_one,
)
from meshsim.traces.__main__ import main as traces_main
from meshsim.traces.social import communities_of
from meshsim.traces.stats import intervals

SMALL = SocialModel(nodes=30, duration_s=2 * 86400.0, contacts=3000, communities=3)


@pytest.fixture(scope="module")
def small() -> list:  # type: ignore[type-arg]
    return generate(SMALL, seed=7)


def test_deterministic_per_seed(small: list) -> None:  # type: ignore[type-arg]
    assert generate(SMALL, seed=7) == small
    assert generate(SMALL, seed=8) != small


def test_calibrated_contact_count_and_well_formed(small: list) -> None:  # type: ignore[type-arg]
    spans = intervals(small)
    assert abs(len(spans) - SMALL.contacts) <= 0.02 * SMALL.contacts
    assert sum(c.up for c in small) == sum(not c.up for c in small) == len(spans)
    assert all(0 <= c.t <= SMALL.duration_s for c in small)
    assert [c.t for c in small] == sorted(c.t for c in small)
    last_end: dict[tuple[int, int], float] = {}
    for start, end, a, b in spans:  # a pair's contacts never overlap
        assert end >= start and 0 <= a < b < SMALL.nodes
        assert start >= last_end.get((a, b), -1.0)
        last_end[(a, b)] = end


def test_social_structure(small: list) -> None:  # type: ignore[type-arg]
    spans = intervals(small)
    community = communities_of(SMALL, 7)
    intra = sum(1 for _, _, a, b in spans if community[a] == community[b])
    sizes = Counter(community)
    intra_pairs = sum(n * (n - 1) // 2 for n in sizes.values())
    all_pairs = SMALL.nodes * (SMALL.nodes - 1) // 2
    # communities: intra-community pairs meet far more often than their share of pairs
    assert intra / len(spans) > 1.5 * intra_pairs / all_pairs
    # heterogeneous pair rates: contacts per pair are very unequal
    per_pair = Counter((a, b) for _, _, a, b in spans)
    counts = list(per_pair.values())
    assert statistics.pstdev(counts) / statistics.fmean(counts) > 1.0
    # heavy-tailed inter-contact times: far more spread than an exponential (CV = 1)
    stats = trace_stats(small, SMALL.nodes)
    assert stats.ict_mean_s > 2 * stats.ict_median_s
    # degree centrality is in (0, 1] and unequal
    cent = degree_centrality(small)
    assert all(0 < v <= 1 for v in cent.values()) and len(set(cent.values())) > 3


def test_presets_and_overrides() -> None:
    assert PRESETS["haggle"].nodes == 79 and PRESETS["haggle"].contacts == 67_360
    assert PRESETS["mit"].nodes == 97
    half = preset("haggle", days=0.5)
    assert half.duration_s == 43200.0 and half.contacts == round(67_360 / 6)
    with pytest.raises(TraceModelError, match="unknown trace preset"):
        preset("infocom")
    with pytest.raises(TraceModelError, match="ict_shape"):
        preset("haggle", ict_shape=0.5)
    with pytest.raises(TraceModelError):
        preset("haggle", bogus=1)


def test_one_format_round_trip(small: list, tmp_path: Path) -> None:  # type: ignore[type-arg]
    buf = io.StringIO()
    n = write_one(small, buf, header="test trace")
    assert n == len(small)
    path = tmp_path / "t.one"
    path.write_text(buf.getvalue())
    back = read_one(path)
    assert [(c.a, c.b, c.up) for c in back] == [(c.a, c.b, c.up) for c in small]
    assert all(abs(x.t - y.t) < 1e-3 for x, y in zip(back, small, strict=True))
    path.write_text("12 CONN 1 2 sideways\n")
    with pytest.raises(ScenarioError, match=r"t\.one:1"):
        read_one(path)


def test_cli_generate_stats_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.one"
    assert traces_main(["generate", "mit", "--days", "0.5", "--out", str(out)]) == 0
    assert "contacts" in capsys.readouterr().out
    assert traces_main(["stats", str(out)]) == 0
    assert "inter-contact" in capsys.readouterr().out
    assert traces_main(["stats", str(tmp_path / "missing.one")]) == 2
    assert traces_main(["generate", "mit", "--contacts", "0", "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("meshsim.traces: ")


def scenario_doc(**contacts: object) -> dict:  # type: ignore[type-arg]
    return {
        "scenario": {"name": "g", "duration_s": 43200.0},
        "area": {"width_m": 100.0, "height_m": 100.0},
        "nodes": {"placement": "grid", "count": 97, "first_id": 0},
        "contacts": {"generate": {"preset": "mit", "days": 0.5, **contacts}},
        "protocol": {"name": "bsub"},
        "workload": {"generator": {
            "rate_per_s": 0.01, "publisher_weight": "contact_degree",
            "templates": [{"topic": "NewMoon", "attrs": {"body": {"random_text": [1, 140]}}}],
        }},
    }


def test_scenario_generated_contacts_and_weighted_workload() -> None:
    sc = from_dict(scenario_doc())
    assert sc.contacts and all(c.a in sc.nodes.ids for c in sc.contacts)
    plan = make_plan(sc)
    pubs = plan.publications
    assert pubs and all(1 <= len(str(p.event.attrs["body"])) <= 140 for p in pubs)
    cent = degree_centrality(sc.contacts)
    assert all(cent.get(p.node, 0) > 0 for p in pubs)  # never a node without contacts
    with pytest.raises(ScenarioError, match=r"contacts\.generate\.preset"):
        from_dict(scenario_doc(preset="nope"))
    bad = scenario_doc()
    bad["nodes"]["count"] = 1
    with pytest.raises(ScenarioError, match=r"contacts\.generate"):
        from_dict(bad)
    bad = scenario_doc()
    bad["workload"]["generator"]["templates"][0]["attrs"]["body"] = {"random_text": [5, 2]}
    with pytest.raises(ScenarioError, match="random_text"):
        from_dict(bad)
