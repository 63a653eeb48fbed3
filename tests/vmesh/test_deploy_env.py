"""The environment the vmesh runs ansible-playbook in (no root, no devices)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from meshsim.vmesh import deploy


def test_the_connection_timeout_is_raised_for_a_large_fleet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ansible's 10 s default left 77 of 100 devices unreachable on a loaded host."""
    monkeypatch.delenv("ANSIBLE_TIMEOUT", raising=False)
    assert deploy.playbook_env()["ANSIBLE_TIMEOUT"] == str(deploy.CONNECT_TIMEOUT_S)
    assert deploy.CONNECT_TIMEOUT_S >= 60
    monkeypatch.setenv("ANSIBLE_TIMEOUT", "30")  # an operator's own choice wins
    assert deploy.playbook_env()["ANSIBLE_TIMEOUT"] == "30"


def test_the_strategy_named_is_the_one_the_playbook_gets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(deploy.MITOGEN_ENV, "0")
    assert deploy.strategy_name() == "linear"
    assert "ANSIBLE_STRATEGY" not in deploy.playbook_env()
    monkeypatch.delenv(deploy.MITOGEN_ENV)
    pytest.importorskip("ansible_mitogen")
    assert deploy.strategy_name() == "msub_mitogen_linear"
    assert deploy.playbook_env()["ANSIBLE_STRATEGY"] == "msub_mitogen_linear"


def test_the_playbook_workers_may_use_every_core(tmp_path: Path) -> None:
    """Mitogen's own strategy pins the controller and its workers to one core of a
    2- or 3-core host (core 1, its multiplexer on core 0); the vmesh's does not. The
    play's worker reads its own allowed cores (a lookup runs in the worker)."""
    pytest.importorskip("ansible_mitogen")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("one core: nothing to pin away")
    play = tmp_path / "play.yml"
    play.write_text(textwrap.dedent(r"""
        - hosts: localhost
          connection: local
          gather_facts: false
          tasks:
            - ansible.builtin.debug:
                msg: "CPUS={{ lookup('ansible.builtin.file', '/proc/self/status')
                       | regex_search('Cpus_allowed_list:\\s*(\\S+)', '\\1') | first }}"
        """))
    env = deploy.playbook_env()
    env.pop(deploy.MITOGEN_ENV, None)
    del env["ANSIBLE_CONFIG"]  # the play above, not the roles' settings
    out = subprocess.run([deploy.ansible_playbook(), "-i", "localhost,", str(play)], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert "CPUS=" in out.stdout, out.stdout + out.stderr
    allowed = out.stdout.split("CPUS=", 1)[1].split('"', 1)[0]
    assert [n for part in allowed.split(",") for n in _span(part)] == cores, out.stdout


def _span(part: str) -> range:
    """``0-3`` or ``5`` of a Cpus_allowed_list."""
    lo, _, hi = part.partition("-")
    return range(int(lo), int(hi or lo) + 1)
