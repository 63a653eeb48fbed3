"""The field's changes in wall-clock time: mobility ticks and contacts, applied to the medium.

The simulator applies the same changes in virtual time (``meshsim.des.engine``):
with ``[contacts]`` the links are exactly the contacts that are up (radio loss
applied); otherwise they follow the radio model at each mobility tick. Each change
is one atomic medium update. A tick that comes due while an earlier update is
still running is merged into the next (counted), so the medium never falls behind
the clock by more than one update.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from meshsim.mobility import Trajectories, contact_timeline
from meshsim.radio import Links, compute_links, make_model
from meshsim.scenario.model import Contact, Scenario

EXPECTED_LOSS = 0.5
"""A link counts as a neighbour the daemon should see when it loses less than this."""


class MediumLike(Protocol):
    def update(self, positions: Mapping[int, tuple[float, float]]) -> float: ...

    def set_links(self, links: Mapping[tuple[int, int], float]) -> float: ...


def directed(links: Links) -> dict[tuple[int, int], float]:
    return {(a, b): loss for a, nbs in links.items() for b, loss in nbs.items()}


def neighbours(links: Links) -> dict[int, set[int]]:
    return {a: {b for b, loss in nbs.items() if loss < EXPECTED_LOSS}
            for a, nbs in links.items()}


@dataclass
class Timeline:
    scenario: Scenario
    trajectories: Trajectories
    nodes: tuple[int, ...]
    update_s: list[float] = field(default_factory=list)
    late_s: list[float] = field(default_factory=list)
    merged_ticks: int = 0
    _up: dict[frozenset[int], float] = field(default_factory=dict)
    hooks: list[tuple[float, Callable[[], None]]] = field(default_factory=list)
    """Calls at scenario times (``meshsim.vmesh.faults``), each followed by a medium update."""
    absent: set[int] = field(default_factory=set)
    """Nodes the medium gives no links (they left, or have not joined yet)."""

    @classmethod
    def of(cls, scenario: Scenario, trajectories: Trajectories,
           nodes: tuple[int, ...]) -> Timeline:
        return cls(scenario, trajectories, nodes)

    @property
    def mobile(self) -> bool:
        return bool(self.trajectories.moving()) and self.scenario.contacts is None

    def positions(self, t: float) -> dict[int, tuple[float, float]]:
        return {n: self.trajectories.position(n, t) for n in self.nodes if n not in self.absent}

    def radio_links(self, t: float) -> Links:
        radio = self.scenario.radio
        return compute_links(self.positions(t), make_model(radio), radio.links)

    def _contact_loss(self, c: Contact) -> float:
        loss = self.scenario.radio.loss
        for o in self.scenario.radio.links:
            if {o.a, o.b} == {c.a, c.b} and o.loss is not None:
                loss = o.loss
        return loss

    def _contact_links(self) -> Links:
        links: Links = {n: {} for n in self.nodes}
        for pair, loss in self._up.items():
            a, b = sorted(pair)
            if a not in self.absent and b not in self.absent:
                links[a][b] = links[b][a] = loss
        return links

    def _relink(self, medium: MediumLike, t: float) -> float:
        """Apply the links at scenario time ``t`` (after a hook changed who has links)."""
        if self.scenario.contacts is not None:
            return medium.set_links(directed(self._contact_links()))
        return medium.update(self.positions(t))

    def _apply_contact(self, c: Contact) -> None:
        pair = frozenset((c.a, c.b))
        if c.up:
            self._up[pair] = self._contact_loss(c)
        else:
            self._up.pop(pair, None)

    def apply_start(self, medium: MediumLike) -> dict[int, set[int]]:
        """The links at scenario time 0 onto the medium; the neighbours daemons should see."""
        if self.scenario.contacts is not None:
            for c in contact_timeline(self.scenario.contacts):
                if c.t <= 0.0:
                    self._apply_contact(c)
            links = self._contact_links()
            medium.set_links(directed(links))
        else:
            links = self.radio_links(0.0)
            medium.update(self.positions(0.0))
        return neighbours(links)

    def events(self, end_s: float) -> list[tuple[float, Contact | Callable[[], None] | None]]:
        """(scenario time, contact, hook, or None for a mobility tick), in order."""
        out: list[tuple[float, Contact | Callable[[], None] | None]] = [
            (c.t, c) for c in contact_timeline(self.scenario.contacts or ()) if 0.0 < c.t < end_s]
        out.extend((when, hook) for when, hook in self.hooks if when < end_s)
        if self.mobile:
            tick = self.scenario.mobility.tick_s
            k = 1
            while k * tick < end_s:
                out.append((k * tick, None))
                k += 1
        out.sort(key=lambda e: e[0])
        return out

    def play(self, medium: MediumLike, t0: float, end_s: float) -> dict[str, Any]:
        """Apply every change at ``t0 + t``; return once the scenario has ended."""
        pending = self.events(end_s)
        i = 0
        while i < len(pending):
            when, contact = pending[i]
            time.sleep(max(0.0, t0 + when - time.time()))
            if callable(contact):
                contact()
                i += 1
                self._record(t0 + when, self._relink(medium, when))
                continue
            if contact is not None:
                self._apply_contact(contact)
                i += 1
                while i < len(pending) and isinstance(pending[i][1], Contact) \
                        and pending[i][0] <= time.time() - t0:
                    self._apply_contact(pending[i][1])  # type: ignore[arg-type]
                    i += 1
                self._record(t0 + when, medium.set_links(directed(self._contact_links())))
                continue
            # a mobility tick; ticks already overdue are merged into the newest one
            while i + 1 < len(pending) and pending[i + 1][1] is None \
                    and t0 + pending[i + 1][0] <= time.time():
                i += 1
                self.merged_ticks += 1
                when = pending[i][0]
            i += 1
            self._record(t0 + when, medium.update(self.positions(when)))
        time.sleep(max(0.0, t0 + end_s - time.time()))
        return self.stats()

    def _record(self, due: float, took_s: float) -> None:
        self.update_s.append(took_s)
        self.late_s.append(max(0.0, time.time() - took_s - due))

    def stats(self) -> dict[str, Any]:
        u = self.update_s
        return {
            "updates": len(u),
            "update_median_s": round(statistics.median(u), 4) if u else None,
            "update_max_s": round(max(u), 4) if u else None,
            "late_max_s": round(max(self.late_s), 4) if self.late_s else None,
            "merged_ticks": self.merged_ticks,
        }
