"""Broker allocation from local contact counts (Zhao and Wu 2010, §V-B).

A user keeps who it met within the sliding window ``T_w``. At each contact
it counts the distinct brokers it met: with fewer than ``low`` it designates
the node it is meeting a broker (if it is not one); with more than ``up`` it
demotes the broker it is meeting if that broker's degree is below the average
degree of the brokers it met. Only local counts are used, no global view.

A node the user has just designated (or demoted) answers with the role it
takes (ROLE: it refuses within its hold-down or when pinned), and counts with
that role from then on (``ContactLog.set_role``): a node the user made a
broker is one more broker met in ``T_w``. Without that, a user would designate every
node it meets until it happened to meet ``low`` of them again as brokers, and
the broker set would overshoot (every node designated within minutes) and
then collapse under the demotions of users who count too many brokers.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from meshsub.core.api import NodeId


@dataclass(frozen=True, slots=True)
class Meeting:
    peer: NodeId
    at: float
    broker: bool
    degree: int


class ContactLog:
    """Meetings within the last ``window`` seconds, oldest first."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._log: deque[Meeting] = deque()

    def record(self, meeting: Meeting) -> None:
        self._log.append(meeting)
        self.prune(meeting.at)

    def prune(self, now: float) -> None:
        horizon = now - self.window
        while self._log and self._log[0].at < horizon:
            self._log.popleft()

    def set_role(self, peer: NodeId, broker: bool, now: float) -> None:
        """``peer`` took the role this user designated: count it so from ``now``.

        The meeting is the one just logged; the degree is its latest report.
        Nothing happens if ``peer`` is not in the window any more.
        """
        self.prune(now)
        latest = next((m for m in reversed(self._log) if m.peer == peer), None)
        if latest is not None:
            self.record(Meeting(peer, now, broker, latest.degree))

    def degree(self, now: float) -> int:
        """Distinct nodes met within the window (the popularity the paper uses)."""
        self.prune(now)
        return len({m.peer for m in self._log})

    def brokers(self, now: float) -> dict[NodeId, int]:
        """Distinct brokers met within the window -> their latest reported degree.

        A node counts as a broker if its latest meeting in the window said so.
        """
        self.prune(now)
        latest: dict[NodeId, Meeting] = {}
        for m in self._log:
            latest[m.peer] = m
        return {peer: m.degree for peer, m in latest.items() if m.broker}

    def __len__(self) -> int:
        return len(self._log)


def designation(log: ContactLog, now: float, peer: NodeId, peer_is_broker: bool,
                peer_degree: int, low: int, up: int) -> bool | None:
    """What a user tells ``peer`` (already recorded in ``log``): True "be a broker",
    False "be a user", None nothing."""
    brokers = log.brokers(now)
    count = len(brokers)
    if count < low and not peer_is_broker:
        return True
    if count > up and peer_is_broker:
        average = sum(brokers.values()) / count
        if peer_degree < average:
            return False
    return None
