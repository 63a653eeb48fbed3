"""The ``meshsim`` CLI: user errors are one line on stderr and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from simhelpers import SCENARIOS

GOOD = (SCENARIOS / "epidemic-partition.toml").read_text()


def meshsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meshsim.cli", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("[scenario\nname = 1", ("invalid TOML",)),
        (GOOD.replace("[area]", "[area]\ncolour = \"red\""), ("area.colour", "unknown key")),
        (GOOD.replace("duration_s = 200.0", "duration_s = \"long\""),
         ("scenario.duration_s", "expected a number")),
        (GOOD.replace('expr = "alarms/fire"', 'expr = "alarms/fire level>"'),
         ("workload.subscriptions[1].expr",)),
        (GOOD.replace('name = "epidemic"', 'name = "no-such-protocol"'),
         ("protocol.name", "unknown protocol 'no-such-protocol'")),
        (GOOD.replace("ttl_s = 600.0", "ttl_s = -1.0"), ("protocol.epidemic.ttl_s",)),
        (GOOD.replace("ttl_s = 600.0", "jitter = 0.1"),
         ("protocol.epidemic.jitter: unknown parameter (known: ",)),
        (GOOD.replace('"120 CONN 5 6 up"', '"120 CONN 5 up"'), ("contacts.events[8]",)),
    ],
    ids=["bad-toml", "unknown-key", "wrong-type", "bad-expression", "unknown-protocol",
         "bad-param", "unknown-param", "bad-contact"],
)
def test_bad_scenarios(tmp_path: Path, text: str, needles: tuple[str, ...]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert_one_line_error(meshsim("validate", str(path)), *needles)
    assert_one_line_error(meshsim("simulate", str(path), "--out", str(tmp_path / "o")),
                          *needles)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_bad_override_and_missing_file(tmp_path: Path) -> None:
    scenario = str(SCENARIOS / "epidemic-partition.toml")
    assert_one_line_error(meshsim("validate", scenario, "--set", "radio.range_m=\"far\""),
                          "radio.range_m")
    assert_one_line_error(meshsim("validate", scenario, "--set", "nonsense"), "--set")
    assert_one_line_error(meshsim("validate", str(tmp_path / "missing.toml")), "cannot read")
    assert_one_line_error(meshsim("simulate", scenario), "--out")
    # one scenario, any protocol: the selected one's unknown parameter is still one line
    assert_one_line_error(meshsim("validate", scenario, "--set", "protocol.name=hesper",
                                  "--set", "protocol.hesper.ttl_s=5"),
                          "protocol.hesper.ttl_s: unknown parameter (known: ")


def test_any_protocol_on_any_scenario(tmp_path: Path) -> None:
    proc = meshsim("simulate", str(SCENARIOS / "epidemic-partition.toml"), "--set",
                   "protocol.name=flooding", "--out", str(tmp_path / "run"), "-q")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["protocol"] == "flooding" and "ttl" in manifest["params"]


def test_simulate_refuses_a_used_run_dir(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    proc = meshsim("simulate", str(SCENARIOS / "epidemic-partition.toml"), "--out",
                   str(tmp_path))
    assert_one_line_error(proc, "not empty")


def test_validate_and_simulate_succeed(tmp_path: Path) -> None:
    scenario = str(SCENARIOS / "epidemic-partition.toml")
    proc = meshsim("validate", scenario)
    assert proc.returncode == 0 and "ok" in proc.stdout and not proc.stderr
    proc = meshsim("simulate", scenario, "--out", str(tmp_path / "run"), "--seed", "5")
    assert proc.returncode == 0, proc.stderr
    assert "delivered     5 of 5 expected" in proc.stdout
    assert (tmp_path / "run" / "manifest.json").exists()
    proc = meshsim("simulate", scenario, "--out", str(tmp_path / "quiet"), "--quiet")
    assert proc.returncode == 0 and proc.stdout == ""


def test_run_refuses_bad_input_before_touching_devices(tmp_path: Path) -> None:
    out = str(tmp_path / "r")
    assert_one_line_error(meshsim("run", str(tmp_path / "missing.toml"), "--out", out),
                          "cannot read")
    assert_one_line_error(meshsim("run", str(SCENARIOS / "epidemic-partition.toml")), "--out")
    bad = tmp_path / "bad.toml"
    bad.write_text('[scenario]\nname = "x"\n')
    assert_one_line_error(meshsim("run", str(bad), "--out", out), "scenario.duration_s")
    assert_one_line_error(meshsim("run", str(SCENARIOS / "epidemic-partition.toml"), "--out",
                                  out, "--set", "protocol.name=nope"), "unknown protocol")
    assert not (tmp_path / "r").exists()
