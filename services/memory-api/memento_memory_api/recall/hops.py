"""The second hop (issue 53 item 1-2): for a question asking for a list of things about someone ("Which cities has
John been to?", "What books has Tim read?"; text.links.asked), the memories about that person that name the kind of
thing asked for (a place, anything named, an activity, an event...), or that name what the first hop's best rows name.

Such answers sit in several memories, sessions apart, that share the person and the kind of thing but few words with
the question ("I was in Chicago, it was awesome!"): the lexical and vector lists find one or two, and this list the
rest. Read by one statement while the model embeds the question: the rows holding one of the person's tokens and
either a token of the kind asked for or one of the links of the lexical list's first `SEEDS` rows (their names and
places: pseudo-relevance feedback, the entities the first hop found), the newest `RECALL_HOP_ROWS`, with their stored
vectors. A person named in few rows is found on the entities' GIN index (migration 0025); one named in many by walking
the workspace's newest rows on an index that holds their entities (0026), which stops at the limit without reading the
table or another tenant's rows. Once the question's vector is there, each is scored
by the strength of what it holds: 1 per kind asked for, each shared link weighed by its rarity among the rows read
(a fifth of it), half a point per word of the question, five times its cosine to the question, `SAID` when the person
said it (not only named), less `ASKS` when it asks a question. The best `KEEP` are fused as one more list at
`RECALL_HOP` (relevance.order), below the `RECALL_HOP_KEEP` best rows of the first hop, which the hop never moves: it
can add answers, never push out a strong direct hit.

On the development conversations (bench/README.md, "LoCoMo: the second hop"): multi-hop recall@10 up, the other
categories unchanged, as only list questions read it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import asyncpg
import numpy as np

from memento_memory_api.recall.filters import Filters
from memento_memory_api.recall.relevance import asks, filter_conditions, given_filters, row_words
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope
from memento_shared.text.links import Asked

SEEDS = 5  # the lexical list's first rows whose links are followed
KEEP = 30  # rows ranked in the list
SAID = 2.0  # added to a row the person asked about said themselves: a list of their things is in their own words
ASKS = 1.0  # what a row that asks a question loses: it points to its answer more than it holds one (relevance.asks)
FIRST_FILTER = 6
_LINKS = ("n:", "p:")


@lru_cache(maxsize=128)
def hop_sql(profile_id: str, dimension: int, given: frozenset[str], superseded: bool) -> str:
    """The hop's statement with only the filters a search gives (as relevance.neighbours_sql). Parameters: tenant
    ($1), workspace ($2), the person's tokens ($3), the kinds' and the links' tokens ($4), the limit ($5), then the
    filters given."""
    profile_id = repo.profile_literal(profile_id)
    where = " AND ".join([*filter_conditions(given, FIRST_FILTER), repo.live("f", "true" if superseded else "false")])
    # the newest ids first, from the index alone where it can (migration 0026: one workspace newest first, holding
    # what these conditions and RLS read), then the kept rows' columns and vectors by id
    return f"""
WITH picked AS (
  SELECT f.id FROM agent_memory.fragments f
  WHERE f.tenant_id = $1 AND f.workspace = $2 AND f.entities && $3::text[] AND f.entities && $4::text[] AND {where}
  ORDER BY f.created_at DESC, f.id DESC LIMIT $5)
SELECT {repo.F_COLUMNS}, e.embedding::vector({dimension}) AS hop_vector FROM picked
JOIN agent_memory.fragments f ON f.id = picked.id AND f.tenant_id = $1
LEFT JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id AND e.profile_id = '{profile_id}'
  AND e.tenant_id = $1
ORDER BY f.created_at DESC, f.id DESC
"""


def links_of(first: Sequence[Any], ask: Asked) -> list[str]:
    """The names and places the first hop's best rows hold, but the question's own names."""
    found: dict[str, None] = {}
    for row in first[:SEEDS]:
        for token in row["entities"] or ():
            if token.startswith(_LINKS) and token[2:] not in ask.names:
                found[token] = None
    return list(found)


async def read(
    conn: asyncpg.Connection,
    scope: Scope,
    agents: list[str] | None,
    profile_id: str,
    dimension: int,
    ask: Asked,
    links: list[str],
    filters: Filters,
    limit: int = 400,
) -> list[Any]:
    """The rows the hop may rank (module docstring), newest first, each with its stored vector (None if none yet)."""
    if not ask.kinds and not links:
        return []
    given, values = given_filters(agents, filters)
    rows: list[Any] = await conn.fetch(
        hop_sql(profile_id, dimension, given, filters.superseded),
        scope.tenant_id,
        scope.workspace,
        list(ask.subjects),
        [*ask.kinds, *links],
        limit,
        *values,
    )
    return rows


def rank(
    rows: Sequence[Any], ask: Asked, links: list[str], terms: frozenset[str], query_vector: Any, stems: bool = True
) -> list[str]:
    """The hop's list, strongest first (module docstring): at most KEEP ids; `terms` as `stems` says (relevance)."""
    if not rows:
        return []
    # a name some row read is spoken by is a person in the conversation, no link to follow (the other speaker)
    speakers = {t[2:] for r in rows for t in r["entities"] if t.startswith("s:")}
    followed = {t for t in links if t[2:] not in speakers}
    held = Counter(t for r in rows for t in r["entities"] if t in followed)
    weight = {t: max(math.log((len(rows) + 1) / (held[t] + 0.5)), 0.0) for t in held}
    said = {f"s:{n}" for n in ask.names}
    cosines = _cosines(rows, query_vector)
    scored = []
    for r, cosine in zip(rows, cosines, strict=True):
        tokens = set(r["entities"])
        strength = sum(1.0 for k in ask.kinds if k in tokens) + math.fsum(weight[t] for t in tokens & held.keys()) / 5
        strength += 0.5 * len(row_words(r, stems) & terms) + 5.0 * cosine
        strength += SAID if tokens & said else 0.0
        strength -= ASKS if asks(r) else 0.0
        scored.append((-strength, r["id"]))
    scored.sort()
    return [i for _, i in scored[:KEEP]]


def _cosines(rows: Sequence[Any], query_vector: Any) -> list[float]:
    """Each row's cosine to the question (0 without a vector on either side), in one product: row by row, 400 rows
    took 3.3 ms after the question's vector arrived, on the search's critical path; stacked, 1.3."""
    out = [0.0] * len(rows)
    placed = [n for n, r in enumerate(rows) if r["hop_vector"] is not None]
    if query_vector is None or not placed:
        return out
    query = np.asarray(query_vector, dtype=np.float32)
    matrix = np.stack([np.asarray(_array(rows[n]["hop_vector"]), dtype=np.float32) for n in placed])
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
    products = matrix @ query
    for n, product, norm in zip(placed, products.tolist(), norms.tolist(), strict=True):
        out[n] = product / norm if norm else 0.0
    return out


def _array(vector: Any) -> Any:
    """pgvector's Vector as an array (an array as it is)."""
    return vector.to_numpy() if hasattr(vector, "to_numpy") else vector
