"""Where HESPER's *Region* lives in meshsub's content model, and the grid it indexes.

The thesis's event is <Region, Topic, Value> with Region the publisher's cell,
and a subscription names one Region (spec 004 §4.2). In meshsub's model the
region is two integer attributes, ``gx`` and ``gy``: an event carries its
publisher's cell (``sensors/temp gx=0 gy=0 value=21``) and a subscription names
the cell with equality predicates (``sensors/temp gx=0 gy=0 value>20``), so the
exact matcher, the covering test and the evaluation's ground truth all see the
region without any special case. The DF baseline uses the same convention.
"""

from __future__ import annotations

from meshsub.core.content import Event, Subscription
from meshsub.core.grid import Bounds, Cell, Grid
from meshsub.core.predicates import Op
from meshsub.protocols.hesper.params import GridParams

REGION_X = "gx"
REGION_Y = "gy"


def make_grid(params: GridParams) -> Grid:
    """The deployment grid all nodes share (``ceil(W/s) x ceil(H/s)`` cells)."""
    return Grid.covering(params.area_width_m, params.area_height_m, params.cell_side,
                         (params.origin_x, params.origin_y))


def deployment_area(params: GridParams) -> Bounds:
    """The configured area: the grid covers it with whole cells, so its last column and
    row may overhang it; hash points and probe points stay inside it
    (``Grid.clipped``)."""
    return Bounds(params.origin_x, params.origin_y, params.origin_x + params.area_width_m,
                  params.origin_y + params.area_height_m)


def subscription_region(sub: Subscription) -> Cell | None:
    """The cell named by ``gx = N`` and ``gy = M`` predicates; ``None`` if not named."""
    found: dict[str, int] = {}
    for p in sub.predicates:
        if p.attr in (REGION_X, REGION_Y) and p.op is Op.EQ and isinstance(p.value, int) \
                and not isinstance(p.value, bool):
            found[p.attr] = p.value
    if REGION_X in found and REGION_Y in found:
        return Cell(found[REGION_X], found[REGION_Y])
    return None


def event_region(event: Event) -> Cell | None:
    """The cell an event names in its ``gx``/``gy`` attributes, if both are integers."""
    gx, gy = event.attrs.get(REGION_X), event.attrs.get(REGION_Y)
    if isinstance(gx, int) and isinstance(gy, int) and not isinstance(gx, bool) \
            and not isinstance(gy, bool):
        return Cell(gx, gy)
    return None
