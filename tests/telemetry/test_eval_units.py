"""The parts of mesheval that need no Spark: statistics, manifests, energy, aggregation,
the report, the sequencer and the command lines' answers to bad input."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mesheval.aggregate import aggregate
from mesheval.cli import main
from mesheval.energy import RadioModel
from mesheval.manifest import ManifestError, parse_manifest, read_manifest
from mesheval.report import cell, headline, write_report
from mesheval.sequencer import Sequencer
from mesheval.settings import RunSettings
from mesheval.stats import mean_ci, t_cdf, t_quantile


@pytest.mark.parametrize(("df", "expected"), [(1, 12.7062), (2, 4.3027), (4, 2.7764),
                                               (9, 2.2622), (29, 2.0452), (1000, 1.9623)])
def test_t_quantile_matches_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_mean_ci_by_hand() -> None:
    ci = mean_ci([1, 2, 3, 4, 5, None, math.nan])
    # s = sqrt(2.5), half width = 2.7764 * s / sqrt(5)
    assert (ci.mean, ci.n) == (3.0, 5)
    assert ci.half_width == pytest.approx(2.7764 * math.sqrt(2.5) / math.sqrt(5), rel=1e-4)
    assert mean_ci([7.0]).half_width is None and mean_ci([7.0]).mean == 7.0
    assert mean_ci([]).mean is None


@settings(max_examples=150, deadline=None)
@given(st.floats(min_value=-50, max_value=50), st.integers(min_value=1, max_value=200))
def test_t_cdf_is_symmetric_and_monotone(t: float, df: int) -> None:
    assert t_cdf(t, df) + t_cdf(-t, df) == pytest.approx(1.0, abs=1e-9)
    assert t_cdf(t, df) <= t_cdf(t + 0.5, df) + 1e-12


def test_energy_matches_hesper_checks() -> None:
    # Table 4.1 (Zheng 2008, §4.4.1): a 320-bit message
    assert RadioModel(70).tx_joules(40) == pytest.approx(31.68e-6)
    assert RadioModel(100).tx_joules(40) == pytest.approx(57.6e-6)
    assert RadioModel.rx_joules(40) == pytest.approx(16e-6)
    assert RadioModel(70).tx_joules(40, distance_m=30) == pytest.approx(320 * 59e-9)


SIM_MANIFEST = {
    "run": "demo-s7-35f43145", "scenario_name": "demo", "seed": 7, "protocol": "flooding",
    "params": {"ttl": 8}, "warmup_s": 30.0, "range_m": 70, "tier": "simulation",
    "overrides": ["radio.range_m=70", "scenario.seed=7"],
}


def test_manifest_as_the_simulator_writes_it(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(SIM_MANIFEST))
    info = read_manifest(tmp_path)
    assert info is not None
    assert (info.run, info.scenario, info.seed, info.protocol) == (
        "demo-s7-35f43145", "demo", 7, "flooding")
    assert (info.warmup_s, info.range_m, info.tier) == (30.0, 70.0, "simulation")
    assert (info.param_name, info.param_value, info.param_number) == ("radio.range_m", "70", 70)
    assert read_manifest(tmp_path / "missing") is None


def test_manifest_varied_and_nested_forms() -> None:
    nested = parse_manifest({"scenario": {"meta": {"name": "n", "warmup_s": 5}},
                             "protocol": {"name": "hesper", "params": {"k": 2}},
                             "varied": {"subscribers": 40}})
    assert (nested.scenario, nested.protocol, nested.warmup_s) == ("n", "hesper", 5.0)
    assert (nested.param_name, nested.param_value) == ("subscribers", "40")
    plain = parse_manifest({"params": {"b": 1, "a": 2}})
    assert (plain.param_name, plain.param_value) == ("params", '{"a":2,"b":1}')
    assert plain.param_number is None


@pytest.mark.parametrize("doc", [[1, 2], {"seed": "7"}, {"warmup_s": -1},
                                 {"warmup_s": math.inf}, {"seed": True}, {"t0_ns": -1},
                                 {"t0_ns": 1.5}, {"t0_ns": True}])
def test_bad_manifests_are_named_errors(doc: Any) -> None:
    with pytest.raises(ManifestError):
        parse_manifest(doc, "m.json")


def test_unreadable_manifest_file(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match=r"manifest\.json"):
        read_manifest(tmp_path)


def _settings(run: str, protocol: str, value: str, seed: int) -> RunSettings:
    return RunSettings(run=run, rundir=0, protocol=protocol, scenario="s", seed=seed,
                       param_name="range", param_value=value, param_number=float(value),
                       tier="simulation", warmup_s=0.0, range_m=100.0, t0_ns=0, cutoff_ns=0,
                       end_ns=1, nodes=3, records=10)


def test_aggregate_over_seeds() -> None:
    settings_ = [_settings(f"a{i}", "flooding", "70", i) for i in range(3)]
    settings_ += [_settings("b0", "hesper", "70", 0)]
    runs: dict[str, dict[str, Any]] = {
        "a0": {"delivery_ratio": 0.8, "latency_mean_s": None},
        "a1": {"delivery_ratio": 0.9, "latency_mean_s": 2.0},
        "a2": {"delivery_ratio": 1.0, "latency_mean_s": 4.0},
        "b0": {"delivery_ratio": 0.5},
    }
    groups = {g["protocol"]: g for g in aggregate(settings_, runs)}
    dr = groups["flooding"]["metrics"]["delivery_ratio"]
    assert dr["mean"] == pytest.approx(0.9) and dr["n"] == 3
    assert dr["half_width"] == pytest.approx(4.3027 * 0.1 / math.sqrt(3), rel=1e-4)
    lat = groups["flooding"]["metrics"]["latency_mean_s"]
    assert (lat["mean"], lat["n"]) == (3.0, 2)  # the run without deliveries is left out
    assert groups["hesper"]["metrics"]["delivery_ratio"]["half_width"] is None
    assert groups["flooding"]["seeds"] == [0, 1, 2]


def test_tiers_are_separate_configurations() -> None:
    """The same scenario in the simulator and on the virtual mesh is not two seeds."""
    from dataclasses import replace

    sim = _settings("s0", "flooding", "70", 0)
    vm = replace(_settings("v0", "flooding", "70", 0), tier="vmesh")
    groups = aggregate([sim, vm], {"s0": {"delivery_ratio": 1.0}, "v0": {"delivery_ratio": 0.5}})
    assert [(g["tier"], g["runs"], g["metrics"]["delivery_ratio"]["mean"]) for g in groups] == [
        ("simulation", ["s0"], 1.0), ("vmesh", ["v0"], 0.5)]


def test_cell_formatting() -> None:
    assert cell({"mean": 0.8333, "half_width": 0.0412}) == "0.833 ± 0.0412"
    assert cell({"mean": 12.0, "half_width": None}) == "12"
    assert cell({"mean": None}) == "n/a"
    assert cell({"mean": 31.68e-6, "half_width": None}, 1e6) == "31.7"


def test_plots_keep_a_protocols_scenarios_apart(tmp_path: Path) -> None:
    """One protocol in two scenarios at the same parameter values: two series, no mix-up."""
    from mesheval.plots import _by_series, metric_vs_param, protocol_comparison

    settings_ = [_settings(f"{sc}{v}", "hesper", v, i) for i, (sc, v) in
                 enumerate([("I", "20"), ("I", "80"), ("II", "20"), ("II", "80")])]
    settings_ = [replace(s, scenario=s.run[:-2]) for s in settings_]
    runs = {s.run: {"delivery_ratio": 1.0 if s.scenario == "I" else 0.5} for s in settings_}
    groups = aggregate(settings_, runs)
    series = _by_series(groups)
    assert sorted(series) == ["hesper (I)", "hesper (II)"]
    assert {g["metrics"]["delivery_ratio"]["mean"] for g in series["hesper (II)"]} == {0.5}
    doc = {"groups": groups}
    assert metric_vs_param(doc, [("delivery_ratio", "ratio")], tmp_path / "a.png") is not None
    assert protocol_comparison(doc, tmp_path / "b.png") is not None


def test_report_from_a_document(tmp_path: Path) -> None:
    settings_ = [_settings(f"a{i}", "flooding", v, i) for i, v in enumerate(["70", "100"])]
    runs = {"a0": {"delivery_ratio": 0.8}, "a1": {"delivery_ratio": 0.9}}
    doc = {
        "runs": [{**s.as_dict(), "metrics": runs[s.run]} for s in settings_],
        "groups": aggregate(settings_, runs), "window_s": 10, "cdf_points": [0, 0.5, 1],
        "latency_cdf_groups": [{"protocol": "flooding", "scenario": "s", "param_name": "range",
                                "param_value": "70", "quantiles": [0.1, 0.2, 0.9], "n": 3}],
        "nodes": [{"run": "a0", "node": 1, "x": 0.0, "y": 0.0, "tx": 3},
                  {"run": "a0", "node": 2, "x": 50.0, "y": 10.0, "tx": 1}],
        "windows": [{"run": "a0", "window_start_s": 0.0, "delivery_ratio": 0.5}],
        "quality": {"files": [{"path": "x.jsonl", "lines": 3, "valid": 2, "invalid": 1,
                               "errors": {"unknown event": 1}}],
                    "lines_total": 3, "invalid_total": 1},
    }
    files = write_report(doc, tmp_path)
    assert {"report.md", "report.html", "delivery_ratio.png", "latency_cdf.png", "load_map.png",
            "protocols.png", "timeline.png", "overhead.png"} <= set(files)
    assert (tmp_path / "load_map.png").read_bytes()[:4] == b"\x89PNG"
    md = (tmp_path / "report.md").read_text()
    assert "| flooding | s | simulation | range=70 | 1 | 0.8 |" in md
    assert "unknown event: 1" in md
    header, rows = headline(doc)
    assert header[5] == "delivery" and len(rows) == 2


def test_sequencer_duplicates_and_gaps() -> None:
    seq = Sequencer()
    key = ("run", 1, 7)
    assert [seq.admit(key, r) for r in (0, 1, 1, 3, 5, 0)] == [True, True, False, True, True,
                                                               False]
    assert seq.missing() == 2  # 2 and 4
    assert seq.gaps() == {"run/1/7": [2, 4]}
    restored = Sequencer.from_json(json.loads(json.dumps(seq.to_json())))
    assert not restored.admit(key, 3) and restored.admit(key, 2) and restored.admit(key, 4)
    assert restored.missing() == 0
    assert seq.admit(("run", 1, 8), 0)  # a new boot epoch starts a new sequence


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=60), max_size=120))
def test_sequencer_admits_each_number_once(recs: list[int]) -> None:
    seq = Sequencer()
    admitted = [r for r in recs if seq.admit(("r", 1, 1), r)]
    assert sorted(admitted) == sorted(set(recs))
    top = max(recs, default=-1)
    assert seq.missing() == (top + 1 - len(set(recs)) if recs else 0)
    gaps = [r for r in range(top) if r not in set(recs)]
    assert seq.gaps().get("r/1/1", []) == gaps[:10]
    restored = Sequencer.from_json(json.loads(json.dumps(seq.to_json())))
    assert restored.missing() == seq.missing()
    assert not any(restored.admit(("r", 1, 1), r) for r in set(recs))


def test_sequencer_real_loss_costs_no_memory_per_record() -> None:
    """A gap that is never filled (records a daemon's spool deleted before they were
    shipped) stays one run, however many records follow it; late records fill gaps."""
    seq = Sequencer()
    key = ("run", 1, 7)
    for r in [*range(0, 10), *range(1000, 50000)]:  # 10..999 lost for good
        assert seq.admit(key, r)
    assert seq.missing() == 990
    assert seq.to_json() == {"run/1/7": [10, [[1000, 49999]]]}
    for r in range(20, 30):  # merely late: they arrive after all and fill part of the gap
        assert seq.admit(key, r)
    assert seq.missing() == 980 and not seq.admit(key, 25) and not seq.admit(key, 49999)
    assert seq.gaps()["run/1/7"] == list(range(10, 20))
    assert Sequencer.from_json(json.loads(json.dumps(seq.to_json()))).to_json() == seq.to_json()


def test_sequencer_reads_the_older_state_format() -> None:
    """State files of earlier collectors listed every number seen above the first gap."""
    seq = Sequencer.from_json({"run/1/7": [2, [4, 5, 6, 9]]})
    assert seq.to_json() == {"run/1/7": [2, [[4, 6], [9, 9]]]}
    assert seq.missing() == 4  # 2, 3, 7, 8
    assert seq.admit(("run", 1, 7), 3) and seq.admit(("run", 1, 7), 2)
    assert seq.to_json() == {"run/1/7": [7, [[9, 9]]]}


@pytest.mark.parametrize("argv", [
    [],
    ["/nonexistent/rundir", "--out", "/tmp/x"],
    ["--follow", "/nonexistent/spool", "--out", "/tmp/x"],
    ["--out", "/tmp/x", "--warmup", "-3", "."],
    ["--out", "/tmp/x", "--window", "nan", "."],
    ["--out", "/tmp/x", "--message-bits", "0", "."],
    ["--out", "/tmp/x", "--message-bits", "3.5", "."],
    ["collect", "--broker", "nohost", "--topic", "t", "--spool", "/tmp/x"],
    ["collect", "--broker", "h:99999", "--topic", "t", "--spool", "/tmp/x"],
])
def test_bad_command_lines_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = int(exc.code or 0)
    assert status == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 3


def test_a_sweeps_report_has_a_column_per_axis_and_plots_over_the_numeric_one() -> None:
    from mesheval.plots import sweep_view
    from mesheval.report import headline

    def g(protocol: str, subs: int, size: int) -> dict[str, Any]:
        return {"protocol": protocol.lower(), "scenario": "s", "tier": "simulation",
                "param_name": "protocol,subscribers,nodes",
                "param_value": f"{protocol},{subs},{size}", "param_number": None,
                "varied": {"protocol": protocol, "subscribers": subs, "nodes": size},
                "runs": ["a"], "metrics": {}}

    doc = {"groups": [g("A", 20, 4000), g("A", 80, 4000), g("B", 20, 8000)]}
    header, rows = headline(doc)
    assert header[3:6] == ["protocol", "subscribers", "nodes"]
    assert rows[2][3:6] == ["B", "20", "8000"]
    view = sweep_view(doc)["groups"]
    # x: the numeric axis with the most values (subscribers: 20, 80); series: the others
    assert [(v["param_name"], v["param_number"], v["protocol"]) for v in view] == [
        ("subscribers", 20.0, "protocol=A nodes=4000"), ("subscribers", 80.0,
                                                         "protocol=A nodes=4000"),
        ("subscribers", 20.0, "protocol=B nodes=8000")]


def test_the_parquet_cache_stamp_follows_the_record_schema(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache written before a field was added must not be reused (it lacks the column)."""
    from pyspark.sql.types import StringType, StructField, StructType

    import mesheval.load as load

    (tmp_path / "n.jsonl").write_text("{}\n")
    files = [tmp_path / "n.jsonl"]
    now = load._fingerprint(tmp_path, files)
    monkeypatch.setattr(load, "record_schema",
                        lambda *a, **k: StructType([StructField("run", StringType())]))
    assert load._fingerprint(tmp_path, files) != now
