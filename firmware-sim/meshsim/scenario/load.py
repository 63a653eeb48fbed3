"""Read and validate a scenario file: TOML text -> ``Scenario``.

Everything that can be checked without running is checked here (types, ranges,
node ids, expressions with the real parser, protocol name and parameters with
the protocol's own ``Params``), so ``meshsim validate`` catches what a run would.
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from collections.abc import Iterable, Sequence
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
from meshsim.medium.radio import LINK_CUTOFF, make_model
from meshsim.scenario.mobility_section import parse_mobility
from meshsim.scenario.model import (
    PLACEMENTS,
    RADIO_MODELS,
    Area,
    AttrDist,
    Contact,
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
    SubscriptionSpec,
    Template,
    WeightedExpr,
    Workload,
)
from meshsim.scenario.overrides import apply_override
from meshsim.scenario.reader import ScenarioError, Table, check_int, check_number, type_name
from meshsim.scenario.traces import parse_contact_line, parse_contacts
from meshsub.core.content import ContentError
from meshsub.core.params import ParameterError, ProtocolParams, parse_params
from meshsub.core.protocol import Protocol
from meshsub.core.registry import UnknownProtocolError, get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.runtime.mqtt import PayloadError, check_sub_id

LOG_DISTANCE_KEYS = ("tx_power_dbm", "ref_loss_db", "ref_distance_m", "path_loss_exp",
                     "noise_floor_dbm", "frame_bytes")
ATTR_KINDS = ("uniform_int", "uniform_float", "choice", "const", "random_text")
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
    nodes = _nodes(root.table("nodes", required=True), area)
    ids = set(nodes.ids)
    radio = _radio(root.table("radio"), ids)
    mobility = _mobility(root.table("mobility"), nodes, area, meta, base_dir)
    contacts = _contacts(root, ids, base_dir)
    protocol = _protocol(root.table("protocol", required=True))
    workload = _workload(root.table("workload"), ids, meta)
    gps = _gps(root.table("gps"), ids, meta)
    root.done()
    return Scenario(meta, area, radio, nodes, mobility, contacts, protocol, workload,
                    gps=gps, source=copy.deepcopy(doc), overrides=overrides)


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
    )
    if meta.warmup_s >= meta.duration_s:
        raise t.err("warmup_s", "must be less than duration_s")
    t.done()
    return meta


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


def _nodes(t: Table, area: Area) -> Nodes:
    placement = t.string("placement", choices=PLACEMENTS)
    positions: list[tuple[int, float, float]] = []
    if placement == "explicit":
        for pt in t.tables("positions"):
            pid = pt.integer("id", len(positions) + 1, lo=0, hi=0xFFFF_FFFF)
            x = pt.number("x", lo=0.0, hi=area.width_m)
            y = pt.number("y", lo=0.0, hi=area.height_m)
            pt.done()
            positions.append((pid, x, y))
        if not positions:
            raise t.err("positions", "explicit placement needs at least one position")
        count = t.integer("count", len(positions), lo=1)
        if count != len(positions):
            raise t.err("count", f"is {count} but {len(positions)} positions are listed")
        ids = [p[0] for p in positions]
        dup = next((i for i in ids if ids.count(i) > 1), None)
        if dup is not None:
            raise t.err("positions", f"node id {dup} appears twice")
    else:
        if t.has("positions"):
            t.raw("positions")
            raise t.err("positions", f"only for placement = \"explicit\" (not {placement!r})")
        count = t.integer("count", lo=1, hi=100_000)
        first = t.integer("first_id", 1, lo=0, hi=0xFFFF_FFFF - count + 1)
        ids = list(range(first, first + count))
    pinned: list[tuple[int, float, float]] = []
    for pt in t.tables("pinned"):
        pid = pt.integer("id", lo=0, hi=0xFFFF_FFFF)
        if placement == "explicit":
            raise t.err("pinned", "not with placement = \"explicit\" (list the position there)")
        if pid not in ids:
            raise pt.err("id", f"node {pid} is not one of the scenario's nodes")
        if any(p[0] == pid for p in pinned):
            raise pt.err("id", f"node {pid} is pinned twice")
        x = pt.number("x", lo=0.0, hi=area.width_m)
        y = pt.number("y", lo=0.0, hi=area.height_m)
        pt.done()
        pinned.append((pid, x, y))
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


def _mobility(t: Table, nodes: Nodes, area: Area, meta: Meta, base_dir: Path) -> Mobility:
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


def _protocol(t: Table) -> ProtocolSpec:
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
    for key, values in tables.items():
        cls = _protocol_class(t, key, "name" if key == name else key)
        try:
            params = parse_params(cls.Params, dict(values.data))
        except ParameterError as exc:
            raise ScenarioError(f"{values.path}.{exc.key}", exc.problem) from None
        except ValueError as exc:
            raise ScenarioError(values.path, str(exc)) from None
        if key == name:
            selected = params
    assert selected is not None
    return ProtocolSpec(name, selected)


def _protocol_class(t: Table, name: str, key: str) -> type[Protocol]:
    """The registered protocol ``name``; errors name ``protocol.<key>``."""
    try:
        return get_protocol(name)
    except UnknownProtocolError as exc:
        raise t.err(key, str(exc) if key == "name" else f"not a protocol's parameter table "
                         f"({str(exc).removeprefix('unknown ')})") from None
    except Exception as exc:  # a broken plugin must not crash validation
        raise t.err(key, f"cannot load protocol {name!r}: {exc}") from None


def _workload(t: Table, ids: set[int], meta: Meta) -> Workload:
    subs = []
    for i, st in enumerate(t.tables("subscriptions")):
        node = _node_ref(st, "node", ids)
        expr = st.string("expr")
        sub_id = st.string("id", "")
        if sub_id:
            try:  # the virtual mesh subscribes over MQTT: the same id rules apply
                check_sub_id(sub_id)
            except PayloadError as exc:
                raise st.err("id", str(exc)) from None
        start = st.number("t", 0.0, lo=0.0)
        st.done()
        subs.append(SubscriptionSpec(node, expr, _parse_sub(st, "expr", expr), start,
                                     sub_id or f"s{i}"))
    pubs = []
    for pt in t.tables("publications"):
        node = _node_ref(pt, "node", ids)
        when = pt.number("t", lo=0.0)
        if when >= meta.duration_s:
            raise pt.err("t", f"must be before scenario.duration_s ({meta.duration_s:g})")
        text = pt.string("event")
        pt.done()
        pubs.append(PublicationSpec(when, node, text, _parse_event(pt, "event", text)))
    subscribers = _subscribers(t.table("subscribers"), ids) if t.has("subscribers") else None
    generator = _generator(t.table("generator"), ids, meta) if t.has("generator") else None
    t.done()
    seen: set[tuple[int, str]] = set()
    for i, s in enumerate(subs):
        if (s.node, s.sub_id) in seen:
            raise ScenarioError(f"workload.subscriptions[{i}].id",
                                f"duplicate id {s.sub_id!r} on node {s.node}")
        seen.add((s.node, s.sub_id))
    return Workload(tuple(subs), subscribers, tuple(sorted(pubs, key=lambda p: p.t)), generator)


def _subscribers(t: Table, ids: set[int]) -> SubscriberGen:
    count = t.opt_integer("count", lo=0)
    fraction = t.opt_number("fraction", lo=0.0)
    if fraction is not None and fraction > 1.0:
        raise t.err("fraction", f"must be <= 1 (got {fraction:g})")
    if (count is None) == (fraction is None):
        raise t.err("count", "give exactly one of count and fraction")
    candidates = _node_list(t, "nodes", ids)
    if count is not None and count > len(candidates):
        raise t.err("count", f"is {count} but only {len(candidates)} candidate nodes exist")
    exprs = []
    for et in t.tables("expressions"):
        expr = et.string("expr")
        weight = et.number("weight", 1.0, lo=0.0, lo_open=True)
        et.done()
        exprs.append(WeightedExpr(expr, _parse_sub(et, "expr", expr), weight))
    if not exprs:
        raise t.err("expressions", "at least one expression is needed")
    gen = SubscriberGen(count, fraction, candidates, t.integer("per_node", 1, lo=1),
                        tuple(exprs), t.number("t", 0.0, lo=0.0),
                        t.number("interval_s", 0.0, lo=0.0))
    t.done()
    return gen


def _generator(t: Table, ids: set[int], meta: Meta) -> PublicationGen:
    templates = []
    for tt in t.tables("templates"):
        topic = tt.string("topic")
        weight = tt.number("weight", 1.0, lo=0.0, lo_open=True)
        at = tt.table("attrs")
        attrs = tuple((name, _attr_dist(at, name)) for name in sorted(at.data))
        at.done()
        tt.done()
        template = Template(topic, weight, attrs)
        _parse_event(tt, "topic", topic, template)
        templates.append(template)
    if not templates:
        raise t.err("templates", "at least one event template is needed")
    start = t.number("start_s", meta.warmup_s, lo=0.0)
    stop = t.number("stop_s", meta.duration_s, lo=0.0)
    if stop > meta.duration_s:
        raise t.err("stop_s", f"must be <= scenario.duration_s ({meta.duration_s:g})")
    if start >= stop:
        raise t.err("start_s", f"must be less than stop_s ({stop:g})")
    gen = PublicationGen(
        rate_per_s=t.number("rate_per_s", lo=0.0, lo_open=True),
        process=t.string("process", "poisson", choices=("poisson", "periodic")),
        start_s=start,
        stop_s=stop,
        count=t.opt_integer("count", lo=1),
        publishers=_node_list(t, "publishers", ids),
        templates=tuple(templates),
        publisher_weight=t.string("publisher_weight", "uniform", choices=PUBLISHER_WEIGHTS),
    )
    t.done()
    return gen


def _attr_dist(t: Table, name: str) -> AttrDist:
    spec = t.raw(name)
    path = f"{t.path}.{name}"
    if not isinstance(spec, dict):
        return AttrDist("const", (_scalar(spec, path),))
    st = Table(spec, path)
    kinds = [k for k in ATTR_KINDS if k in spec]
    if len(kinds) != 1:
        st.raw("decimals", None)
        for k in ATTR_KINDS:
            st.raw(k, None)
        st.done()
        raise ScenarioError(path, f"give exactly one of {', '.join(ATTR_KINDS)}")
    kind = kinds[0]
    decimals = st.opt_integer("decimals", lo=0)
    raw = st.raw(kind)
    st.done()
    where = f"{path}.{kind}"
    if kind == "const":
        return AttrDist(kind, (_scalar(raw, where),))
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(where, f"expected a non-empty array, got {type_name(raw)}")
    if kind == "choice":
        return AttrDist(kind, tuple(_scalar(v, where) for v in raw))
    if len(raw) != 2:
        raise ScenarioError(where, "expected [low, high]")
    lo: float
    hi: float
    if kind in ("uniform_int", "random_text"):
        lo, hi = check_int(raw[0], where), check_int(raw[1], where)
        if kind == "random_text" and not 0 <= lo <= hi <= 1024:
            raise ScenarioError(where, "text lengths must be within 0..1024")
    else:
        lo, hi = check_number(raw[0], where), check_number(raw[1], where)
    if lo > hi:
        raise ScenarioError(where, "low must not exceed high")
    return AttrDist(kind, (lo, hi), decimals)


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


# ---------------------------------------------------------------------- helpers


def _scalar(value: Any, path: str) -> int | float | str | bool:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return check_number(value, path)
    raise ScenarioError(path, f"expected a number, string or boolean, got {type_name(value)}")


def _node_ref(t: Table, key: str, ids: set[int]) -> int:
    node = t.integer(key)
    if node not in ids:
        raise t.err(key, f"unknown node {node}")
    return node


def _node_list(t: Table, key: str, ids: set[int]) -> tuple[int, ...]:
    raw = t.raw(key, "all")
    if raw == "all":
        return tuple(sorted(ids))
    if not isinstance(raw, list) or not raw:
        raise t.err(key, f"expected \"all\" or a non-empty array of node ids, got "
                         f"{type_name(raw)}")
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


def _parse_event(t: Table, key: str, text: str, template: Template | None = None) -> Any:
    """Parse an event text, or check a template by building one sample event."""
    try:
        if template is None:
            return parse_event(text)
        from meshsim.scenario.plan import sample_event  # plan imports this module

        return sample_event(template, None)
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
