"""Read and validate a scenario file: TOML text -> ``Scenario``.

Everything that can be checked without running is checked here (types, ranges,
node ids, expressions with the real parser, protocol name and parameters with
the protocol's own ``Params``), so ``meshsim validate`` catches what a run would.
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from meshsim.gps.settings import (
    MAX_HDOP,
    MAX_NOISE_M,
    MAX_RATE_HZ,
    GpsSettings,
    GpsSettingsError,
    Outage,
)
from meshsim.radio import LINK_CUTOFF, make_model
from meshsim.scenario.faults import parse_faults
from meshsim.scenario.groups import members, parse_groups
from meshsim.scenario.mobility_section import parse_mobility
from meshsim.scenario.model import (
    PLACEMENTS,
    RADIO_MODELS,
    UNRECORDABLE,
    Area,
    Contact,
    Energy,
    Lifetime,
    LinkOverride,
    Meta,
    Mobility,
    Nodes,
    ProtocolSpec,
    PublicationGen,
    PublicationSpec,
    Radio,
    Scenario,
    SubscriberGen,
    SubscriptionArrivals,
    SubscriptionSpec,
    WeightedExpr,
    Workload,
)
from meshsim.scenario.overrides import apply_override
from meshsim.scenario.reader import ScenarioError, Table, check_int, type_name
from meshsim.scenario.templates import event_template, lifetime, sub_template
from meshsim.scenario.traces import parse_contact_line, parse_contacts
from meshsub.core.content import ContentError, Subscription
from meshsub.core.params import ParameterError, ProtocolParams, parse_params
from meshsub.core.protocol import Protocol
from meshsub.core.registry import UnknownProtocolError, get_protocol
from meshsub.core.subids import SubIdError, check_sub_id
from meshsub.core.syntax import parse_alternatives, parse_event, parse_subscription

LOG_DISTANCE_KEYS = ("tx_power_dbm", "ref_loss_db", "ref_distance_m", "path_loss_exp",
                     "noise_floor_dbm", "frame_bytes")
PUBLISHER_WEIGHTS = ("uniform", "contact_degree")


def load_scenario(path: str | Path, overrides: Sequence[str] = (),
                  seed: int | None = None) -> Scenario:
    """Load ``path``, apply ``--set`` overrides (and ``--seed``), validate."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError("", f"cannot read scenario {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError("", f"scenario {str(path)!r} is not UTF-8 text") from None
    return loads_scenario(text, overrides, seed=seed, base_dir=path.parent, filename=str(path))


def loads_scenario(text: str, overrides: Sequence[str] = (), *, seed: int | None = None,
                   base_dir: Path | None = None, filename: str = "<scenario>") -> Scenario:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError("", f"{filename}: invalid TOML: {exc}") from None
    all_overrides = list(overrides)
    if seed is not None:
        all_overrides.append(f"scenario.seed={seed}")
    for assignment in all_overrides:
        apply_override(doc, assignment)
    return from_dict(doc, base_dir=base_dir or Path("."), overrides=tuple(all_overrides))


def from_dict(doc: dict[str, Any], *, base_dir: Path = Path("."),
              overrides: tuple[str, ...] = ()) -> Scenario:
    root = Table(doc, "")
    meta = _meta(root.table("scenario", required=True))
    area = _area(root.table("area", required=True))
    nodes = _nodes(root.table("nodes", required=True), area, meta, base_dir)
    ids = set(nodes.ids)
    radio = _radio(root.table("radio"), ids)
    mobility = _mobility(root.table("mobility"), nodes, area, meta, base_dir)
    contacts = _contacts(root, ids, base_dir)
    protocol = _protocol(root.table("protocol", required=True),
                         frozenset(g.role for g in nodes.groups if g.role is not None))
    groups = {g.name: g.ids for g in nodes.groups}
    workload = _workload(root.table("workload"), ids, meta, groups)
    gps = _gps(root.table("gps"), ids, meta)
    energy = _energy(root.table("energy"), ids, nodes)
    faults = parse_faults(root, ids, groups, meta)
    root.done()
    return Scenario(meta, area, radio, nodes, mobility, contacts, protocol, workload,
                    gps=gps, energy=energy, faults=faults, source=copy.deepcopy(doc),
                    overrides=overrides)


# --------------------------------------------------------------------- sections


def _meta(t: Table) -> Meta:
    name = t.string("name")
    if not name.strip():
        raise t.err("name", "must not be empty")
    meta = Meta(
        name=name,
        seed=t.integer("seed", 1, lo=0, hi=2**63 - 1),
        duration_s=t.number("duration_s", lo=0.0, lo_open=True),
        drain_s=t.number("drain_s", 10.0, lo=0.0),
        warmup_s=t.number("warmup_s", 0.0, lo=0.0),
        description=t.string("description", ""),
        state_every_s=t.number("state_every_s", 0.0, lo=0.0),
        unrecorded=_unrecorded(t),
    )
    if meta.warmup_s >= meta.duration_s:
        raise t.err("warmup_s", "must be less than duration_s")
    t.done()
    return meta


def _unrecorded(t: Table) -> tuple[str, ...]:
    events = t.array("unrecorded", [])
    for i, event in enumerate(events):
        if event not in UNRECORDABLE:
            raise t.err("unrecorded", f"item {i}: {event!r} cannot be left unrecorded (the "
                        f"evaluation reads it); only {', '.join(UNRECORDABLE)}")
    if len(set(events)) != len(events):
        raise t.err("unrecorded", "an event is listed twice")
    return tuple(events)


def _area(t: Table) -> Area:
    area = Area(
        width_m=t.number("width_m", lo=0.0, lo_open=True),
        height_m=t.number("height_m", lo=0.0, lo_open=True),
        origin_lat=t.number("origin_lat", 0.0, lo=-90.0, hi=90.0),
        origin_lon=t.number("origin_lon", 0.0, lo=-180.0, hi=180.0),
    )
    t.done()
    return area


def _radio(t: Table, ids: set[int]) -> Radio:
    links = []
    for lt in t.tables("links"):
        a, b = _node_ref(lt, "a", ids), _node_ref(lt, "b", ids)
        if a == b:
            raise lt.err("b", "a link needs two different nodes")
        loss = lt.opt_number("loss", lo=0.0)
        if loss is not None and loss > 1.0:
            raise lt.err("loss", f"must be <= 1 (got {loss:g})")
        connected = lt.raw("connected", None)
        if connected is not None and not isinstance(connected, bool):
            raise lt.err("connected", f"expected true or false, got {type_name(connected)}")
        delay = lt.opt_number("delay_s", lo=0.0)
        if loss is None and connected is None and delay is None:
            raise lt.err("loss", "a link override needs loss, connected and/or delay_s")
        lt.done()
        links.append(LinkOverride(a, b, loss, connected, delay))
    base = Radio(
        model=t.string("model", "unit_disk", choices=RADIO_MODELS),
        loss=t.number("loss", 0.0, lo=0.0, hi=1.0),
        delay_s=t.number("delay_s", 0.001, lo=0.0),
        bitrate_bps=t.opt_number("bitrate_bps", lo=0.0, lo_open=True),
        payload_size=t.integer("payload_size", 1200, lo=256, hi=65507),
        links=tuple(links),
        vmesh_delay=t.boolean("vmesh_delay", False),
    )
    if base.model == "log_distance":
        radio = _log_distance(t, base)
    else:
        for key in LOG_DISTANCE_KEYS:
            if t.has(key):
                raise t.err(key, f"log_distance only (radio.model is {base.model!r})")
        radio = dataclasses.replace(
            base, range_m=t.number("range_m", 100.0, lo=0.0, lo_open=True),
            ramp_start=t.number("ramp_start", 0.75, lo=0.0, hi=1.0))
    t.done()
    return radio


def _log_distance(t: Table, base: Radio) -> Radio:
    """The log_distance keys; ``range_m`` is computed from them, never given."""
    for key in ("range_m", "ramp_start"):
        if t.has(key):
            raise t.err(key, "not used by log_distance (its range follows from the path loss: "
                             "tx_power_dbm, path_loss_exp, ...)")
    frame_bytes = t.opt_integer("frame_bytes", lo=1)
    if frame_bytes is not None and frame_bytes > 65535:
        raise t.err("frame_bytes", f"must be <= 65535 (got {frame_bytes})")
    if base.loss >= LINK_CUTOFF:
        raise t.err("loss", f"must be < {LINK_CUTOFF:g} with log_distance (no link otherwise)")
    radio = dataclasses.replace(
        base,
        tx_power_dbm=t.number("tx_power_dbm", 20.0, lo=-100.0, hi=100.0),
        ref_loss_db=t.number("ref_loss_db", 40.2, lo=0.0, hi=300.0),
        ref_distance_m=t.number("ref_distance_m", 1.0, lo=0.0, lo_open=True),
        path_loss_exp=t.number("path_loss_exp", 3.0, lo=0.0, hi=10.0, lo_open=True),
        noise_floor_dbm=t.number("noise_floor_dbm", -91.0, lo=-200.0, hi=0.0),
        frame_bytes=frame_bytes,
    )
    try:
        model = make_model(radio)
    except ValueError as exc:  # parameters that leave no link at any distance
        raise t.err("tx_power_dbm", str(exc)) from None
    return dataclasses.replace(radio, range_m=model.range_m)


DEVICE_ARCHES = ("amd64", "arm64", "armhf")
"""The virtual mesh's device architectures (``meshsim.vmesh.image.ARCHES``)."""


def _nodes(t: Table, area: Area, meta: Meta, base_dir: Path) -> Nodes:
    arch = _arch(t)
    nodes = (_grouped_nodes(t, area, meta, base_dir) if t.has("groups")
             else _plain_nodes(t, area, meta, base_dir))
    if len(arch) > 1 and len(arch) != len(nodes.ids):
        raise t.err("arch", f"{len(arch)} architectures for {len(nodes.ids)} nodes: one for "
                    "all, or one per node in id order")
    return dataclasses.replace(nodes, arch=arch)


def _arch(t: Table) -> tuple[str, ...]:
    """``arch``: the devices' architecture (a string) or each node's (an array)."""
    value = t.raw("arch", [])
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list):
        raise t.err("arch", "expected a string or an array of strings")
    for name in names:
        if name not in DEVICE_ARCHES:
            raise t.err("arch", f"must be one of {', '.join(DEVICE_ARCHES)} (got {name!r})")
    return tuple(names)


def _plain_nodes(t: Table, area: Area, meta: Meta, base_dir: Path) -> Nodes:
    placement = t.string("placement", choices=tuple(p for p in PLACEMENTS if p != "lattice"))
    ids, positions = members(t, placement, area, 1, id_required=False)
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise t.err("positions", f"node id {dup} appears twice")
    count = len(ids)
    if placement == "explicit" and t.has("pinned"):
        t.raw("pinned")
        raise t.err("pinned", "not with placement = \"explicit\" (list the position there)")
    pinned = _pinned(t, area, set(ids))
    nodes = Nodes(
        count=count,
        placement=placement,
        ids=tuple(ids),
        spacing_m=t.opt_number("spacing_m", lo=0.0, lo_open=True),
        connected=t.boolean("connected", False),
        max_tries=t.integer("max_tries", 1000, lo=1),
        positions=tuple(positions),
        pinned=tuple(pinned),
    )
    if nodes.connected and placement != "random":
        raise t.err("connected", "only for placement = \"random\"")
    t.done()
    return nodes


def _pinned(t: Table, area: Area, ids: set[int] | None) -> tuple[tuple[int, float, float], ...]:
    pinned: list[tuple[int, float, float]] = []
    for pt in t.tables("pinned"):
        pid = pt.integer("id", lo=0, hi=0xFFFF_FFFF)
        if ids is not None and pid not in ids:
            raise pt.err("id", f"node {pid} is not one of the scenario's nodes")
        if any(p[0] == pid for p in pinned):
            raise pt.err("id", f"node {pid} is pinned twice")
        x = pt.number("x", lo=0.0, hi=area.width_m)
        y = pt.number("y", lo=0.0, hi=area.height_m)
        pt.done()
        pinned.append((pid, x, y))
    return tuple(pinned)


def _grouped_nodes(t: Table, area: Area, meta: Meta, base_dir: Path) -> Nodes:
    """``[nodes]`` with ``[[nodes.groups]]`` (``meshsim.scenario.groups``)."""
    for key in ("count", "placement", "first_id", "spacing_m", "positions"):
        if t.has(key):
            t.raw(key)
            raise t.err(key, "not with groups: each group has its own")
    pinned = _pinned(t, area, None)  # the ids are checked once the groups are read
    connected = t.boolean("connected", False)
    max_tries = t.integer("max_tries", 1000, lo=1)
    nodes = parse_groups(t, area, meta, base_dir, _read_lines, pinned, connected, max_tries)
    t.done()
    return nodes


def _mobility(t: Table, nodes: Nodes, area: Area, meta: Meta, base_dir: Path) -> Mobility:
    if nodes.groups:  # each group has its own; here only the simulator's tick
        for key in t.data:
            if key != "tick_s":
                t.raw(key)
                raise t.err(key, "with [[nodes.groups]] each group has its own mobility "
                                 "table; [mobility] holds only tick_s")
        mobility = Mobility(tick_s=t.number("tick_s", 1.0, lo=0.0, lo_open=True))
        t.done()
        return mobility
    return parse_mobility(t, nodes, area, meta, base_dir, _read_lines)


def _contacts(root: Table, ids: set[int], base_dir: Path) -> tuple[Contact, ...] | None:
    if not root.has("contacts"):
        root.raw("contacts", None)
        return None
    t = root.table("contacts")
    events: list[Contact] = []
    for i, line in enumerate(t.array("events", [])):
        where = f"contacts.events[{i}]"
        if not isinstance(line, str):
            raise ScenarioError(where, f"expected a string 'time CONN a b up|down', "
                                       f"got {type_name(line)}")
        events.append(parse_contact_line(line, where))
    file = t.opt_string("file")
    if file is not None:
        events.extend(parse_contacts(_read_lines(base_dir, file, "contacts.file"),
                                     f"contacts.file {file}"))
    if t.has("generate"):
        events.extend(_generated_contacts(t.table("generate"), ids))
    t.done()
    for c in events:
        for n in (c.a, c.b):
            if n not in ids:
                raise ScenarioError("contacts", f"unknown node {n} in contact at t={c.t:g}")
    return tuple(sorted(events, key=lambda c: c.t))


def _generated_contacts(t: Table, ids: set[int]) -> list[Contact]:
    """``[contacts.generate]``: a social contact trace (``meshsim.traces``) over the nodes."""
    from meshsim.traces.social import PRESETS, TraceModelError, generate, preset

    name = t.string("preset", choices=tuple(sorted(PRESETS)))
    seed = t.integer("seed", 1, lo=0)
    overrides: dict[str, float | int] = {}
    days = t.opt_number("days", lo=0.0, lo_open=True)
    if days is not None:
        overrides["days"] = days
    count = t.opt_integer("contacts", lo=1)
    if count is not None:
        overrides["contacts"] = count
    t.done()
    order = sorted(ids)
    try:
        model = preset(name, nodes=len(order), **overrides)
        return [Contact(c.t, order[c.a], order[c.b], c.up) for c in generate(model, seed)]
    except TraceModelError as exc:
        raise ScenarioError(t.path, str(exc)) from None


def _protocol(t: Table, roles: frozenset[str]) -> ProtocolSpec:
    """``[protocol]``: the selected ``name`` and one parameter table per protocol.

    ``[protocol.NAME]`` holds protocol NAME's parameters, so one scenario runs under
    every protocol (``--set protocol.name=X``): the selected protocol takes its own
    table, the others are ignored by the run. Every table is still checked against
    its protocol's ``Params`` (a typo in a table not selected today would otherwise
    surface only in the sweep that selects it).
    """
    name = t.string("name")
    if t.has("params"):
        raise t.err("params", f"parameters go in a table per protocol, [protocol.{name}] "
                              f"(e.g. --set protocol.{name}.KEY=VALUE)")
    tables = {key: t.table(key) for key in t.data if key != "name"}
    t.done()
    if name not in tables:
        tables[name] = Table({}, f"{t.path}.{name}")
    selected: ProtocolParams | None = None
    role_params: tuple[tuple[str, ProtocolParams], ...] = ()
    for key, values in tables.items():
        cls = _protocol_class(t, key, "name" if key == name else key)
        base = {k: v for k, v in values.data.items() if k != "roles"}
        params = _params(cls, base, values.path)
        by_role = []
        rt = Table(values.data.get("roles", {}), f"{values.path}.roles")
        for role in sorted(rt.data):
            if role not in roles:
                raise rt.err(role, f"no node group has role {role!r} "
                                   f"(roles: {', '.join(sorted(roles)) or 'none'})")
            own = rt.table(role)
            by_role.append((role, _params(cls, {**base, **own.data}, own.path)))
        if key == name:
            selected, role_params = params, tuple(by_role)
    assert selected is not None
    return ProtocolSpec(name, selected, role_params)


def _params(cls: type[Protocol], values: Mapping[str, Any], path: str) -> ProtocolParams:
    try:
        return parse_params(cls.Params, dict(values))
    except ParameterError as exc:
        raise ScenarioError(f"{path}.{exc.key}", exc.problem) from None
    except ValueError as exc:
        raise ScenarioError(path, str(exc)) from None


def _protocol_class(t: Table, name: str, key: str) -> type[Protocol]:
    """The registered protocol ``name``; errors name ``protocol.<key>``."""
    try:
        return get_protocol(name)
    except UnknownProtocolError as exc:
        raise t.err(key, str(exc) if key == "name" else f"not a protocol's parameter table "
                         f"({str(exc).removeprefix('unknown ')})") from None
    except Exception as exc:  # a broken plugin must not crash validation
        raise t.err(key, f"cannot load protocol {name!r}: {exc}") from None


def _workload(t: Table, ids: set[int], meta: Meta, groups: Mapping[str, tuple[int, ...]]
              ) -> Workload:
    subs = []
    for i, st in enumerate(t.tables("subscriptions")):
        node = _node_ref(st, "node", ids)
        expr = st.string("expr")
        sub_id = st.string("id", "")
        if sub_id:
            try:  # the virtual mesh subscribes over MQTT: the same id rules apply
                check_sub_id(sub_id)
            except SubIdError as exc:
                raise st.err("id", str(exc)) from None
        start = st.number("t", 0.0, lo=0.0)
        until = st.opt_number("until", lo=0.0)
        if until is not None and until <= start:
            raise st.err("until", f"must be after t ({start:g})")
        st.done()
        alternatives = _parse_alternatives(st, "expr", expr)
        subs.append(SubscriptionSpec(node, expr, alternatives[0], start, sub_id or f"s{i}",
                                     until, alternatives if len(alternatives) > 1 else ()))
    pubs = []
    for pt in t.tables("publications"):
        node = _node_ref(pt, "node", ids)
        when = pt.number("t", lo=0.0)
        if when >= meta.duration_s:
            raise pt.err("t", f"must be before scenario.duration_s ({meta.duration_s:g})")
        text = pt.string("event")
        pt.done()
        pubs.append(PublicationSpec(when, node, text, _parse_event(pt, "event", text)))
    subscribers = _subscribers(t.table("subscribers"), ids, groups) \
        if t.has("subscribers") else None
    generator = _generator(t.table("generator"), ids, meta, groups) \
        if t.has("generator") else None
    arrivals = _arrivals(t.table("arrivals"), ids, meta, groups) if t.has("arrivals") else None
    t.done()
    seen: set[tuple[int, str]] = set()
    for i, s in enumerate(subs):
        if (s.node, s.sub_id) in seen:
            raise ScenarioError(f"workload.subscriptions[{i}].id",
                                f"duplicate id {s.sub_id!r} on node {s.node}")
        seen.add((s.node, s.sub_id))
    return Workload(tuple(subs), subscribers, tuple(sorted(pubs, key=lambda p: p.t)), generator,
                    arrivals)


def _subscribers(t: Table, ids: set[int], groups: Mapping[str, tuple[int, ...]]
                 ) -> SubscriberGen:
    count = t.opt_integer("count", lo=0)
    fraction = t.opt_number("fraction", lo=0.0)
    if fraction is not None and fraction > 1.0:
        raise t.err("fraction", f"must be <= 1 (got {fraction:g})")
    if (count is None) == (fraction is None):
        raise t.err("count", "give exactly one of count and fraction")
    candidates = _node_list(t, "nodes", ids, groups)
    if count is not None and count > len(candidates):
        raise t.err("count", f"is {count} but only {len(candidates)} candidate nodes exist")
    exprs = []
    for et in t.tables("expressions"):
        expr = et.string("expr")
        weight = et.number("weight", 1.0, lo=0.0, lo_open=True)
        et.done()
        exprs.append(WeightedExpr(expr, _parse_sub(et, "expr", expr), weight))
    templates = tuple(sub_template(tt) for tt in t.tables("templates"))
    if not exprs and not templates:
        raise t.err("expressions", "at least one expression (or template) is needed")
    if exprs and templates:
        raise t.err("templates", "give expressions or templates, not both")
    per_node, per_node_max = _count_range(t, "per_node")
    life = lifetime(t.raw("lifetime", "forever"), f"{t.path}.lifetime")
    gen = SubscriberGen(count, fraction, candidates, per_node,
                        tuple(exprs), t.number("t", 0.0, lo=0.0),
                        t.number("interval_s", 0.0, lo=0.0), templates,
                        per_node_max if per_node_max != per_node else None, life)
    t.done()
    return gen


def _count_range(t: Table, key: str) -> tuple[int, int]:
    """``N`` or ``[min, max]`` (both >= 1)."""
    raw = t.raw(key, 1)
    if isinstance(raw, list):
        if len(raw) != 2:
            raise t.err(key, "expected N or [min, max]")
        lo = check_int(raw[0], f"{t.path}.{key}", lo=1)
        hi = check_int(raw[1], f"{t.path}.{key}", lo=lo)
        return lo, hi
    n = check_int(raw, f"{t.path}.{key}", lo=1)
    return n, n


def _window(t: Table, meta: Meta) -> tuple[float, float, int | None, str, float]:
    """start_s, stop_s, count, process and rate of a generator over time."""
    start = t.number("start_s", meta.warmup_s, lo=0.0)
    stop = t.number("stop_s", meta.duration_s, lo=0.0)
    if stop > meta.duration_s:
        raise t.err("stop_s", f"must be <= scenario.duration_s ({meta.duration_s:g})")
    if start >= stop:
        raise t.err("start_s", f"must be less than stop_s ({stop:g})")
    return (start, stop, t.opt_integer("count", lo=1),
            t.string("process", "poisson", choices=("poisson", "periodic")),
            t.number("rate_per_s", lo=0.0, lo_open=True))


def _generator(t: Table, ids: set[int], meta: Meta, groups: Mapping[str, tuple[int, ...]]
               ) -> PublicationGen:
    templates = [event_template(tt, frozenset(groups)) for tt in t.tables("templates")]
    if not templates:
        raise t.err("templates", "at least one event template is needed")
    start, stop, count, process, rate = _window(t, meta)
    gen = PublicationGen(
        rate_per_s=rate,
        process=process,
        start_s=start,
        stop_s=stop,
        count=count,
        publishers=_node_list(t, "publishers", ids, groups),
        templates=tuple(templates),
        publisher_weight=t.string("publisher_weight", "uniform", choices=PUBLISHER_WEIGHTS),
    )
    t.done()
    return gen


def _arrivals(t: Table, ids: set[int], meta: Meta, groups: Mapping[str, tuple[int, ...]]
              ) -> SubscriptionArrivals:
    """``[workload.arrivals]``: subscriptions over time, each ending in an unsubscribe."""
    templates = tuple(sub_template(tt) for tt in t.tables("templates"))
    if not templates:
        raise t.err("templates", "at least one subscription template is needed")
    start, stop, count, process, rate = _window(t, meta)
    life = lifetime(t.raw("lifetime", "forever"), f"{t.path}.lifetime")
    gen = SubscriptionArrivals(rate, process, start, stop, count,
                               _node_list(t, "nodes", ids, groups), templates, life,
                               _steady_state_window(t, process, life, start, stop))
    t.done()
    return gen


STEADY_STATE_WINDOW_S = 30.0
"""How long the steady-state population takes to be issued, unless given."""


def _steady_state_window(t: Table, process: str, life: Lifetime, start: float, stop: float
                         ) -> float | None:
    """``steady_state`` and ``steady_state_window_s``: the issue window, or None (off)."""
    if not t.boolean("steady_state", False):
        if t.has("steady_state_window_s"):
            raise t.err("steady_state_window_s", "only with steady_state = true")
        return None
    if process != "poisson":
        raise t.err("steady_state", 'only for process = "poisson" (its steady state is '
                                    "the one drawn)")
    if life.kind == "forever":
        raise t.err("steady_state", "needs a lifetime: subscriptions that last forever "
                                    "have no steady state")
    window = t.number("steady_state_window_s", STEADY_STATE_WINDOW_S, lo=0.0, lo_open=True)
    if start + window > stop:
        raise t.err("steady_state_window_s", f"start_s + {window:g} s is after stop_s "
                                             f"({stop:g})")
    return window


def _gps(t: Table, ids: set[int], meta: Meta) -> GpsSettings:
    """``[gps]``: simulated receivers; ranges here, cross-field rules in ``GpsSettings``."""
    end_s = meta.duration_s + meta.drain_s
    outages = []
    for ot in t.tables("outages"):
        start = ot.number("start_s", lo=0.0)
        end = ot.number("end_s", lo=0.0)
        if end <= start:
            raise ot.err("end_s", f"must be greater than start_s ({start:g})")
        if start >= end_s:
            raise ot.err("start_s", f"must be before the end of the run ({end_s:g} s)")
        nodes = None if ot.raw("nodes", "all") == "all" else _node_list(ot, "nodes", ids)
        ot.done()
        outages.append(Outage(start, end, nodes))
    hdop = t.opt_number("hdop", lo=0.0, lo_open=True)
    if hdop is not None and hdop > MAX_HDOP:
        raise t.err("hdop", f"must be <= {MAX_HDOP:g} (got {hdop:g})")
    values: dict[str, Any] = dict(
        enabled=t.boolean("enabled", False),
        rate_hz=t.number("rate_hz", 1.0, lo=0.0, lo_open=True, hi=MAX_RATE_HZ),
        noise_m=t.number("noise_m", 3.0, lo=0.0, hi=MAX_NOISE_M),
        correlation_s=t.number("correlation_s", 60.0, lo=0.0),
        white_fraction=t.number("white_fraction", 0.2, lo=0.0, hi=1.0),
        hdop_spread=t.number("hdop_spread", 0.0, lo=0.0, hi=1.0),
        satellites=t.integer("satellites", 8, lo=1, hi=12),
        satellites_in_view=t.integer("satellites_in_view", 11, lo=1, hi=32),
        fix_loss_per_s=t.number("fix_loss_per_s", 0.0, lo=0.0, hi=1.0),
        outage_mean_s=t.number("outage_mean_s", 10.0, lo=0.0, lo_open=True),
    )
    t.done()
    try:
        gps = GpsSettings(hdop=hdop, outages=tuple(outages), **values)
    except GpsSettingsError as exc:
        raise t.err(exc.key, exc.problem) from None
    return gps


def _energy(t: Table, ids: set[int], nodes: Nodes) -> Energy:
    """``[energy]``: simulated batteries (the simulator's energy input to protocols)."""
    groups = {g.name: g.ids for g in nodes.groups}
    listed = _node_list(t, "mains", ids, groups) if t.has("mains") else ()
    mains = tuple(sorted(set(listed).union(*(g.ids for g in nodes.groups if g.mains))))
    energy = Energy(
        enabled=t.boolean("enabled", False),
        initial_j=t.number("initial_j", 2.0, lo=0.0, lo_open=True),
        report_s=t.number("report_s", 10.0, lo=0.0, lo_open=True),
        range_m=t.opt_number("range_m", lo=0.0, lo_open=True),
        mains=mains,
    )
    t.done()
    return energy


# ---------------------------------------------------------------------- helpers


def _node_ref(t: Table, key: str, ids: set[int]) -> int:
    node = t.integer(key)
    if node not in ids:
        raise t.err(key, f"unknown node {node}")
    return node


def _node_list(t: Table, key: str, ids: set[int],
               groups: Mapping[str, tuple[int, ...]] | None = None) -> tuple[int, ...]:
    """``"all"``, a node group's name, or a non-empty array of node ids."""
    raw = t.raw(key, "all")
    if raw == "all":
        return tuple(sorted(ids))
    if isinstance(raw, str) and groups is not None:
        if raw not in groups:
            raise t.err(key, f"{raw!r} is neither \"all\" nor a node group "
                             f"({', '.join(sorted(groups)) or 'none defined'})")
        return tuple(sorted(groups[raw]))
    if not isinstance(raw, list) or not raw:
        raise t.err(key, f"expected \"all\"{', a group name' if groups else ''} or a "
                         f"non-empty array of node ids, got {type_name(raw)}")
    out = []
    for i, v in enumerate(raw):
        node = check_int(v, f"{t.path}.{key}[{i}]")
        if node not in ids:
            raise ScenarioError(f"{t.path}.{key}[{i}]", f"unknown node {node}")
        out.append(node)
    return tuple(sorted(set(out)))


def _parse_sub(t: Table, key: str, expr: str) -> Any:
    try:
        return parse_subscription(expr)
    except ContentError as exc:
        raise t.err(key, str(exc)) from None


def _parse_alternatives(t: Table, key: str, expr: str) -> tuple[Subscription, ...]:
    try:
        return parse_alternatives(expr)
    except ContentError as exc:
        raise t.err(key, str(exc)) from None


def _parse_event(t: Table, key: str, text: str) -> Any:
    try:
        return parse_event(text)
    except ContentError as exc:
        raise t.err(key, str(exc)) from None


def _read_lines(base_dir: Path, name: str, key: str) -> Iterable[str]:
    path = Path(name) if Path(name).is_absolute() else base_dir / name
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ScenarioError(key, f"cannot read {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError(key, f"{str(path)!r} is not UTF-8 text") from None
