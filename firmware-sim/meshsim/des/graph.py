"""Small graph measures of a link graph, for summaries (degree, components, diameter)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from meshsim.radio import Links


@dataclass(frozen=True, slots=True)
class GraphSummary:
    nodes: int
    links: int
    mean_degree: float
    min_degree: int
    max_degree: int
    components: int
    diameter: int | None
    """Longest shortest path in hops; None if the graph is not connected."""


def _bfs(links: Links, start: int) -> dict[int, int]:
    dist = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nb in links[node]:
            if nb not in dist:
                dist[nb] = dist[node] + 1
                queue.append(nb)
    return dist


def summarize(links: Links) -> GraphSummary:
    n = len(links)
    degrees = [len(nb) for nb in links.values()]
    seen: set[int] = set()
    components = 0
    for node in links:
        if node not in seen:
            components += 1
            seen.update(_bfs(links, node))
    diameter = None
    if components == 1 and n:
        diameter = max(max(_bfs(links, node).values()) for node in links)
    return GraphSummary(n, sum(degrees) // 2, sum(degrees) / n if n else 0.0,
                        min(degrees, default=0), max(degrees, default=0), components, diameter)
