"""Teacher forcing (engine/forced_decoding.py): the score and attention of a given translation are
those the search gives it, on hand-made step functions."""

from __future__ import annotations

import numpy as np
import pytest
from search_helpers import BOS, EOS, A, TableDecoder, random_model

from engine.beam_search import SearchOptions, search
from engine.forced_decoding import Forced, score


def attention(sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
    """Five source positions, weighted by the sentence and the prefix."""
    rng = np.random.default_rng(97 * sentence + len(prefix) + 7 * sum(prefix))
    weights = rng.random(5).astype(np.float32)
    return weights / weights.sum()


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
def test_forced_translations_score_as_the_search_scored_them(length_penalty: float) -> None:
    """Every hypothesis of a 4-best search over 3 sentences, each with a forced first token (a
    target language's, scored 0), fed back: the same scores, lengths and attention."""
    options = SearchOptions(beam_size=4, num_hypotheses=4, length_penalty=length_penalty, return_alignments=True)
    found = search(
        TableDecoder(random_model, 3, 4, attention),
        [9, 12, 3],
        options,
        bos_id=BOS,
        eos_id=EOS,
        prefixes=[[A]] * 3,
        forced_eos="off",
    )
    given = [[Forced(tuple(h.tokens), h.eos) for h in hyps] for hyps in found]
    forced = score(
        TableDecoder(random_model, 3, 1, attention),
        given,
        bos_id=BOS,
        eos_id=EOS,
        prefix_length=1,
        length_penalty=length_penalty,
    )
    assert [len(h) for h in forced] == [len(h) for h in found] == [4, 4, 4]
    assert any(not h.eos for hyps in found for h in hyps)  # the sentence capped at 3 tokens, without EOS
    for searched, scored in zip((h for hyps in found for h in hyps), (h for hyps in forced for h in hyps), strict=True):
        assert (scored.tokens, scored.eos, scored.length) == (searched.tokens, searched.eos, searched.length)
        assert scored.score == pytest.approx(searched.score, abs=1e-4)
        assert scored.normalized_score == pytest.approx(searched.normalized_score, abs=1e-4)
        np.testing.assert_allclose(scored.attention, searched.attention, atol=1e-6)


def test_a_translation_the_model_finds_unlikely_scores_low() -> None:
    """Not the search's choice: each token's log-probability is the model's, not a forced 0."""
    given = [[Forced((A, A, A)), Forced((A,))]]
    (scored,) = score(
        TableDecoder(random_model, 1, 1), given, bos_id=BOS, eos_id=EOS, prefix_length=0, length_penalty=0.0
    )
    expected = [
        random_model(0, ())[A]
        + random_model(0, (A,))[A]
        + random_model(0, (A, A))[A]
        + random_model(0, (A, A, A))[EOS],
        random_model(0, ())[A] + random_model(0, (A,))[EOS],
    ]
    assert [h.score for h in scored] == pytest.approx(expected, abs=1e-5)
    assert all(h.attention is None for h in scored)
