"""Reading a rollout's playbook output (no root): batches, failed hosts and their reasons."""

from __future__ import annotations

from pathlib import Path

from meshsim.vmesh.deploy import recap, stop_reasons
from meshsim.vmesh.upgrade import batches_of

# What ansible-playbook 2.19 printed for site.yml's structure (serial 25 % of four hosts,
# the second host's install failing), with its source excerpts and timestamps removed.
STOPPED = (Path(__file__).parent / "data" / "rollout-stopped.txt").read_text()

BAD_CONFIG = (
    'fatal: [pi-18]: FAILED! => {"msg": "BAD MESHSUB CONFIG on pi-18: meshsubd: log.level: '
    "must be one of debug, info -- not installed; meshsubd stopped\"}\n"
    "fatal: [pi-18]: FAILED! => {\"msg\": \"ROLLOUT STOPPED at pi-18 (task 'Report the "
    "rejected configuration'): BAD MESHSUB CONFIG on pi-18: meshsubd: log.level: must be one "
    "of debug, info -- not installed; meshsubd stopped -- later batches are not started and "
    'keep the version they run"}\n')


def test_batches_follow_the_play_banners() -> None:
    assert batches_of(STOPPED) == [["h1"], ["h2"]]
    assert batches_of("PLAY RECAP ****\nh1 : ok=1 changed=0\n") == []


def test_the_recap_and_the_reason_of_the_stopped_rollout() -> None:
    stats = recap(STOPPED)
    assert sorted(stats) == ["h1", "h2"]  # h3 and h4 were never reached
    assert stats["h2"]["failed"] == 1 and stats["h2"]["rescued"] == 1
    assert stop_reasons(STOPPED) == [
        "h2: Install meshsub from the wheelhouse: non-zero return code: ERROR: Cannot install "
        "meshsub==2 because of constraints"]


def test_a_rejected_configuration_is_reported_once_as_such() -> None:
    assert stop_reasons(BAD_CONFIG) == [
        "pi-18: meshsubd: log.level: must be one of debug, info"]
