"""A memory's neighbourhood as an SVG drawing, laid out here so the page needs no script: the memory in the middle,
its direct links on an inner ring, their links on an outer one."""

from __future__ import annotations

import math
from typing import Any

SIZE = 640
RINGS = (0, 150, 275)


def layout(center: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, Any]:
    hops = {center: 0}
    frontier = [center]
    while frontier:
        following = []
        for node in frontier:
            for e in edges:
                for a, b in ((e["from"], e["to"]), (e["to"], e["from"])):
                    if a == node and b not in hops:
                        hops[b] = min(hops[node] + 1, 2)
                        following.append(b)
        frontier = following
    rings: dict[int, list[str]] = {}
    for n in sorted(nodes, key=lambda n: n["id"]):
        rings.setdefault(hops.get(n["id"], 2), []).append(n["id"])
    where: dict[str, tuple[float, float]] = {}
    for hop, ids in rings.items():
        for i, node_id in enumerate(ids):
            angle = 2 * math.pi * i / len(ids) - math.pi / 2 + (0.3 if hop == 2 else 0)
            radius = RINGS[hop]
            where[node_id] = (SIZE / 2 + radius * math.cos(angle), SIZE / 2 + radius * math.sin(angle))
    placed = []
    for n in nodes:
        x, y = where[n["id"]]
        label = (n.get("topic") or n.get("type") or n["id"])[:24]
        placed.append({**n, "x": round(x, 1), "y": round(y, 1), "label": label, "center": n["id"] == center})
    lines = [
        {**e, "x1": where[e["from"]][0], "y1": where[e["from"]][1], "x2": where[e["to"]][0], "y2": where[e["to"]][1]}
        for e in edges
        if e["from"] in where and e["to"] in where
    ]
    return {"size": SIZE, "nodes": placed, "edges": lines}
