"""The ARV-level false-positive check of the BRVST evaluation, as a reusable function.

Li and Wang (2014, §V-C, Fig. 9(a)) report an event-level false-positive rate
"approximately bounded by 1 - alpha" with no numbers; docs/protocols/brvst.md
("FP figures") describes the check made here: 15 attributes on the integer
domain [0, 100) (q = 1, Lmax 9), subscriptions and publications with 1-3
attributes each, a range drawn as two sorted uniform integer endpoints
``a..b`` (the half-open ``[a, b + 1)``), a point ``v`` as ``[v, v + 1)``;
every subscription is tested against every publication that carries all its
attributes, and

    FP = ARV matches that are not true matches / all ARV matches.

``run`` returns the counts so a test can put a binomial tolerance on them
and a bench can pool seeds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

from meshsub.core.arv import ARV, Comparator, Domain, Interval, attr_matches, build

DOMAIN = Domain(Fraction(0), Fraction(100), Fraction(1), 9)
ATTRIBUTES = 15


@dataclass(frozen=True, slots=True)
class Counts:
    arv_matches: int
    false_positives: int
    true_matches: int
    false_negatives: int

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.arv_matches + other.arv_matches,
                      self.false_positives + other.false_positives,
                      self.true_matches + other.true_matches,
                      self.false_negatives + other.false_negatives)

    @property
    def fp_rate(self) -> float:
        return self.false_positives / self.arv_matches if self.arv_matches else 0.0


def draw(rng: random.Random, points: bool) -> dict[int, Interval]:
    """One message: 1-3 distinct attributes, each a point or a range on 0..99."""
    out: dict[int, Interval] = {}
    for attr in rng.sample(range(ATTRIBUTES), rng.randint(1, 3)):
        if points:
            v = rng.randint(0, 99)
            out[attr] = (Fraction(v), Fraction(v + 1))
        else:
            a, b = sorted((rng.randint(0, 99), rng.randint(0, 99)))
            out[attr] = (Fraction(a), Fraction(b + 1))
    return out


def run(seed: int, alpha: Fraction, *, points: bool, comparators: tuple[Comparator, ...],
        n: int = 250) -> dict[Comparator, Counts]:
    """``n`` subscriptions (ranges) against ``n`` publications (points or ranges)."""
    rng = random.Random(seed)
    subs = [draw(rng, False) for _ in range(n)]
    pubs = [draw(rng, points) for _ in range(n)]
    s_arvs = [_arvs(s, alpha) for s in subs]
    p_arvs = [_arvs(p, alpha) for p in pubs]
    totals = {mode: Counts(0, 0, 0, 0) for mode in comparators}
    for sub, sv in zip(subs, s_arvs, strict=True):
        for pub, pv in zip(pubs, p_arvs, strict=True):
            if not sub.keys() <= pub.keys():
                continue
            truth = all(sub[a][0] <= pub[a][0] and pub[a][1] <= sub[a][1] for a in sub)
            for mode in comparators:
                hit = all(attr_matches(pv[a], sv[a], mode, p_exact=pub[a], domain=DOMAIN)
                          for a in sub)
                totals[mode] = totals[mode] + Counts(int(hit), int(hit and not truth),
                                                     int(truth), int(truth and not hit))
    return totals


def _arvs(message: dict[int, Interval], alpha: Fraction) -> dict[int, ARV]:
    return {a: build(DOMAIN, lo, hi, alpha) for a, (lo, hi) in message.items()}
