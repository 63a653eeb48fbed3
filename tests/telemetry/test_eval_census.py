"""The loader's census (``mesheval.load``) groups by protocol instead of taking its
``min`` (a string aggregate made Spark sort every record): a node whose records name two
protocols gets two census rows, which must not count it twice, split its file's lines or
its positions, nor change the run's protocol, extent or record count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def rec(node: int, ts: int, event: str, protocol: str, extra: str = "") -> str:
    return (f'{{"run":"r","protocol":"{protocol}","node":{node},"ts_ns":{ts},'
            f'"event":"{event}"{extra}}}')


# node 1 names "zeta" and "alpha", with one position under each; node 2 only "zeta"
LINES = [rec(1, 50, "position", "zeta", ',"x":1.0,"y":2.0'),
         rec(1, 10, "publish", "zeta", ',"event_id":"e1","topic":"t","content":"t"'),
         rec(1, 90, "position", "alpha", ',"x":1.0,"y":2.0'),
         rec(2, 20, "deliver", "zeta", ',"event_id":"e1","sub_id":"s"'),
         rec(2, 70, "tx", "zeta", ',"msg_kind":"beacon","bytes":4')]


@pytest.mark.parametrize("form", ["jsonl", "parquet"])
def test_a_node_of_two_protocols_counts_once(spark: Any, tmp_path: Path, form: str) -> None:
    from mesheval.load import load_rundirs
    from mesheval.settings import node_census, run_settings

    rundir = tmp_path / "run"
    rundir.mkdir()
    data = ("\n".join(LINES) + "\n").encode()
    if form == "parquet":
        import pyarrow.parquet as pq

        from meshsim.telemetry_parquet import arrow_schema, lines_to_table

        pq.write_table(lines_to_table(data, arrow_schema()), rundir / "telemetry.parquet")
    else:
        (rundir / "node-1.jsonl").write_bytes(data)
    loaded = load_rundirs(spark, [rundir], tmp_path / "out")
    assert len(loaded.census) == 3  # (node 1, alpha), (node 1, zeta), (node 2, zeta)
    assert loaded.positions_per_node == 2
    (quality,) = loaded.quality
    assert (quality.lines, quality.valid, quality.errors) == (5, 5, {})
    for census in (loaded.census, node_census(loaded.records)):
        (s,) = run_settings(loaded.records, loaded.manifests, warmup_override=0.0,
                            default_range_m=100.0, census=census)
        assert (s.protocol, s.nodes, s.records, s.t0_ns, s.end_ns) == ("alpha", 2, 5, 10, 90)
