"""MatcherIndex.match against a linear scan of Subscription.matches, on one workload.

Workload: 100 topics with Zipf-like popularity (for subscriptions and events
alike), 10% wildcard filters, 1-3 predicates per subscription over four
attributes (float ranges and thresholds, string equality / membership /
prefix, integer bounds and ``!=``, bool equality). Prints, per subscription
count, build time, events/s of both matchers and the mean number of matches
per event; the linear scan sees fewer events (it is slow) and its answers are
checked against the index's.

    .venv/bin/python bench/bench_matcher.py [--sizes 100,10000,100000]
"""

from __future__ import annotations

import argparse
import random
import time

from meshsub.core.content import Event, Op, Predicate, Subscription
from meshsub.core.index import MatcherIndex

TOPICS = [f"site{t % 10}/floor{t // 10}/sensors" for t in range(100)]
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(TOPICS))]
ROOMS = [f"room-{c}{n}" for c in "abcd" for n in range(5)]


def _topic(rnd: random.Random) -> str:
    return rnd.choices(TOPICS, WEIGHTS)[0]


def make_subscription(rnd: random.Random) -> Subscription:
    if rnd.random() < 0.1:
        site, floor = rnd.randrange(10), rnd.randrange(10)
        topic = rnd.choice([f"site{site}/+/sensors", f"+/floor{floor}/sensors", f"site{site}/#"])
    else:
        topic = _topic(rnd)
    kinds = rnd.sample(["temp", "temp", "room", "level", "ok"], rnd.randint(1, 3))
    preds: list[Predicate] = []
    for attr in dict.fromkeys(kinds):
        roll = rnd.random()
        if attr == "temp":
            lo = round(rnd.uniform(0, 35), 1)
            if roll < 0.5:
                preds.append(Predicate.between("temp", lo, lo + rnd.uniform(1, 10), True, False))
            else:
                preds.append(Predicate.compare("temp", rnd.choice([">", ">=", "<", "<="]), lo))
        elif attr == "room":
            if roll < 0.6:
                preds.append(Predicate.compare("room", "=", rnd.choice(ROOMS)))
            elif roll < 0.9:
                preds.append(Predicate.one_of("room", rnd.sample(ROOMS, 3)))
            else:
                preds.append(Predicate.starts_with("room", f"room-{rnd.choice('abcd')}"))
        elif attr == "level":
            if roll < 0.8:
                preds.append(Predicate.compare("level", ">=", rnd.randrange(10)))
            else:
                preds.append(Predicate.compare("level", "!=", rnd.randrange(10)))
        else:
            preds.append(Predicate("ok", Op.EQ, value=rnd.random() < 0.8))
    return Subscription(topic, tuple(preds))


def make_event(rnd: random.Random) -> Event:
    return Event(
        _topic(rnd),
        {
            "temp": round(rnd.uniform(0, 40), 2),
            "room": rnd.choice(ROOMS),
            "level": rnd.randrange(10),
            "ok": rnd.random() < 0.9,
            "seq": rnd.randrange(1 << 30),
        },
    )


def run(size: int, n_events: int, n_scan: int, seed: int) -> None:
    rnd = random.Random(seed)
    subs = [(f"s{i}", make_subscription(rnd)) for i in range(size)]
    events = [make_event(rnd) for _ in range(n_events)]

    t0 = time.perf_counter()
    index = MatcherIndex()
    for sub_id, sub in subs:
        index.add(sub_id, sub)
    index.match(events[0])  # sorts the threshold arrays once, as any first match would
    build = time.perf_counter() - t0

    t0 = time.perf_counter()
    total = 0
    results = []
    for event in events:
        found = index.match(event)
        total += len(found)
        results.append(found)
    t_index = time.perf_counter() - t0

    scan_events = events[:n_scan]
    t0 = time.perf_counter()
    scanned = [{sid for sid, s in subs if s.matches(e)} for e in scan_events]
    t_scan = time.perf_counter() - t0
    assert scanned == results[:n_scan], "index and linear scan disagree"

    idx_rate = n_events / t_index
    scan_rate = n_scan / t_scan
    print(
        f"{size:>7} subs | build {build:6.2f} s | index {idx_rate:9.0f} ev/s ({n_events} ev)"
        f" | scan {scan_rate:8.1f} ev/s ({n_scan} ev) | x{idx_rate / scan_rate:7.1f}"
        f" | {total / n_events:7.1f} matches/ev"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        n_events = 20000 if size <= 1000 else 4000 if size <= 10000 else 1000
        n_scan = max(10, min(2000, 2_000_000 // size))
        run(size, n_events, n_scan, args.seed)


if __name__ == "__main__":
    main()
