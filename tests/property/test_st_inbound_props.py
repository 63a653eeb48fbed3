"""ST's inbound tables: in whatever order (and repetition) SUBS messages come, the result is right.

The sender's side is modelled as ST sends: a full table of generation g in
parts, then deltas numbered 1, 2, ... of g; later perhaps a new full table (g + 1)
and its deltas. Delivered completely, in any order and with repeats, the
receiver's table must be the sender's last table; delivered in order but
with a newer full table missing, never a table that mixes generations.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.content import Subscription
from meshsub.core.tags import conjunction
from meshsub.protocols.st.inbound import MAX_WAITING, Inbound, Outcome
from meshsub.protocols.st.messages import Subs

POOL = [conjunction("t", [f"i{i}"]) for i in range(40)]


def stream(tables: list[set[int]], fulls: set[int], per_part: int) -> list[Subs]:
    """The messages a sender emits for successive tables; a full table at the indices in fulls."""
    out: list[Subs] = []
    gen, seq = 0, 0
    prev: set[int] = set()
    for i, table in enumerate(tables):
        if i == 0 or i in fulls:
            gen += 1
            seq = 0
            items = sorted(table)
            parts = [items[j:j + per_part] for j in range(0, len(items), per_part)] or [[]]
            out += [Subs(gen, 0, n, len(parts), tuple(POOL[k] for k in part), ())
                    for n, part in enumerate(parts)]
        else:
            adds, removes = sorted(table - prev), sorted(prev - table)
            if adds or removes:
                seq += 1
                out.append(Subs(gen, seq, 0, 0, tuple(POOL[k] for k in adds),
                                tuple(POOL[k] for k in removes)))
        prev = table
    return out


def keys(table: dict[bytes, Subscription]) -> set[int]:
    return {POOL.index(s) for s in table.values()}


tables_st = st.lists(st.sets(st.integers(0, len(POOL) - 1), max_size=12), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(tables_st, st.sets(st.integers(1, 7)), st.integers(1, 4), st.randoms(use_true_random=False),
       st.integers(0, 5))
def test_any_order_and_repeats_end_in_the_last_table(
        tables: list[set[int]], fulls: set[int], per_part: int, rnd: object, repeats: int) -> None:
    msgs = stream(tables, fulls, per_part)
    shuffled = msgs + [msgs[i % len(msgs)] for i in range(repeats)]
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    inbound = Inbound(max_table=100)
    for m in shuffled:
        inbound.receive(m)
    assert keys(inbound.table) == tables[-1]


@settings(max_examples=200, deadline=None)
@given(tables_st, st.sets(st.integers(1, 7)), st.integers(1, 4), st.data())
def test_a_lost_message_never_mixes_generations(
        tables: list[set[int]], fulls: set[int], per_part: int, data: st.DataObject) -> None:
    """In order, one message lost: the table is always one the sender had at some point."""
    msgs = stream(tables, fulls, per_part)
    lost = data.draw(st.integers(0, len(msgs) - 1))
    inbound = Inbound(max_table=100)
    for i, m in enumerate(msgs):
        if i != lost:
            inbound.receive(m)
            if inbound.gen is not None:
                assert keys(inbound.table) in tables


def test_the_seen_bug_a_late_first_part_does_not_erase_the_rest() -> None:
    """The simulator's case: part 1 (small) overtook part 0 (large) of a refresh."""
    first = Subs(7, 0, 0, 2, tuple(POOL[:32]), ())
    second = Subs(7, 0, 1, 2, tuple(POOL[32:36]), ())
    inbound = Inbound(max_table=100)
    assert inbound.receive(second) is Outcome.WAITING
    assert inbound.receive(first) is Outcome.APPLIED
    assert keys(inbound.table) == set(range(36))
    assert inbound.receive(first) is Outcome.STALE


def test_bounded_while_waiting() -> None:
    inbound = Inbound(max_table=100)
    held = [inbound.receive(Subs(1, seq, 0, 0, (POOL[0],), ())) for seq in range(2, 2 + 80)]
    assert held.count(Outcome.WAITING) == MAX_WAITING
    assert held.count(Outcome.OVERFLOW) == 80 - MAX_WAITING
    full = Inbound(max_table=3)
    assert full.receive(Subs(1, 0, 0, 1, tuple(POOL[:5]), ())) is Outcome.TABLE_FULL
    assert len(full.table) == 3
