"""Disjunctive subscriptions on a conjunctive core: one core subscription per alternative.

The core's ``Subscription`` is a conjunction (a topic filter and predicates that
must all hold), and the protocols route and match core subscriptions only. An
application's disjunction ("``a`` or ``b``": Liu 2011, §3.6's OR subscription,
or any ``alternatives`` text of ``meshsub.core.syntax``) therefore becomes one
core subscription per alternative, its *members*, with ids ``group|i``; each
member is routed and matched exactly like any other subscription. Delivery
stays exact and once: ``Protocol.deliver_local`` delivers an event once per
*delivery group* (the id before ``|``) and names the group, so the application
sees its own id, once, however many alternatives match.

A plain subscription (one alternative) keeps its id: nothing changes for it.
``|`` is in no application or control id (``meshsub.core.subids``), so the
split is unambiguous.
"""

from __future__ import annotations

from collections.abc import Sequence

from meshsub.core.content import ContentError, Subscription

OR_SEP = "|"
"""Separates a delivery group's id from the member's name in a core subscription id."""


def member_id(group: str, member: str) -> str:
    """The core subscription id of one member of ``group``."""
    return f"{group}{OR_SEP}{member}"


def delivery_group(sub_id: str) -> str:
    """The application subscription a core subscription belongs to (itself unless a member)."""
    return sub_id.split(OR_SEP, 1)[0]


def members(sub_id: str, alternatives: Sequence[Subscription]
            ) -> list[tuple[str, Subscription]]:
    """The core subscriptions (id, subscription) of a disjunction under ``sub_id``.

    One alternative: ``sub_id`` itself; more: ``sub_id|0``, ``sub_id|1``, ...
    """
    if OR_SEP in sub_id:
        raise ContentError(f"subscription id {sub_id!r} must not contain {OR_SEP!r}")
    if not alternatives:
        raise ContentError("a disjunction needs at least one alternative")
    if len(alternatives) == 1:
        return [(sub_id, alternatives[0])]
    return [(member_id(sub_id, str(i)), alt) for i, alt in enumerate(alternatives)]


def member_ids(sub_id: str, count: int) -> list[str]:
    """The ids ``members`` gives a disjunction of ``count`` alternatives."""
    return [sub_id] if count == 1 else [member_id(sub_id, str(i)) for i in range(count)]
