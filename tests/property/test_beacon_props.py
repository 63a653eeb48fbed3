"""The shared one-hop beacon (``meshsub.core.beacon``): bounds, expiry, recency, rate limit.

The table is driven by random sequences of beacons (sizes, times), forgets and
expiries, against a plain model: a dict (refusing when full) or a least-recently-heard
``OrderedDict`` (the tree-group machine's table before it used this module). Whatever
the sequence, it never holds more than its bounds in entries or bytes, its byte count
is the sum of its entries', a refused beacon changes nothing, expiry returns exactly
the silent neighbours and a refreshed one survives. The schedule's triggered beacons
are never closer than ``min_gap`` periods, and its draws are those of DIBS's own
trigger rule before the beacon was shared (so simulated runs stay identical).
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.beacon import BeaconSchedule, BeaconTable, Status

NODES = st.integers(1, 12)
OPS = st.lists(st.one_of(
    st.tuples(st.just("hear"), NODES, st.integers(0, 60), st.floats(0.0, 2.0)),
    st.tuples(st.just("forget"), NODES, st.just(0), st.floats(0.0, 2.0)),
    st.tuples(st.just("expire"), NODES, st.just(0), st.floats(0.0, 2.0)),
    st.tuples(st.just("silent"), NODES, st.just(0), st.floats(0.0, 2.0)),
), max_size=80)


def _size(state: tuple[int, int]) -> int:
    return state[1]


@settings(max_examples=300, deadline=None)
@given(ops=OPS, max_entries=st.integers(1, 6), max_bytes=st.integers(0, 150),
       evict=st.booleans(), after=st.floats(0.5, 4.0))
def test_table_follows_its_model_within_bounds(ops: list[tuple[str, int, int, float]],
                                               max_entries: int, max_bytes: int, evict: bool,
                                               after: float) -> None:
    table: BeaconTable[tuple[int, int]] = BeaconTable(
        max_entries=max_entries, max_bytes=max_bytes, size_of=_size, evict_stalest=evict)
    model: OrderedDict[int, tuple[float, int]] = OrderedDict()  # least recently heard first
    first: list[int] = []  # the order of first hearing (the table's iteration order)
    now, serial = 0.0, 0
    for op, node, size, step in ops:
        now += step
        if op == "hear":
            serial += 1
            before = {n: (e.last_heard, e.state) for n, e in table.items()}
            heard = table.hear(node, (serial, size), now)
            in_model = node in model
            if size > max_bytes:
                assert heard.status is Status.TOO_BIG and not heard.kept
            else:
                others = sum(s for n, (_, s) in model.items() if n != node)
                full = not in_model and len(model) >= max_entries
                if (full or others + size > max_bytes) and not evict:
                    assert heard.status is Status.FULL and not heard.kept
                else:
                    evicted = []
                    while (not in_model and len(model) >= max_entries) \
                            or sum(s for n, (_, s) in model.items() if n != node) + size \
                            > max_bytes:
                        stalest = next(n for n in model if n != node)
                        del model[stalest]
                        evicted.append(stalest)
                    assert heard.kept and list(heard.evicted) == evicted
                    assert heard.status is (Status.REFRESHED if in_model else Status.NEW)
                    model[node] = (now, size)
                    model.move_to_end(node)
            if not heard.kept:  # a refusal changes nothing
                assert {n: (e.last_heard, e.state) for n, e in table.items()} == before
        elif op == "forget":
            gone = table.forget(node)
            assert (gone is not None) == (node in model)
            model.pop(node, None)
        else:
            silent = [n for n in first if n in model and now - model[n][0] > after]
            if op == "silent":
                assert table.silent(now, after) == silent
            else:
                assert [e.node for e in table.expire(now, after)] == silent
                for n in silent:
                    del model[n]
                assert all(now - e.last_heard <= after for e in table.entries())
        first = [n for n in first if n in model] + [n for n in model if n not in first]
        assert len(table) <= max_entries and table.bytes <= max_bytes
        assert table.bytes == sum(e.size for e in table.entries())
        assert list(table) == first
        assert {n: (e.last_heard, e.size) for n, e in table.items()} == dict(model)


@settings(max_examples=200, deadline=None)
@given(beats=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=30),
       after=st.floats(0.1, 5.0))
def test_a_refreshed_neighbour_outlives_the_silent_ones(beats: list[float], after: float) -> None:
    """Node 1 beacons at least every ``after`` seconds; node 2 once: only 2 expires."""
    table: BeaconTable[int] = BeaconTable(max_entries=4, max_bytes=0)
    table.hear(2, 0, 0.0)
    now, silent_there = 0.0, True
    for gap in beats:
        now += min(gap, after)
        assert table.hear(1, 0, now).kept
        want = [2] if silent_there and now > after else []
        assert [e.node for e in table.expire(now, after)] == want
        silent_there = silent_there and not want
        assert 1 in table and (2 in table) == silent_there


def _old_dibs_trigger(last: float, now: float, period: float,
                      rng: random.Random) -> tuple[float, float | None]:
    """DIBS's trigger rule as CRES had it before the shared beacon (its regression model)."""
    if last > now:
        return last, None
    at = max(now + rng.uniform(0.02, 0.1), last + 0.2 * period)
    return at, at - now


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60),
       periods=st.lists(st.floats(0.05, 5.0), min_size=1, max_size=60),
       seed=st.integers(0, 2**32))
def test_triggered_beacons_respect_the_rate_limit(steps: list[float], periods: list[float],
                                                  seed: int) -> None:
    sched = BeaconSchedule(min_gap=0.2)
    rng, old_rng = random.Random(seed), random.Random(seed)
    now, last, old_last, due = 0.0, -math.inf, -1.0 * (1 << 30), math.inf
    for i, step in enumerate(steps):
        now += step
        if due <= now:
            due = math.inf  # the triggered beacon went out
        period = periods[i % len(periods)]
        pending = sched.pending(now)
        delay = sched.trigger(now, period, rng)
        old_last, old_delay = _old_dibs_trigger(old_last, now, period, old_rng)
        assert delay == old_delay  # the same decisions and the same random draws
        assert (delay is None) == pending
        if delay is None:
            continue
        at = now + delay
        assert at - last >= 0.2 * period * (1 - 1e-12)  # never closer than the limit
        assert 0.02 * (1 - 1e-12) <= delay <= max(0.1, last + 0.2 * period - now) + 1e-9
        last, due = at, at
    assert rng.random() == old_rng.random()


@given(period=st.floats(0.01, 100.0), seed=st.integers(0, 2**32))
def test_periodic_delays_stay_in_their_ranges(period: float, seed: int) -> None:
    sched = BeaconSchedule()
    rng = random.Random(seed)
    assert 0.0 <= sched.phase(period, rng) <= period
    assert 0.9 * period * (1 - 1e-12) <= sched.interval(period, rng) <= 1.1 * period * (1 + 1e-12)
