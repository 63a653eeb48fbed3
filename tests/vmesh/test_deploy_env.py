"""The environment the vmesh runs ansible-playbook in (no root, no devices)."""

from __future__ import annotations

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
    assert deploy.strategy_name() == "mitogen_linear"
    assert deploy.playbook_env()["ANSIBLE_STRATEGY"] == "mitogen_linear"
