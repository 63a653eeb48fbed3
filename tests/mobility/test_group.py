"""Reference point group mobility: members stay within the radius of their reference."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.mobility.geometry import Box
from meshsim.mobility.group import member_track, reference_track
from meshsim.scenario.model import GroupMobility


def _group(radius: float = 25.0, step: float = 2.0) -> GroupMobility:
    return GroupMobility(groups=((1, 2, 3),), radius=radius, speed_min=1.0, speed_max=8.0,
                         pause_min=0.0, pause_max=20.0, member_step=step)


def test_members_stay_within_the_radius_and_the_area() -> None:
    box = Box(0.0, 0.0, 400.0, 300.0)
    p = _group()
    ref = reference_track(random.Random("g"), box, p, 600.0)
    inner = box.inset(p.radius)
    assert all(inner.contains(x, y) for _, x, y in ref.points())
    for node in (1, 2, 3):
        member = member_track(random.Random(node), box, p, ref, 600.0)
        assert member.last_t >= 600.0
        # Every point of either track, and times in between: linear pieces of both.
        times = sorted({*member.times, *ref.times, *(k * 0.37 for k in range(1700))})
        for t in times:
            (mx, my), (rx, ry) = member.position(t), ref.position(t)
            assert math.hypot(mx - rx, my - ry) <= p.radius + 1e-9
            assert box.contains(mx, my)


def test_members_move_about_the_reference_not_with_it() -> None:
    box = Box(0.0, 0.0, 400.0, 300.0)
    p = _group(radius=30.0, step=1.0)
    ref = reference_track(random.Random("g"), box, p, 300.0)
    a = member_track(random.Random(1), box, p, ref, 300.0)
    b = member_track(random.Random(2), box, p, ref, 300.0)
    offsets = []
    for k in range(300):
        (ax, ay), (rx, ry) = a.position(k), ref.position(k)
        offsets.append(math.hypot(ax - rx, ay - ry))
    # Hong's random motion vector: length uniform in [0, radius] (mean radius / 2).
    assert abs(sum(offsets) / len(offsets) - 15.0) < 3.0
    assert max(offsets) > 25.0 and min(offsets) < 5.0
    assert a != b
    # The group moves together: members are never farther apart than 2 radii.
    for k in range(300):
        (ax, ay), (bx, by) = a.position(k), b.position(k)
        assert math.hypot(ax - bx, ay - by) <= 2 * p.radius + 1e-9


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), w=st.floats(20.0, 2000.0), h=st.floats(20.0, 2000.0),
       fr=st.floats(0.01, 0.49), step=st.floats(0.2, 30.0), until=st.floats(1.0, 300.0))
def test_any_group_stays_inside(seed: int, w: float, h: float, fr: float, step: float,
                                until: float) -> None:
    box = Box(0.0, 0.0, w, h)
    p = _group(radius=fr * min(w, h), step=step)
    ref = reference_track(random.Random(seed), box, p, until)
    member = member_track(random.Random(seed + 1), box, p, ref, until)
    assert member.last_t >= until
    for t, x, y in member.points():
        rx, ry = ref.position(t)
        assert box.contains(x, y)
        assert math.hypot(x - rx, y - ry) <= p.radius * (1 + 1e-9) + 1e-9
