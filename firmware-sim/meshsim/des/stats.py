"""What a simulation run counted, in memory, for the CLI summary and the demo.

The telemetry files are the record of truth (the evaluation reads those); these
counters are the driver's own view, so a run can be summarised without
re-reading its files.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from meshsub.core.api import MessageId
from meshsub.core.content import Event


@dataclass(frozen=True, slots=True)
class Published:
    index: int
    """Position in the plan's publication list."""
    event_id: str
    node: int
    t: float
    event: Event


@dataclass(frozen=True, slots=True)
class Delivery:
    event_id: str
    node: int
    sub_id: str
    t: float
    hop: int


@dataclass(slots=True)
class SimStats:
    nodes: int = 0
    node_events: int = 0
    """Inputs handed to protocol instances (the simulator's unit of work)."""
    published: list[Published] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    tx: Counter[str] = field(default_factory=Counter)
    """Transmissions by msg_kind."""
    tx_bytes: Counter[str] = field(default_factory=Counter)
    tx_frames: int = 0
    rx: Counter[str] = field(default_factory=Counter)
    rx_reached: dict[MessageId, set[int]] = field(default_factory=dict)
    """The nodes each DATA message reached: receptions (``rx["data"]``) beyond one per
    node and message are redundant. A set per message, not a count per (message, node):
    one C-level ``set.update`` per frame instead of a tuple per reception."""
    lost: int = 0
    """Receptions lost to link loss or to a link that went down in flight."""
    no_link: int = 0
    """Unicasts to a node that was not a neighbour at transmission time."""
    encode_errors: Counter[str] = field(default_factory=Counter)
    neighbor_changes: int = 0
    records: int = 0
    unrecorded: Counter[str] = field(default_factory=Counter)
    """Events the scenario leaves unrecorded (``[scenario] unrecorded``), counted instead."""
    sim_time_s: float = 0.0
    wall_s: float = 0.0

    @property
    def node_events_per_s(self) -> float:
        return self.node_events / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def redundant_rx(self) -> int:
        return self.rx["data"] - sum(len(nodes) for nodes in self.rx_reached.values())
