"""Grid- and zone-manager election over multi-hop cells (docs/protocols/brvst.md, "Managers").

The paper defers election to its ref. [11] (§III). A 250 m grid with an 80 m
radio range is several hops across, so HESPER's one-hop view of a cell does
not carry over. Here a manager floods an ANNOUNCE inside its area every
``T_ann``; every node keeps, per level (its grid, its zone), a *seat*: the
manager it believes in, the highest epoch seen, and where its own election
stands. The rules:

- a member that has heard no live manager for ``3 T_ann`` (or, on arrival,
  for ``T_ann``) backs off ``T_ann x score / diagonal`` (score = distance to
  the area's centre) plus up to 100 ms, then announces itself with
  ``epoch = highest seen + 1``: the best-placed node normally goes first;
- two managers of one area: the higher epoch wins, then the smaller score,
  then the smaller node id (``ManagerRecord.rank``); the loser hands its
  state to the winner;
- incumbency: a live manager is never pre-empted by a better-placed newcomer;
  it leaves only when it leaves its area (handing its state to the best
  placed member it knows), crashes (members time it out), or loses a conflict.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from meshsub.core.grid import Bounds, Point
from meshsub.protocols.brvst.zones import Area

BACKOFF_JITTER_S = 0.1
LIVENESS_PERIODS = 3


@dataclass(frozen=True, slots=True)
class ManagerRecord:
    """What a node knows of one area's manager, from its last ANNOUNCE."""

    node: int
    epoch: int
    pos: Point
    score: float
    heard_at: float
    inherited: bool = False

    def rank(self) -> tuple[int, float, int]:
        """Smaller is stronger: higher epoch, then nearer the centre, then smaller id."""
        return (-self.epoch, self.score, self.node)

    def beats(self, other: ManagerRecord) -> bool:
        return self.rank() < other.rank()

    def alive(self, now: float, t_ann: float) -> bool:
        return now - self.heard_at <= LIVENESS_PERIODS * t_ann

    def expires_at(self, t_ann: float) -> float:
        return self.heard_at + LIVENESS_PERIODS * t_ann


class Phase(enum.Enum):
    LISTEN = "listen"
    """Just arrived: wait one T_ann for an announcement."""
    WATCH = "watch"
    """A live manager is known; its expiry is armed."""
    BACKOFF = "backoff"
    """No manager: waiting the score-based back-off before announcing."""
    MANAGER = "manager"


class Adopted(enum.Enum):
    NEW = "new"
    """A different manager (node or epoch) than before."""
    REFRESHED = "refreshed"
    IGNORED = "ignored"


@dataclass(slots=True)
class Seat:
    """One level of a node's view: its area, the manager it follows, its election phase."""

    area: Area
    phase: Phase = Phase.LISTEN
    record: ManagerRecord | None = None
    last_epoch: int = 0

    def live(self, now: float, t_ann: float) -> ManagerRecord | None:
        rec = self.record
        return rec if rec is not None and rec.alive(now, t_ann) else None

    def adopt(self, rec: ManagerRecord, now: float, t_ann: float) -> Adopted:
        """Take ``rec`` if it is the manager this seat should follow (see the module rules)."""
        self.last_epoch = max(self.last_epoch, rec.epoch)
        cur = self.record
        if cur is not None and rec.node == cur.node:
            if rec.epoch < cur.epoch:
                return Adopted.IGNORED  # a late copy of an older announcement
            self.record = rec
            return Adopted.NEW if rec.epoch != cur.epoch else Adopted.REFRESHED
        if cur is None or not cur.alive(now, t_ann) or rec.beats(cur):
            self.record = rec
            return Adopted.NEW
        return Adopted.IGNORED


def score(pos: Point, centre: Point) -> float:
    """Distance to the area's centre: lower is better placed."""
    return math.dist(pos, centre)


def backoff(my_score: float, diagonal: float, t_ann: float, rng: random.Random) -> float:
    """``T_ann x score / diagonal`` (capped at T_ann) plus up to 100 ms of jitter."""
    share = min(1.0, my_score / diagonal) if diagonal > 0 else 1.0
    return t_ann * share + rng.uniform(0.0, BACKOFF_JITTER_S)


def successor(candidates: Mapping[int, Point], bounds: Bounds, centre: Point) -> int | None:
    """The best-placed known node inside ``bounds`` (ties to the smaller id), if any."""
    best: tuple[float, int] | None = None
    for node, pos in candidates.items():
        if not bounds.contains(*pos):
            continue
        key = (score(pos, centre), node)
        if best is None or key < best:
            best = key
    return None if best is None else best[1]
