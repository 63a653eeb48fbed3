"""A deployment grid every node agrees on, and where a *Region* lives in the content model.

Grid-based protocols (HESPER and its DF baseline, and the grid protocols still
to come) share this module, so none of them imports another (docs/architecture.md).

The thesis's event is <Region, Topic, Value> with Region the publisher's cell,
and a subscription names one Region (Zheng 2008, §4.2). In meshsub's model the
region is two integer attributes, ``gx`` and ``gy``: an event carries its
publisher's cell (``sensors/temp gx=0 gy=0 value=21``) and a subscription names
the cell with equality predicates (``sensors/temp gx=0 gy=0 value>20``), so the
exact matcher, the covering test and the evaluation's ground truth all see the
region without any special case. The DF baseline uses the same convention.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.content import Event, Subscription
from meshsub.core.grid import Bounds, Cell, Grid
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, non_negative, positive
from meshsub.core.predicates import Op
from meshsub.core.reliable import ReliableParams

MAX_HOPS_LIMIT = 0xFFFF
"""The wire's hop and TTL fields are 16-bit (``meshsub.wire.frame.HOP_MAX``; core does not
import wire)."""
MAX_HOPS_DEFAULT = 1024
"""Two and a half walks round a river with one bridge on the thesis's 1 km field
(docs/protocols/hesper.md, "Hop budget")."""


@dataclass(frozen=True, slots=True)
class GridParams(ReliableParams):
    """The deployment grid every node must agree on (shared with the DF baseline)."""

    TR: float = 70.0
    """Transmission range (m); the cell side is TR/sqrt(2) unless ``cell_side_m`` is set."""
    cell_side_m: float = 0.0
    """Cell side (m); 0 = TR/sqrt(2) (thesis). Set it on Wi-Fi meshes."""
    area_width_m: float = 1000.0
    area_height_m: float = 1000.0
    origin_x: float = 0.0
    origin_y: float = 0.0
    max_hops: int = MAX_HOPS_DEFAULT
    """Radio-hop budget of one message end to end (the frame TTL): a subscription from its
    client to the broker that answers it, a reply back, an event from its publisher to a
    subscriber, across every broker on the way; past it the message is dropped as
    ``ttl_expired``. At most 65535, the wire's hop field. It is a safety net, not a
    route length limit: GPSR ends a walk that cannot arrive by itself (it comes back to
    the edge it entered the face by), so the budget only has to exceed the longest walk
    round a void that does arrive (about 400 hops round a river on a 1 km field)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "TR": ParamDoc("m", "Zheng 2008, Table 4.1 (70 m, 100 m)"),
        "cell_side_m": ParamDoc("m", "Zheng 2008, §4.3 (0: the grid diagonal is TR); "
                                     "a set side is our decision"),
        "area_width_m": ParamDoc("m", "Zheng 2008, Table 4.1 (1000 m x 1000 m)",
                      "Width of the deployment grid."),
        "area_height_m": ParamDoc("m", "Zheng 2008, Table 4.1 (1000 m x 1000 m)",
                      "Height of the deployment grid."),
        "origin_x": ParamDoc("m", OUR_DECISION,
                      "x of the grid's corner in local metres."),
        "origin_y": ParamDoc("m", OUR_DECISION,
                      "y of the grid's corner in local metres."),
        "max_hops": ParamDoc("hops", OUR_DECISION),
    }

    def validate(self) -> None:
        ReliableParams.validate(self)
        positive("TR", self.TR)
        non_negative("cell_side_m", self.cell_side_m)
        positive("area_width_m", self.area_width_m)
        positive("area_height_m", self.area_height_m)
        if not (math.isfinite(self.origin_x) and math.isfinite(self.origin_y)):
            raise ParameterError("origin_x", "origin must be finite")
        if not 1 <= self.max_hops <= MAX_HOPS_LIMIT:
            raise ParameterError("max_hops", f"must be in 1..{MAX_HOPS_LIMIT}")

    @property
    def cell_side(self) -> float:
        return self.cell_side_m if self.cell_side_m > 0 else self.TR / math.sqrt(2.0)


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
