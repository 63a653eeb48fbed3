"""PUMA, paging and GIANT take their role from the node's roles (a scenario group, node.roles)."""

from __future__ import annotations

import pytest

from meshsub.core.api import (
    FrameReceived,
    Message,
    NeighborChanged,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    Position,
)
from meshsub.core.cellgrid import role_from_capabilities
from meshsub.core.params import ParameterError
from meshsub.protocols.giant import Giant
from meshsub.protocols.giant.params import ROLE_NAMES as GIANT_ROLES
from meshsub.protocols.giant.params import GiantParams
from meshsub.protocols.giant.params import Role as GiantRole
from meshsub.protocols.puma import Paging, PagingParams, Puma, PumaParams
from meshsub.protocols.puma.params import ROLE_NAMES as PUMA_ROLES
from meshsub.protocols.puma.params import Role as PumaRole


def test_a_named_role_wins_over_the_parameter() -> None:
    assert role_from_capabilities(("base_station",), PUMA_ROLES, PumaRole.CLIENT) \
        is PumaRole.BASE
    assert role_from_capabilities(("relay", "client"), PUMA_ROLES, PumaRole.BASE) \
        is PumaRole.CLIENT
    assert role_from_capabilities(("ferry",), GIANT_ROLES, GiantRole.BROKER) is GiantRole.FERRY


def test_no_named_role_keeps_the_parameter() -> None:
    assert role_from_capabilities((), PUMA_ROLES, PumaRole.BASE) is PumaRole.BASE
    assert role_from_capabilities(("gateway",), GIANT_ROLES, GiantRole.FERRY) is GiantRole.FERRY


def test_two_protocol_roles_are_a_configuration_error() -> None:
    with pytest.raises(ParameterError, match="role"):
        role_from_capabilities(("base_station", "client"), PUMA_ROLES, PumaRole.CLIENT)
    # two names of the same role are fine
    assert role_from_capabilities(("base", "base_station"), PUMA_ROLES, PumaRole.CLIENT) \
        is PumaRole.BASE


@pytest.mark.parametrize("cls,params", [(Puma, PumaParams), (Paging, PagingParams)])
def test_puma_and_paging_nodes_follow_their_group_role(cls: type[Puma], params: type) -> None:
    station = cls(1, params=params(cell_x=1, cell_y=1), capabilities=("base_station",))
    client = cls(2, params=params(role=PumaRole.BASE), capabilities=("client",))
    assert station.role is PumaRole.BASE and station.cell == (1, 1)
    assert client.role is PumaRole.CLIENT and client.cell is None
    assert station.status()["role"] == "base" and client.status()["role"] == "client"


def test_giant_nodes_follow_their_group_role() -> None:
    ferry = Giant(1, params=GiantParams(), capabilities=("ferry",))
    broker = Giant(2, params=GiantParams(role=GiantRole.FERRY, cell_x=0, cell_y=0),
                   capabilities=("broker",))
    assert ferry.role is GiantRole.FERRY and ferry.carried is not None
    assert broker.role is GiantRole.BROKER and broker.carried is None


def test_presence_follows_the_position_a_neighbour_reports() -> None:
    """A station sees a client as present while the driver lists it and, when the
    driver's NeighborInfo carries a position, while that position is in the station's
    cell (a client in range but in the next cell belongs to the next station)."""
    station = Puma(1, params=PumaParams(cell_x=1, cell_y=1, cell_size_m=100.0),
                   capabilities=("base_station",))
    station.handle(NeighborUp(0.0, NeighborInfo(2, capabilities=("client",))))
    assert station.client_present(2)  # position unknown: association alone
    station.handle(NeighborChanged(1.0, NeighborInfo(2, Position(150.0, 150.0))))
    assert station.client_present(2)
    station.handle(NeighborChanged(2.0, NeighborInfo(2, Position(250.0, 150.0))))
    assert not station.client_present(2)  # in range, but in cell (2, 1)
    station.handle(NeighborChanged(3.0, NeighborInfo(2, Position(110.0, 190.0))))
    assert station.client_present(2)
    station.handle(NeighborDown(4.0, 2))
    assert not station.client_present(2)


def test_a_client_associates_when_a_station_heard_first_becomes_a_neighbour() -> None:
    """On a real radio a station's BEACON can arrive before the discovery beacon that
    makes the station a neighbour (meshsubd: two independent message streams); the
    client must still associate with it (it never did before: no later BEACON is new)."""
    station = Puma(1, params=PumaParams(cell_x=0, cell_y=0))
    client = Puma(2, params=PumaParams(), capabilities=("client",))
    beacon = Message(16, station.new_message_id(), [0, 0], ttl=1)
    client.handle(FrameReceived(0.0, 1, beacon))
    assert client.base is None  # not a neighbour yet
    client.handle(NeighborUp(0.1, NeighborInfo(1, capabilities=("base_station",))))
    assert client.base == 1 and client.cell == (0, 0)
