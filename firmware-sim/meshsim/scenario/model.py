"""The validated scenario: plain frozen dataclasses, one per TOML section.

A ``Scenario`` says what to run (it may still contain generators that need the
seed); ``meshsim.scenario.plan`` turns it into the concrete positions,
subscriptions and publications. The same file drives the simulator now and the
virtual mesh later, so nothing here is specific to the discrete-event engine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from meshsim.gps.settings import GpsSettings
from meshsub.core.content import Event, Subscription
from meshsub.core.disjunction import members
from meshsub.core.params import ProtocolParams, params_to_dict

RADIO_MODELS = ("unit_disk", "linear_ramp", "log_distance")
PLACEMENTS = ("grid", "line", "random", "explicit", "lattice")
MOBILITY_MODELS = ("static", "scripted", "setdest", "random_waypoint", "random_walk",
                   "gauss_markov", "group", "lattice_walk")
FAULT_ACTIONS = ("crash", "recover", "leave", "join")
SCOPE_ATTR = "_scope"
"""The event attribute naming its delivery scope: a node group, or ``@origin[:PREFIX]``
for the groups its publisher is in (docs/scenarios.md, "Scoped events")."""


@dataclass(frozen=True, slots=True)
class Meta:
    name: str
    seed: int
    duration_s: float
    drain_s: float = 10.0
    warmup_s: float = 0.0
    description: str = ""
    state_every_s: float = 0.0
    """How often protocols report the state they hold (``state`` records); 0: never."""
    unrecorded: tuple[str, ...] = ()
    """Events the simulator counts in the manifest instead of writing as records (only
    ``UNRECORDABLE`` ones: a static field of thousands of nodes would otherwise write a
    ``neighbor_up`` per link, 99 % of its records, which no metric reads)."""


UNRECORDABLE = ("neighbor_up", "neighbor_down")
"""The events a scenario may leave unrecorded: the link changes, which the evaluation never
reads (docs/evaluation.md) and only the live map draws."""


@dataclass(frozen=True, slots=True)
class Area:
    width_m: float
    height_m: float
    origin_lat: float = 0.0
    origin_lon: float = 0.0


@dataclass(frozen=True, slots=True)
class LinkOverride:
    """Per-pair radio override (both directions): force a link up/down, its loss or delay."""

    a: int
    b: int
    loss: float | None = None
    connected: bool | None = None
    delay_s: float | None = None


@dataclass(frozen=True, slots=True)
class Radio:
    model: str = "unit_disk"
    range_m: float = 100.0
    loss: float = 0.0
    """No link beyond this distance; for log_distance, computed from its parameters."""
    ramp_start: float = 0.75
    """linear_ramp only: loss rises linearly from ``loss`` at ramp_start*range to 1 at range."""
    delay_s: float = 0.001
    bitrate_bps: float | None = None
    """Per-node transmit bitrate: serialisation time in the simulator, HTB on the vmesh."""
    payload_size: int = 1200
    links: tuple[LinkOverride, ...] = ()
    vmesh_delay: bool = False
    """The virtual mesh holds frames for delay_s (and links[].delay_s) through NFQUEUE."""
    # log_distance only (meshsim.radio.LogDistance)
    tx_power_dbm: float = 20.0
    ref_loss_db: float = 40.2
    ref_distance_m: float = 1.0
    path_loss_exp: float = 3.0
    noise_floor_dbm: float = -91.0
    frame_bytes: int | None = None
    """Frame length the PER is computed for; None: payload_size."""


@dataclass(frozen=True, slots=True)
class Nodes:
    count: int
    placement: str
    ids: tuple[int, ...]
    spacing_m: float | None = None
    connected: bool = False
    max_tries: int = 1000
    positions: tuple[tuple[int, float, float], ...] = ()
    """explicit placement: (id, x, y) per node."""
    pinned: tuple[tuple[int, float, float], ...] = ()
    """grid/line/random placement: (id, x, y) of nodes placed by hand (e.g. a publisher)."""
    groups: tuple[NodeGroup, ...] = ()
    """``[[nodes.groups]]``; empty: every node is one group of this table's placement and
    the top-level ``[mobility]`` (the form without groups)."""
    arch: tuple[str, ...] = ()
    """The virtual mesh's device architectures: one for all, or one per node in id
    order; empty: the host's. The simulator has no use for it."""

    def group_of(self, node: int) -> NodeGroup | None:
        for group in self.groups:
            if node in group.ids:
                return group
        return None

    def role_of(self, node: int) -> str | None:
        group = self.group_of(node)
        return group.role if group is not None else None


@dataclass(frozen=True, slots=True)
class Waypoint:
    t: float
    node: int
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class RandomWaypoint:
    """``random_waypoint``: trips at a uniform speed to uniform destinations, then a pause.

    With ``steady_state`` the start (position, speed, pause) is drawn from the
    stationary distribution (Navidi & Camp 2004), so there is no warm-up transient.
    """

    speed_min: float
    speed_max: float
    pause_min: float = 0.0
    pause_max: float = 0.0
    steady_state: bool = True


@dataclass(frozen=True, slots=True)
class RandomWalk:
    """``random_walk`` (ns-3 RandomWalk2d): a uniform direction and speed held for
    ``walk_time`` seconds or ``walk_distance`` metres (exactly one is set)."""

    speed_min: float
    speed_max: float
    walk_time: float | None = 1.0
    walk_distance: float | None = None


@dataclass(frozen=True, slots=True)
class GaussMarkov:
    """``gauss_markov`` (Liang & Haas 1999; Camp et al. 2002). Angles in degrees."""

    alpha: float
    mean_speed: float
    sigma_speed: float
    sigma_direction: float
    mean_direction: float | None = None
    """None: each node draws its own, uniform in [0, 360)."""
    time_step: float = 1.0
    edge_margin: float = 0.0
    """Within this distance of a side the mean direction points at the centre."""


@dataclass(frozen=True, slots=True)
class GroupMobility:
    """``group``: reference point group mobility (Hong et al. 1999)."""

    groups: tuple[tuple[int, ...], ...]
    radius: float
    speed_min: float
    speed_max: float
    pause_min: float = 0.0
    pause_max: float = 0.0
    member_step: float = 1.0


@dataclass(frozen=True, slots=True)
class SetdestMove:
    """``$ns_ at t "$node_(i) setdest x y speed"`` with i mapped to a scenario id."""

    t: float
    node: int
    x: float
    y: float
    speed: float


@dataclass(frozen=True, slots=True)
class Setdest:
    """``setdest``: an ns-2 movement script, read and checked at load time."""

    file: str
    first_ns2_node: int
    start: tuple[tuple[int, float, float], ...]
    """(node, x, y) from ``$node_(i) set X_ / Y_``."""
    moves: tuple[SetdestMove, ...]


@dataclass(frozen=True, slots=True)
class LatticeWalk:
    """``lattice_walk``: cell to cell on a square lattice, one cell every ``step_s``.

    Each step goes to one of the four axis neighbours with probability 1/4 (the
    random walk of Zheng 2008, §5.2 and §6.2). ``border`` says what happens at
    the lattice's edge: ``reflect`` turns a step that would leave it around,
    ``resample`` draws again among the neighbours that exist. ``motion``:
    ``glide`` crosses the cell at constant speed during the step, ``teleport``
    stays in the cell and jumps at the step's end. Cell (i, j) has its centre at
    ``origin + ((i + 0.5) cell_m, (j + 0.5) cell_m)``.
    """

    cell_m: float
    columns: int
    rows: int
    step_s: float = 1.0
    motion: str = "glide"
    border: str = "reflect"
    origin_x: float = 0.0
    origin_y: float = 0.0


MobilityParams = RandomWaypoint | RandomWalk | GaussMarkov | GroupMobility | Setdest | LatticeWalk


@dataclass(frozen=True, slots=True)
class Mobility:
    model: str = "static"
    tick_s: float = 1.0
    waypoints: tuple[Waypoint, ...] = ()
    """``scripted`` only."""
    nodes: tuple[int, ...] = ()
    """The nodes a random model moves (the others stay where they are placed)."""
    params: MobilityParams | None = None


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``[[nodes.groups]]``: nodes placed, moved and given a role together.

    ``role`` reaches each member's protocol as its capabilities (and its beacons),
    with ``[protocol.NAME.roles.ROLE]`` parameters where the scenario gives them;
    ``mains`` puts the members on mains power for ``[energy]``.
    """

    name: str
    ids: tuple[int, ...]
    placement: str
    mobility: Mobility = field(default_factory=Mobility)
    role: str | None = None
    spacing_m: float | None = None
    columns: int | None = None
    origin: tuple[float, float] = (0.0, 0.0)
    """lattice: the lower-left corner of cell (0, 0)."""
    box: tuple[float, float, float, float] | None = None
    """random: (x_min, y_min, x_max, y_max) to draw in; None: the whole area."""
    positions: tuple[tuple[int, float, float], ...] = ()
    mains: bool = False


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """``[[faults]]``: at ``t``, ``action`` happens to the given nodes.

    ``crash`` stops a node's daemon abruptly (what it persisted survives);
    ``recover`` starts it again; ``leave`` cuts its links (the daemon runs on,
    out of everyone's range); ``join`` gives them back. Nodes are named by id, or
    drawn (``count`` or ``fraction``) from the candidates: the members of
    ``group`` (default all) that the action applies to at that time.
    """

    t: float
    action: str
    nodes: tuple[int, ...] | None = None
    count: int | None = None
    fraction: float | None = None
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Contact:
    t: float
    a: int
    b: int
    up: bool


@dataclass(frozen=True, slots=True)
class ProtocolSpec:
    name: str
    params: ProtocolParams = field(default_factory=ProtocolParams)
    role_params: tuple[tuple[str, ProtocolParams], ...] = ()
    """``[protocol.NAME.roles.ROLE]``: the parameters of the nodes with that role."""

    def params_for(self, role: str | None) -> ProtocolParams:
        for name, params in self.role_params:
            if name == role:
                return params
        return self.params


@dataclass(frozen=True, slots=True)
class SubscriptionSpec:
    node: int
    expr: str
    subscription: Subscription
    t: float = 0.0
    sub_id: str = ""
    until: float | None = None
    """When the application unsubscribes (None: never)."""
    alternatives: tuple[Subscription, ...] = ()
    """A disjunction (``expr`` is ``a | b ...``): every alternative, ``subscription`` the
    first; empty for a plain subscription."""

    def members(self) -> list[tuple[str, Subscription]]:
        """The core subscriptions the application's one subscription becomes (one per
        alternative, ids ``sub_id|i``; ``meshsub.core.disjunction``)."""
        return members(self.sub_id, self.alternatives or (self.subscription,))

    def matches(self, event: Event) -> bool:
        return any(s.matches(event) for s in self.alternatives or (self.subscription,))


@dataclass(frozen=True, slots=True)
class UnsubscriptionSpec:
    t: float
    node: int
    sub_id: str


@dataclass(frozen=True, slots=True)
class PublicationSpec:
    t: float
    node: int
    text: str
    event: Event


@dataclass(frozen=True, slots=True)
class WeightedExpr:
    expr: str
    subscription: Subscription
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class RangeDist:
    """A dependent pair ``lo <= hi`` inside ``[low, high]``.

    ``draw = "width"``: the width from ``width`` (``uniform`` or ``log_uniform``
    between its two bounds), then ``lo`` uniform where the pair fits; ``draw =
    "sorted"``: two uniform endpoints, sorted. ``integer`` rounds to whole numbers.
    ``half_open`` (integer pairs only) writes the pair ``a..b`` as the half-open
    ``[a, b + 1)``, so ``hi`` may reach ``high + 1`` and a pair is never empty.
    """

    low: float
    high: float
    draw: str = "width"
    width_kind: str = "uniform"
    width_min: float = 0.0
    width_max: float = 0.0
    integer: bool = True
    half_open: bool = False


@dataclass(frozen=True, slots=True)
class AttrDist:
    """How one event attribute is drawn: uniform_int/uniform_float/choice/const/random_text,
    or ``range`` (a ``RangeDist``: the attributes ``NAME_lo`` and ``NAME_hi``)."""

    kind: str
    args: tuple[Any, ...]
    decimals: int | None = None


@dataclass(frozen=True, slots=True)
class PredDist:
    """How one subscription predicate is drawn: ``exists`` (``NAME?``), ``eq`` (``NAME =``
    a drawn value), ``range`` (``NAME = [lo, hi]``, a ``RangeDist`` pair) or ``contains``
    (``NAME_lo >= lo NAME_hi <= hi``: an event's range pair inside the drawn one)."""

    kind: str
    value: AttrDist | RangeDist | None = None


@dataclass(frozen=True, slots=True)
class Pick:
    """k of n names (k uniform in ``k_min..k_max``), each drawn with ``dist``: the random
    tag or attribute sets of k-of-n workloads."""

    names: tuple[str, ...]
    k_min: int
    k_max: int
    dist: AttrDist | PredDist


@dataclass(frozen=True, slots=True)
class Template:
    topic: str
    weight: float
    attrs: tuple[tuple[str, AttrDist], ...]
    pick: Pick | None = None
    scope: str | None = None
    """The events' delivery scope (the ``_scope`` attribute)."""


@dataclass(frozen=True, slots=True)
class SubTemplate:
    """A generated subscription: a topic filter, predicates drawn, and/or a k-of-n pick."""

    topic: str
    weight: float
    preds: tuple[tuple[str, PredDist], ...] = ()
    pick: Pick | None = None
    any_of: bool = False
    """The picked names are alternatives (Liu 2011, §3.6's OR subscription): one
    alternative per name, each with the template's predicates; else a conjunction."""


@dataclass(frozen=True, slots=True)
class Lifetime:
    """How long a generated subscription lasts: ``const``, ``uniform`` [a, b],
    ``exponential`` (mean), or ``forever``."""

    kind: str = "forever"
    args: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class SubscriberGen:
    """Generated subscriptions: which nodes subscribe, and to what (seeded)."""

    count: int | None
    fraction: float | None
    candidates: tuple[int, ...]
    per_node: int
    expressions: tuple[WeightedExpr, ...]
    t: float = 0.0
    interval_s: float = 0.0
    """The k-th generated subscription (in node-id order) comes at ``t + k * interval_s``."""
    templates: tuple[SubTemplate, ...] = ()
    """Instead of ``expressions``: subscriptions drawn from templates."""
    per_node_max: int | None = None
    """``per_node`` given as [min, max]: each chosen node draws its number."""
    lifetime: Lifetime = field(default_factory=Lifetime)


@dataclass(frozen=True, slots=True)
class SubscriptionArrivals:
    """``[workload.arrivals]``: subscriptions arriving over time (Poisson or periodic),
    each drawn from the templates at a node drawn from ``nodes``, and unsubscribed
    when its lifetime ends."""

    rate_per_s: float
    process: str
    start_s: float
    stop_s: float
    count: int | None
    nodes: tuple[int, ...]
    templates: tuple[SubTemplate, ...]
    lifetime: Lifetime = field(default_factory=Lifetime)
    steady_state_window_s: float | None = None
    """``steady_state = true``: the population alive in the process's steady state is
    issued over this many seconds from ``start_s`` (``meshsim.scenario.stationary``);
    None: the run starts with no subscription alive."""


@dataclass(frozen=True, slots=True)
class PublicationGen:
    """Generated publications: a Poisson or periodic process over a publisher set."""

    rate_per_s: float
    process: str
    start_s: float
    stop_s: float
    count: int | None
    publishers: tuple[int, ...]
    templates: tuple[Template, ...]
    publisher_weight: str = "uniform"
    """``uniform``, or ``contact_degree``: publishers drawn in proportion to their degree
    centrality over ``[contacts]`` (rates proportional to centrality, as in B-SUB)."""


@dataclass(frozen=True, slots=True)
class Workload:
    subscriptions: tuple[SubscriptionSpec, ...] = ()
    subscribers: SubscriberGen | None = None
    publications: tuple[PublicationSpec, ...] = ()
    generator: PublicationGen | None = None
    arrivals: SubscriptionArrivals | None = None


@dataclass(frozen=True, slots=True)
class Energy:
    """``[energy]``: the simulator's batteries, drained by the first-order radio model.

    Every transmission and reception costs its node what ``meshsub.core.energy``
    charges; every ``report_s`` each node's protocol gets an ``EnergyChanged``
    with its remaining fraction (the daemon reads its device's power supply
    instead). Nodes in ``mains`` (or whose group says so) are on mains power.
    """

    enabled: bool = False
    initial_j: float = 2.0
    report_s: float = 10.0
    range_m: float | None = None
    """TR of the model (free space below 75 m, multipath above); None: ``radio.range_m``."""
    mains: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Scenario:
    meta: Meta
    area: Area
    radio: Radio
    nodes: Nodes
    mobility: Mobility
    contacts: tuple[Contact, ...] | None
    """None: links come from the radio model; otherwise only from these events."""
    protocol: ProtocolSpec
    workload: Workload
    gps: GpsSettings = field(default_factory=GpsSettings)
    """``[gps]``: simulated receivers (``meshsim.gps``); off by default."""
    energy: Energy = field(default_factory=Energy)
    """``[energy]``: simulated batteries feeding the protocols' energy input; off by default."""
    faults: tuple[FaultSpec, ...] = ()
    """``[[faults]]``: crashes, recoveries, departures and arrivals of nodes."""
    source: dict[str, Any] = field(default_factory=dict, compare=False)
    """The TOML document after ``--set`` overrides (for the manifest)."""
    overrides: tuple[str, ...] = ()

    @property
    def end_s(self) -> float:
        return self.meta.duration_s + self.meta.drain_s


def to_plain(value: Any) -> Any:
    """JSON-able form of a scenario (for the run manifest)."""
    if isinstance(value, ProtocolParams):
        return params_to_dict(value)
    if isinstance(value, Event | Subscription):
        return None  # represented by their text next to them
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            if f.name == "source":
                continue
            plain = to_plain(getattr(value, f.name))
            if plain is not None or f.name not in ("event", "subscription"):
                out[f.name] = plain
        return out
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value
