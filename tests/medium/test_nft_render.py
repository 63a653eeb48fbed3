"""The medium's pure parts (no root): loss classes, nft scripts, argument checks."""

from __future__ import annotations

import math
import re

import pytest

from meshsim.medium import DelayConfig, Medium, MediumError, delay_config, htb, nft
from meshsim.medium.delay import Delayer
from meshsim.scenario.model import LinkOverride, Radio

PORTS = {i: f"n{i}" for i in range(1, 6)}


@pytest.mark.parametrize(("loss", "cls"), [
    (0.0, 0), (0.004, 0), (0.005, 1), (0.3, 30), (0.29, 29), (0.125, 13), (0.5, 50),
    (0.994, 99), (0.995, None), (1.0, None), (1, None), (0, 0),
])
def test_loss_classes_round_to_the_nearest_percent(loss: float, cls: int | None) -> None:
    assert nft.loss_class(loss) == cls


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan, "0.3", None])
def test_loss_must_be_a_probability(bad: object) -> None:
    with pytest.raises(MediumError, match="probability"):
        nft.loss_class(bad)  # type: ignore[arg-type]


def test_install_script_has_the_documented_layout() -> None:
    script = nft.render_install()
    assert script.startswith("add table bridge msub_medium\ndelete table bridge msub_medium\n")
    assert "map links { type ifname . ifname : verdict; }" in script
    assert "type filter hook forward priority filter; policy drop;" in script
    assert "iifname . oifname vmap @links" in script
    chains = re.findall(r"chain loss(\d\d) \{ numgen random mod 100 < (\d+) drop; accept; \}",
                        script)
    assert [(int(a), int(b)) for a, b in chains] == [(k, k) for k in range(1, 100)]
    assert "fwd" not in script  # a keyword: a chain of that name is a syntax error


def test_links_render_directed_quantised_and_sorted() -> None:
    script, entries = nft.render_links({(2, 1): 0.3, (1, 2): 0.0, (1, 3): 0.999, (3, 1): 0.004},
                                       PORTS)
    assert entries == 3
    assert script.splitlines() == [
        "flush map bridge msub_medium links",
        'add element bridge msub_medium links { "n1" . "n2" : accept, '
        '"n2" . "n1" : jump loss30, "n3" . "n1" : accept }',
    ]


def test_an_empty_table_only_flushes() -> None:
    assert nft.render_links({}, PORTS) == ("flush map bridge msub_medium links\n", 0)


def test_large_tables_are_split_into_statements_of_at_most_2000() -> None:
    ports = {i: f"x{i}" for i in range(70)}
    losses = {(a, b): 0.0 for a in ports for b in ports if a != b}  # 4830 pairs
    script, entries = nft.render_links(losses, ports)
    lines = script.splitlines()
    assert entries == 4830 and lines[0].startswith("flush map")
    sizes = [line.count(" : ") for line in lines[1:]]
    assert sizes == [2000, 2000, 830]


@pytest.mark.parametrize(("losses", "ports", "problem"), [
    ({(1, 9): 0.0}, PORTS, "no medium port for node 9"),
    ({(1, 1): 0.0}, PORTS, "two different nodes"),
    ({(1, 2): 0.0}, {1: "n1", 2: 'n2" . "n3'}, "bad interface name"),
    ({(1, 2): 0.0}, {1: "n1", 2: "a-very-long-ifname"}, "bad interface name"),
])
def test_bad_links_are_refused(losses: dict[tuple[int, int], float], ports: dict[int, str],
                               problem: str) -> None:
    with pytest.raises(MediumError, match=problem):
        nft.render_links(losses, ports)


def test_forward_chain_without_delay_is_the_verdict_map_alone() -> None:
    assert nft.render_forward().splitlines() == [
        "flush chain bridge msub_medium forward",
        "add rule bridge msub_medium forward iifname . oifname vmap @links",
        "flush map bridge msub_medium delays",
    ]


def test_forward_chain_marks_the_default_then_the_pairs() -> None:
    lines = nft.render_forward(0.002, {(1, 2): 0.02, (2, 1): 0.0}, PORTS).splitlines()
    assert lines[1:4] == [
        "add rule bridge msub_medium forward meta mark set 2000",
        "add rule bridge msub_medium forward meta mark set iifname . oifname map @delays",
        "add rule bridge msub_medium forward iifname . oifname vmap @links",
    ]
    assert lines[-1] == ('add element bridge msub_medium delays '
                         '{ "n1" . "n2" : 20000, "n2" . "n1" : 0 }')


@pytest.mark.parametrize(("delay", "problem"), [(-1.0, ">= 0"), (math.inf, ">= 0"),
                                                (5000.0, "too long")])
def test_delay_marks_are_checked(delay: float, problem: str) -> None:
    with pytest.raises(MediumError, match=problem):
        nft.delay_mark(delay)


def test_tables_are_ours_by_name() -> None:
    assert nft.render_remove("msub_medium_ci") == "delete table bridge msub_medium_ci\n"
    with pytest.raises(MediumError, match="bad table name"):
        nft.render_remove("filter")


def test_medium_checks_its_arguments_before_touching_anything() -> None:
    with pytest.raises(MediumError, match="share a medium port"):
        Medium("msub-x-medium", {1: "n1", 2: "n1"})
    with pytest.raises(MediumError, match="names node 7"):
        Medium("msub-x-medium", PORTS, overrides=[LinkOverride(1, 7, loss=0.1)])
    with pytest.raises(MediumError, match="bad table name"):
        Medium("msub-x-medium", PORTS, table="nat")
    with pytest.raises(MediumError, match="bad interface name"):
        Medium("msub-x-medium", {1: "n 1"})


def test_delay_config_from_the_scenario() -> None:
    assert delay_config(Radio()) is None
    radio = Radio(delay_s=0.01, vmesh_delay=True, links=(LinkOverride(1, 2, delay_s=0.05),))
    config = delay_config(radio)
    assert config == DelayConfig(0.01, {(1, 2): 0.05, (2, 1): 0.05}) and config.active
    assert not DelayConfig().active
    with pytest.raises(MediumError, match="delay of default must be"):
        DelayConfig(-1.0)
    with pytest.raises(MediumError, match=r"delay of \(1, 2\) must be"):
        DelayConfig(0.0, {(1, 2): 100.0})
    with pytest.raises(MediumError, match="bad NFQUEUE 70000"):
        Delayer("msub-x-medium", queue=70000)


@pytest.mark.parametrize("rate", [0, 7.9, math.nan, -5])
def test_htb_rates_are_checked_before_tc_runs(rate: float) -> None:
    with pytest.raises(MediumError, match="bits per second"):
        htb.set_rate("msub-nowhere", "mesh0", rate)
