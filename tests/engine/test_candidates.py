"""Candidate ranking (engine/candidates.py) against a full sort."""

from __future__ import annotations

import numpy as np
import pytest
from search_helpers import best_tokens

from engine.candidates import candidates_from_top, top_candidates
from engine.rules import NEG_INF


@pytest.mark.parametrize("vocab", [9, 300, 1001])
@pytest.mark.parametrize("source", ["all log-probs", "best 2K+1 per row"])
def test_candidates_equal_a_full_sort_with_ties_and_infinities(vocab: int, source: str) -> None:
    rng = np.random.default_rng(vocab)
    log_probs = rng.integers(-60, 0, size=(4, 4, vocab)).astype(np.float32) / 4  # many exact ties
    log_probs[1, 2] = NEG_INF
    log_probs[2, 1, :-1] = NEG_INF  # a forced row: one finite token, in the last group
    # Sentence 3 is at its first step: only beam 0 is alive, so all 8 candidates come from one row.
    scores = np.array([[0, -1, -2, NEG_INF], [0, 0, 0, 0], [-3, -1, 0, -2], [0, NEG_INF, NEG_INF, NEG_INF]])
    scores = scores.astype(np.float32)
    if source == "all log-probs":
        cand = top_candidates(log_probs, scores, 8)
    else:
        cand = candidates_from_top(*best_tokens(log_probs, 9), scores, 8)
    for b in range(4):
        flat = (scores[b][:, None] + log_probs[b]).ravel()
        expected = sorted(range(flat.size), key=lambda i: (-flat[i], i))[:8]
        assert list(cand.beams[b] * vocab + cand.tokens[b]) == expected
        np.testing.assert_array_equal(cand.scores[b], flat[expected])
