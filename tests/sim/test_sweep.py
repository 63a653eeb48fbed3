"""``meshsim sweep``: the file, its grid points, resuming, and the CLI's one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from simhelpers import SCENARIOS

from meshsim.sweep import SweepError, expand, load_sweep
from meshsim.sweep.point import resolve, run_point
from meshsim.sweep.runner import first_seeds, run_sweep

SWEEP = f"""
[sweep]
name = "t"
scenario = "{SCENARIOS / 'epidemic-partition.toml'}"
seeds = [1, 2]
set = {{ "scenario.duration_s" = 200.0 }}

[[sweep.axis]]
name = "protocol"
levels = [
  {{ value = "epidemic", set = {{ "protocol.name" = "epidemic" }} }},
  {{ value = "flooding", set = {{ "protocol.name" = "flooding" }} }},
]

[[sweep.axis]]
name = "ttl"
values = [60, 600]
keys = ["protocol.epidemic.ttl_s"]
set = {{ "evaluate.deadline_s" = "= ttl * 2", "scenario.drain_s" = "= ttl / 60 + 1" }}

[[grid]]
name = "main"
axes = ["protocol", "ttl"]

[[grid]]
name = "extra"
points = [{{ protocol = "epidemic" }}]
pin = {{ ttl = 600 }}
seeds = [7]
"""


def write(tmp_path: Path, text: str = SWEEP) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_points_values_overrides_and_evaluate(tmp_path: Path) -> None:
    points = expand(load_sweep(write(tmp_path)))
    assert len(points) == 2 * 2 * 2 + 1
    first = points[0]
    assert first.id == "main.protocol-epidemic.ttl-60.s1"
    assert first.values == {"protocol": "epidemic", "ttl": 60}
    assert first.overrides == ('scenario.duration_s=200.0', 'protocol.name="epidemic"',
                               "protocol.epidemic.ttl_s=60", "scenario.drain_s=2.0",
                               "scenario.seed=1")
    assert first.evaluate == {"deadline_s": 120}
    extra = points[-1]
    assert (extra.id, extra.seed, extra.values) == (
        "extra.protocol-epidemic.ttl-600.s7", 7, {"protocol": "epidemic", "ttl": 600})


def test_a_quick_plan_takes_the_first_seeds_of_every_block(tmp_path: Path) -> None:
    spec = load_sweep(write(tmp_path, SWEEP.replace("seeds = [1, 2]", "seeds = [5, 3, 9]")))
    quick = first_seeds(spec, expand(spec), 2)
    assert sorted({(p.block, p.seed) for p in quick}) == [("extra", 7), ("main", 3), ("main", 5)]
    assert len(quick) == 2 * 2 * 2 + 1
    assert len(first_seeds(spec, expand(spec), 3)) == 2 * 2 * 3 + 1


@pytest.mark.parametrize(("change", "message"), [
    (("name = \"ttl\"", "name = \"seed\""), "sweep.axis[1].name: must be an identifier"),
    (("axes = [\"protocol\", \"ttl\"]", "axes = [\"protocol\", \"tl\"]"),
     "grid[0].axes: unknown axis 'tl'"),
    (("= ttl * 2", "= tll * 2"), "unknown name 'tll'"),
    (("= ttl * 2", "= __import__('os')"), "unknown name '__import__'"),
    (("= ttl * 2", "= abs.__class__"), "only numbers, axis names"),
    (("pin = { ttl = 600 }", "pin = { ttl = 601 }"), "601 is not a level of axis 'ttl'"),
    (("seeds = [1, 2]", "seeds = 0"), "sweep.seeds: must be >= 1"),
    (("[[grid]]\nname = \"main\"", "[[grid]]\nname = \"extra\""), "block name 'extra'"),
    (("seeds = [1, 2]", "seeds = [1, 2]\ntelemetry_format = \"csv\""),
     "sweep.telemetry_format: must be one of jsonl, parquet (got 'csv')"),
    (("seeds = [1, 2]", "seeds = [1, 2]\ntelemetry_format = \"parquet\"\ntier = \"vmesh\""),
     "sweep.telemetry_format: a virtual-mesh run writes the daemons' JSON Lines"),
])
def test_bad_sweep_files_name_the_key(tmp_path: Path, change: tuple[str, str],
                                      message: str) -> None:
    with pytest.raises(SweepError, match=re.escape(message)):
        expand(load_sweep(write(tmp_path, SWEEP.replace(*change))))


def test_resume_keeps_finished_points_and_reruns_changed_ones(tmp_path: Path) -> None:
    spec = load_sweep(write(tmp_path))
    out = tmp_path / "out"
    first = run_sweep(spec, out, jobs=1, only="main.protocol-epidemic.ttl-60.s", log=lambda m: None)
    assert [r.status for r in first.values()] == ["done", "done"]
    manifest = json.loads((out / "runs" / "main.protocol-epidemic.ttl-60.s1" /
                           "manifest.json").read_text())
    assert manifest["varied"] == {"protocol": "epidemic", "ttl": 60}
    assert manifest["evaluate"] == {"deadline_s": 120}
    assert manifest["sweep"]["point"] == "main.protocol-epidemic.ttl-60.s1"
    again = run_sweep(spec, out, jobs=1, only=["main.protocol-epidemic.ttl-60.s1",
                                               "main.protocol-epidemic.ttl-60.s2"],
                      log=lambda m: None)
    assert [r.status for r in again.values()] == ["kept", "kept"]
    # a changed input (here the scenario's duration) runs the point again
    changed = load_sweep(write(tmp_path, SWEEP.replace("200.0", "190.0")))
    (point,) = [p for p in expand(changed) if p.id == "main.protocol-epidemic.ttl-60.s1"]
    assert run_point(changed, point, out).status == "done"
    doc = json.loads((out / "sweep.json").read_text())
    states = {p["id"]: p["status"] for p in doc["points"]}
    assert states["main.protocol-epidemic.ttl-60.s1"] == "kept"
    assert states["main.protocol-flooding.ttl-600.s2"] == "pending"


def test_cli_runs_reports_progress_and_answers_bad_input_in_one_line(tmp_path: Path) -> None:
    def meshsim(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "meshsim.cli", *args],
                              capture_output=True, text=True, timeout=300, check=False)

    path = write(tmp_path, SWEEP.replace("seeds = [1, 2]", "seeds = [1]"))
    done = meshsim("sweep", str(path), "--out", str(tmp_path / "o"), "--jobs", "2",
                   "--only", "main")
    assert done.returncode == 0, done.stderr
    assert "[4/4]" in done.stdout and "left" in done.stdout
    assert "4 of 4 points finished" in done.stdout
    bad = write(tmp_path, SWEEP.replace('keys = ["protocol.epidemic.ttl_s"]',
                                        'keys = ["protocol.epidemic.ttl"]'))
    proc = meshsim("sweep", str(bad), "--out", str(tmp_path / "o2"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "protocol.epidemic.ttl: unknown parameter" in proc.stderr
    assert "Traceback" not in proc.stderr
    zero = meshsim("sweep", str(path), "--out", str(tmp_path / "o3"), "--seeds", "0")
    assert zero.returncode == 2 and zero.stderr.strip() == (
        "meshsim sweep: --seeds must be at least 1"), zero.stderr


def test_the_digest_follows_the_files_a_scenario_names(tmp_path: Path) -> None:
    from meshsim.sweep.point import input_digest, resolve

    (tmp_path / "trace.one").write_text("0 CONN 1 2 up\n50 CONN 1 2 down\n")
    text = (SCENARIOS / "epidemic-partition.toml").read_text()
    scenario = tmp_path / "s.toml"
    scenario.write_text(text.replace("[contacts]", '[contacts]\nfile = "trace.one"', 1))
    sweep = write(tmp_path, SWEEP.replace(str(SCENARIOS / "epidemic-partition.toml"),
                                          str(scenario)))
    spec = load_sweep(sweep)
    point = expand(spec)[0]
    before = input_digest(resolve(spec, point)[0], point)
    assert before == input_digest(resolve(spec, point)[0], point)
    (tmp_path / "trace.one").write_text("0 CONN 1 2 up\n60 CONN 1 2 down\n")
    assert input_digest(resolve(spec, point)[0], point) != before


def test_a_derive_hook_may_define_dataclasses(tmp_path: Path) -> None:
    """The hook's file is loaded as a module registered by name, as an import would be
    (bench/geo_voids.py's fields are dataclasses; an unregistered module broke them)."""
    (tmp_path / "hook.py").write_text(
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n\n"
        "@dataclass(frozen=True)\nclass Rate:\n    per_s: float\n\n"
        "def derive(scenario, point):\n"
        "    return [f'scenario.duration_s={Rate(point.seed * 100.0).per_s}']\n")
    spec = load_sweep(write(tmp_path, SWEEP.replace('seeds = [1, 2]\n',
                                                    'seeds = [1, 2]\nderive = "hook.py"\n')))
    point = next(p for p in expand(spec) if p.seed == 2)
    scenario, derived = resolve(spec, point)
    assert derived == ("scenario.duration_s=200.0",) and scenario.meta.duration_s == 200.0


def test_a_sweep_named_relative_to_the_working_directory_names_its_files_absolutely(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A Spark task runs in its worker's directory: a relative sweep path would name the
    # scenarios relative to a directory the worker does not have ('cannot read scenario').
    write(tmp_path)
    monkeypatch.chdir(tmp_path.parent)
    spec = load_sweep(Path(tmp_path.name) / "sweep.toml")
    assert spec.path.is_absolute() and spec.path == tmp_path / "sweep.toml"
    assert all(point.scenario.is_absolute() for point in expand(spec))


def test_a_parquet_sweep_writes_one_telemetry_file_per_run(tmp_path: Path) -> None:
    """``telemetry_format = "parquet"``: a point's run is ``telemetry.parquet`` (what
    mesheval reads as it reads node files), not a file per node."""
    pytest.importorskip("pyarrow")
    spec = load_sweep(write(tmp_path, SWEEP.replace(
        "seeds = [1, 2]", "seeds = [1, 2]\ntelemetry_format = \"parquet\"")))
    assert spec.telemetry_format == "parquet"
    out = tmp_path / "out"
    done = run_sweep(spec, out, jobs=1, only="main.protocol-flooding.ttl-60.s1",
                     log=lambda m: None)
    assert [r.status for r in done.values()] == ["done"]
    rundir = out / "runs" / "main.protocol-flooding.ttl-60.s1"
    manifest = json.loads((rundir / "manifest.json").read_text())
    assert manifest["files"] == ["telemetry.parquet"] and manifest["records"] > 0
    assert manifest["telemetry_format"] == "parquet" and not list(rundir.glob("*.jsonl"))
