"""canonical.context_pack's section relevance (tools.documents._relevance) is the same in every process."""

import ast

from tests.fixtures.hash_seeds import outputs_under_hash_seeds

# Sections holding the goal's words among other words; prints each section's relevance exactly.
_SECTIONS = """
import random
from memento_memory_api.tools.documents.handlers import _relevance, _terms
rng = random.Random(9)
goal = _terms("rotate vault credentials billing worker deploy revoke secret staging production window")
pool = sorted(goal) + [f"other{n}" for n in range(40)]
texts = [" ".join(rng.sample(sorted(goal), 6) + rng.sample(pool[12:], 8)) for _ in range(80)]
print(repr(_relevance(goal, texts)))
"""


def test_sections_score_the_same_in_every_process():
    # a set iterates in an order that follows the process's string hashing; summed in that order, sections holding
    # the same goal words scored apart in the last bit, and equal scores are meant to keep the document's order
    outputs = outputs_under_hash_seeds(_SECTIONS)
    for output in outputs:
        assert len(ast.literal_eval(output)) == 80
    assert len(set(outputs)) == 1
