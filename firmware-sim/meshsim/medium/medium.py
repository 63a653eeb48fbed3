"""The radio medium of the virtual mesh: radio model -> directed links -> nftables.

One ``Medium`` per run, driving the table ``msub_medium`` in the run's medium
netns (``msub-medium`` / ``msub-<run>-medium``), whose bridge ports are named in
``ports``. Every change is one ``nft -f`` transaction, so a mobility tick is
atomic: frames see either the old or the new link table, never a mix or a gap.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from meshsim.host.netns import netns_exists
from meshsim.medium import nft
from meshsim.medium.delay import DelayConfig, Delayer, DelayStats
from meshsim.medium.errors import MediumError
from meshsim.radio import (
    DirectedLinks,
    Positions,
    RadioModel,
    compute_links,
    directed,
)
from meshsim.scenario.model import LinkOverride


@dataclass(frozen=True, slots=True)
class UpdateTiming:
    """Where the time of one update went (seconds); ``pairs``: map entries written."""

    compute_s: float
    apply_s: float
    pairs: int

    @property
    def total_s(self) -> float:
        return self.compute_s + self.apply_s


class Medium:
    """The nftables medium of one run (see the module docstring and docs/medium.md)."""

    def __init__(self, netns: str, ports: Mapping[int, str], model: RadioModel | None = None,
                 overrides: Iterable[LinkOverride] = (), *, table: str = nft.TABLE) -> None:
        self.netns = netns
        self.ports = dict(ports)
        for name in self.ports.values():
            nft.check_ifname(name)
        if len(set(self.ports.values())) != len(self.ports):
            raise MediumError("two nodes share a medium port")
        self.model = model
        self.overrides = tuple(overrides)
        for o in self.overrides:
            for node in (o.a, o.b):
                if node not in self.ports:
                    raise MediumError(f"link override names node {node}, which has no port")
        self.table = nft.check_table(table)
        self.links: DirectedLinks = {}
        """The directed link table last applied (loss before quantisation)."""
        self.last: UpdateTiming | None = None
        self._delayer: Delayer | None = None

    def _apply(self, script: str) -> None:
        nft.apply(self.netns, script)

    def install(self) -> None:
        """Create (or replace) the table with an empty link map: every pair deaf."""
        if not netns_exists(self.netns):
            raise MediumError(f"medium netns {self.netns!r} does not exist")
        self._apply(nft.render_install(self.table))
        self.links = {}

    def update(self, positions: Positions) -> float:
        """Links for these positions from the radio model, applied atomically; seconds taken."""
        if self.model is None:
            raise MediumError("update needs a radio model (contact replay uses set_links)")
        unknown = sorted(set(positions) - set(self.ports))
        if unknown:
            raise MediumError(f"position for node {unknown[0]}, which has no medium port")
        missing = sorted({n for o in self.overrides for n in (o.a, o.b)} - set(positions))
        if missing:
            raise MediumError(f"no position for node {missing[0]} (named by a link override)")
        started = time.perf_counter()
        links = directed(compute_links(positions, self.model, self.overrides))
        return self._set(links, time.perf_counter() - started)

    def set_links(self, losses: Mapping[tuple[int, int], float]) -> float:
        """Replace the link table by these directed losses (contact replay); seconds taken."""
        return self._set(dict(losses), 0.0)

    def _set(self, links: DirectedLinks, compute_s: float) -> float:
        started = time.perf_counter()
        if self._delayer is not None:
            self._delayer.check()
        script, entries = nft.render_links(links, self.ports, self.table)
        self._apply(script)
        self.links = links
        self.last = UpdateTiming(compute_s, time.perf_counter() - started, entries)
        return self.last.total_s

    # -------------------------------------------------------------------- delay

    def start_delay(self, config: DelayConfig) -> None:
        """Hold frames per pair (NFQUEUE delayer); replaces an earlier configuration.

        Call after ``install`` (which resets the forward chain to no delay).
        """
        if not config.active:
            self.stop_delay()
            return
        for a, b in config.pairs:
            for node in (a, b):
                if node not in self.ports:
                    raise MediumError(f"delay for node {node}, which has no medium port")
        if self._delayer is None:
            self._delayer = Delayer(self.netns)
        self._delayer.start()
        self._apply(nft.render_forward(config.default_s, config.pairs, self.ports, self.table))

    def stop_delay(self) -> DelayStats | None:
        """Stop marking, queueing and the delayer; the delayer's counts, if it ran."""
        if self._delayer is None:
            return None
        if nft.table_exists(self.netns, self.table):
            self._apply(nft.render_forward(table=self.table))
        delayer, self._delayer = self._delayer, None
        return delayer.stop()

    # ----------------------------------------------------------------- teardown

    def remove(self) -> bool:
        """Stop any delay and delete the table; False if there was no table."""
        self.stop_delay()
        self.links = {}
        if not netns_exists(self.netns) or not nft.table_exists(self.netns, self.table):
            return False
        self._apply(nft.render_remove(self.table))
        return True
