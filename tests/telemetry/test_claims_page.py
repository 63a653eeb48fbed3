"""Claims files on a hand-made metrics document: selections, verdicts, templates, page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mesheval.claims.page import plan_text, render, write_page
from mesheval.claims.spec import ClaimsError, load_claims


def group(protocol: str, x: float, **metrics: float) -> dict[str, Any]:
    return {"protocol": protocol.lower(), "scenario": "s", "tier": "simulation",
            "varied": {"protocol": protocol, "x": x}, "runs": ["a", "b", "c"],
            "seeds": [1, 2, 3],
            "metrics": {k: {"mean": v, "half_width": v / 10, "n": 3, "min": v * 0.9,
                            "max": v * 1.1} for k, v in metrics.items()}}


DOC = {"runs": [{}] * 12, "groups": [
    group("A", 1, cost=10.0, fpr=0.0), group("A", 2, cost=8.0, fpr=0.0),
    group("B", 1, cost=5.0, fpr=0.0), group("B", 2, cost=6.0, fpr=0.0),
]}

CLAIMS = """
[page]
title = "Test page"
out = "out/page.md"
assets = "assets"
paper = "Nobody 2000"
intro = '''A costs {{ cost | protocol=A, x=2 | .1f }} at x = 2;
B {{ cost | protocol=B, x=1 | =.0f }}.'''

[[table]]
title = "Costs"
metrics = [["cost", "cost"], ["fpr", "FPR", 1, ".2f"]]

[[plot]]
metric = "cost"
x = "x"
series = "protocol"

[[claim]]
id = "a-dearer"
paper = "A costs more than B"
section = "§1"
kind = "order"
metric = "cost"
by = "protocol"
levels = ["A", "B"]
over = "x"

[[claim]]
id = "b-falls"
paper = "B's cost falls along x"
section = "§2"
kind = "trend"
metric = "cost"
along = "x"
where = { protocol = "B" }
note = "B at x = 2: {{ cost | protocol=B, x=2 }}."

[[claim]]
id = "fpr-falls"
paper = "FPR falls along x"
section = "§3"
kind = "trend"
metric = "fpr"
along = "x"
series = "protocol"

[[claim]]
id = "saving"
paper = "B saves up to 50 % of A's cost"
section = "§4"
kind = "ratio"
metric = "cost"
num = { protocol = "B" }
den = { protocol = "A" }
along = "x"
form = "saving"
stat = "max"
near = 0.5
tolerance = 0.05
"""


def test_page_verdicts_tables_and_templates(tmp_path: Path) -> None:
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS)
    page = write_page(claims, DOC, tmp_path / "report")
    text = page.read_text()
    verdicts = {c["id"]: c["status"] for c in
                json.loads((tmp_path / "report" / "claims.json").read_text())}
    # A >= B at x=1 (10/5) and x=2 (8/6); B rises 5 -> 6; FPR all 0: n/a;
    # savings 0.5 and 0.25: the largest is 0.5
    assert verdicts == {"a-dearer": "holds", "b-falls": "differs", "fpr-falls": "n/a",
                        "saving": "holds"}
    assert "A costs 8.0 ± 0.8 at x = 2;\nB 5." in text
    assert "B at x = 2: 6 ± 0.6." in text
    assert "| A | 1 | 3 | 10 ± 1 | 0.00 |" in text
    assert "2 hold, 1 differ, 1 cannot be tested" in text
    assert (tmp_path / "out" / "assets").is_dir() and list((tmp_path / "out" / "assets").iterdir())


def test_a_template_must_not_be_ambiguous() -> None:
    with pytest.raises(ClaimsError, match="selects 2 configurations"):
        render("{{ cost | protocol=A }}", DOC["groups"], {})
    assert render("{{ cost | protocol=C, x=1 }}", DOC["groups"], {}) == "n/a"


@pytest.mark.parametrize(("text", "message"), [
    ('[[claim]]\nid = "x"\npaper = "p"\nsection = "s"\nkind = "guess"\nmetric = "m"',
     "kind: must be one of"),
    ('[[claim]]\nid = "x"\npaper = "p"\nsection = "s"\nkind = "trend"\nmetric = "m"',
     "a trend needs along"),
    ('[[claim]]\nid = "x"\npaper = "p"\nsection = "s"\nkind = "order"\nmetric = "m"\n'
     'by = "protocol"\nlevels = ["A"]', "two or more levels"),
    ('[[claim]]\nid = "x"\npaper = "p"\nsection = "s"\nkind = "bound"\nmetric = "m"',
     "at_most and/or at_least"),
    ('[[claim]]\nid = "x"\npaper = "p"\nsection = "s"\nkind = "bound"\nmetric = "m"\n'
     'at_most = 1\ncolour = 3', "unknown key"),
    ("[page]\ntitel = 'x'", "page.titel: unknown key"),
])
def test_bad_claims_files_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ClaimsError, match=message):
        load_claims(path)


def test_ratio_over_a_baseline(tmp_path: Path) -> None:
    """(HESPER / DF on a void field) over (HESPER / DF on the full field): 1.2 and 1.5."""
    def g(field: str, protocol: str, cost: float) -> dict[str, Any]:
        return {**group(protocol, 1, cost=cost), "varied": {"field": field, "protocol": protocol}}

    doc = {"runs": [], "groups": [g("uniform", "H", 100.0), g("uniform", "DF", 100.0),
                                  g("hole", "H", 120.0), g("hole", "DF", 100.0),
                                  g("river", "H", 150.0), g("river", "DF", 100.0)]}
    claims = tmp_path / "c.toml"
    claims.write_text("""
[page]
title = "t"
out = "p.md"
[[claim]]
id = "void-cost"
paper = "a void costs HESPER what it costs DF"
section = "-"
kind = "ratio"
metric = "cost"
num = { protocol = "H" }
den = { protocol = "DF" }
baseline = { field = "uniform" }
along = "field"
where = { field = ["hole", "river"] }
at_most = 1.25
""")
    write_page(claims, doc, tmp_path / "r")
    (verdict,) = json.loads((tmp_path / "r" / "claims.json").read_text())
    assert verdict["status"] == "differs"  # 1.2 passes, 1.5 does not
    assert "field=hole: 1.2" in verdict["ours"] and "field=river: 1.5" in verdict["ours"]
    assert "over the same at field=uniform" in verdict["rule"]


def test_a_bad_claims_file_stops_mesheval_in_one_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from mesheval.cli import main

    (tmp_path / "run").mkdir()
    bad = tmp_path / "c.toml"
    bad.write_text('claim = "not a table"\n')
    assert main([str(tmp_path / "run"), "--out", str(tmp_path / "o"), "--claims", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "mesheval: error: claim: expected [[claim]] tables"


def test_the_page_says_when_it_stands_on_a_part_of_the_sweep(tmp_path: Path) -> None:
    def sweep(statuses: list[str]) -> dict[str, Any]:
        return {"file": "/x/my.sweep.toml", "blocks": [{"name": "main", "seeds": [1, 2, 3]}],
                "points": [{"block": "main", "seed": i % 3 + 1, "status": st}
                           for i, st in enumerate(statuses)]}

    part = sweep(["done", "kept", "pending", "done", "failed", "pending"])
    assert plan_text(part) == (
        "Plan: **a part of the sweep** `my.sweep.toml`: 3 of its 6 points evaluated (seeds "
        "per block: main 2 of 3); the figures and verdicts below are that part's. Running "
        "the page's command without `--seeds`/`--only` completes it.")
    assert plan_text(sweep(["done", "kept", "done"])) == (
        "Plan: the whole sweep `my.sweep.toml`, 3 points.")
    assert plan_text(None) == ""
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS)
    assert "**a part of the sweep**" in write_page(claims, DOC, tmp_path / "r", part).read_text()


def test_a_part_of_a_sweep_is_evaluated_and_the_page_says_so(tmp_path: Path) -> None:
    from mesheval.sweep import sweep_inputs

    points = [{"id": f"main.p-{p}.s{s}", "block": "main", "seed": s, "status": "done",
               "rundir": f"runs/main.p-{p}.s{s}"} for p in ("a", "b") for s in (1, 2, 3)]
    points[-1]["status"] = "pending"
    (tmp_path / "sweep.json").write_text(json.dumps(
        {"file": "x.sweep.toml", "blocks": [{"name": "main", "seeds": [1, 2, 3]}],
         "points": points}))
    part = sweep_inputs([tmp_path], only=["p-b."], seeds=2)
    assert part is not None
    assert [d.name for d in part.rundirs] == ["main.p-b.s1", "main.p-b.s2"]
    assert plan_text(part.document).startswith(
        "Plan: **a part of the sweep** `x.sweep.toml`: 2 of its 6 points evaluated, 3 more "
        "finished but not evaluated here (seeds per block: main 2 of 3)")
    whole = sweep_inputs([tmp_path])
    assert whole is not None and len(whole.rundirs) == 5


def test_mesheval_page_judges_again_from_metrics_json_without_spark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A changed claims file is judged again from the stored metrics; the plan line counts
    only the points whose run directories the evaluation read."""
    from mesheval.cli import main

    sweep_dir, evaldir = tmp_path / "sw", tmp_path / "sw" / "eval"
    evaldir.mkdir(parents=True)
    points = [{"id": f"main.s{s}", "block": "main", "seed": s, "status": "done",
               "rundir": f"runs/main.s{s}"} for s in (1, 2, 3)]
    (sweep_dir / "sweep.json").write_text(json.dumps(
        {"file": "x.sweep.toml", "blocks": [{"name": "main", "seeds": [1, 2, 3]}],
         "points": points}))
    doc = {**DOC, "tool": "mesheval",
           "inputs": ["elsewhere/sw/runs/main.s1", "elsewhere/sw/runs/main.s2"]}
    (evaldir / "metrics.json").write_text(json.dumps(doc))
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS)
    assert main(["page", str(claims), str(evaldir)]) == 0
    assert capsys.readouterr().out.strip() == f"results page: {tmp_path / 'out' / 'page.md'}"
    text = (tmp_path / "out" / "page.md").read_text()
    assert "2 of its 3 points evaluated, 1 more finished but not evaluated here" in text
    verdicts = {c["id"]: c["status"] for c in
                json.loads((evaldir / "claims.json").read_text())}
    assert verdicts["b-falls"] == "differs"
    # the claim's rule changed after the evaluation: judged again, the verdict flips
    claims.write_text(CLAIMS.replace('id = "b-falls"', 'id = "b-falls"\ndirection = "rises"'))
    assert main(["page", str(claims), str(evaldir)]) == 0
    verdicts = {c["id"]: c["status"] for c in
                json.loads((evaldir / "claims.json").read_text())}
    assert verdicts["b-falls"] == "holds"


@pytest.mark.parametrize(("metrics", "message"), [
    (None, "metrics.json: cannot read: No such file or directory"),
    ("{", "metrics.json: not JSON"),
    ('{"groups": []}', "not a mesheval metrics document"),
])
def test_mesheval_page_refuses_what_is_not_an_evaluation_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], metrics: str | None,
        message: str) -> None:
    from mesheval.cli import main

    if metrics is not None:
        (tmp_path / "metrics.json").write_text(metrics)
    claims = tmp_path / "claims.toml"
    claims.write_text(CLAIMS)
    assert main(["page", str(claims), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mesheval page: error: ") and message in err
    with pytest.raises(SystemExit) as exited:  # EVALDIR missing: argparse's one line
        main(["page", str(claims)])
    assert exited.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
