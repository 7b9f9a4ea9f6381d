"""Lexically constrained beam search (engine/constraints.py) on hand-made step functions."""

from __future__ import annotations

import numpy as np
import pytest
from search_helpers import BOS, EOS, A, B, C, D, TableDecoder, random_model, table_model

from engine.beam_search import Hypothesis, SearchOptions, search
from engine.constraints import GUIDES, Guide, Progress, SentenceConstraints

OPTIONS = SearchOptions(beam_size=4, num_hypotheses=4)


def constrained(
    constraints: list[SentenceConstraints],
    max_lengths: list[int],
    options: SearchOptions = OPTIONS,
    model=random_model,
    attention=None,
) -> list[list[Hypothesis]]:
    decoder = TableDecoder(model, len(max_lengths), options.beam_size, attention)
    return search(decoder, max_lengths, options, bos_id=BOS, eos_id=EOS, constraints=constraints)


def contains(tokens: list[int], piece: tuple[int, ...]) -> bool:
    return any(tuple(tokens[i : i + len(piece)]) == piece for i in range(len(tokens) - len(piece) + 1))


@pytest.mark.parametrize("pieces", [[(C,)], [(D, A, B)], [(C,), (D, A)], [(B, B), (B, B)]])
def test_every_hypothesis_contains_every_constraint(pieces: list[tuple[int, ...]]) -> None:
    """Including the same constraint twice: it must appear twice."""
    for hyps in constrained([SentenceConstraints(pieces)], [12]):
        assert hyps
        for h in hyps:
            assert h.missing == 0
            for piece in set(pieces):
                count = sum(tuple(h.tokens[i : i + len(piece)]) == piece for i in range(len(h.tokens)))
                assert count >= pieces.count(piece), (h.tokens, piece)


def test_a_constraint_the_model_already_meets_costs_nothing() -> None:
    plain = search(TableDecoder(random_model, 1, 4), [12], OPTIONS, bos_id=BOS, eos_id=EOS)[0]
    best = plain[0].tokens
    with_it = constrained([SentenceConstraints([tuple(best[1:3])])], [12])[0]
    assert (with_it[0].tokens, with_it[0].score) == (best, plain[0].score)


def test_the_model_places_the_constraint_where_it_scores_best() -> None:
    """A model that says A B C: constrained to D, which it finds equally unlikely everywhere, the
    search finds the best place for D and keeps the rest of the sentence."""
    table = {
        (): {A: 0.9},
        (A,): {B: 0.9},
        (A, B): {C: 0.9},
        (A, B, C): {EOS: 0.9},
        (A, D): {B: 0.9},
        (A, D, B): {C: 0.9},
        (A, D, B, C): {EOS: 0.9},
    }
    best = constrained([SentenceConstraints([(D,)])], [8], model=table_model(table))[0][0]
    assert best.tokens == [A, D, B, C] and best.missing == 0


def attention_on(position: int, length: int = 5):
    """A decoder that always attends most to source ``position``."""

    def attention(_sentence: int, _prefix: tuple[int, ...]) -> np.ndarray:
        weights = np.full(length, 0.1, dtype=np.float32)
        weights[position] = 0.6
        return weights

    return attention


def unlikely_d(_sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
    """40 tokens; says A B C and ends, and finds D less likely than any other token everywhere,
    so that only the constraint offers it."""
    out = np.full(40, np.log(1e-6), dtype=np.float32)
    out[D] = np.log(1e-9)
    out[{0: A, 1: B, 2: C}.get(len(prefix), EOS)] = np.log(0.9)
    return out


def test_a_constraint_begins_only_where_the_decoder_attends_to_its_source_words() -> None:
    """Attending elsewhere, the search cannot begin a constraint the model does not offer: the
    translation falls back to the model's best, marked as missing it."""
    elsewhere = constrained([SentenceConstraints([(D,)], [(0, 2)])], [12], model=unlikely_d, attention=attention_on(4))
    assert (elsewhere[0][0].tokens, elsewhere[0][0].missing) == ([A, B, C], 1)
    there = constrained([SentenceConstraints([(D,)], [(3, 5)])], [12], model=unlikely_d, attention=attention_on(4))
    assert there[0][0].missing == 0 and D in there[0][0].tokens


def test_a_constraint_that_cannot_fit_falls_back_to_the_unconstrained_best() -> None:
    long = tuple([C] * 20)
    hyps = constrained([SentenceConstraints([long])], [6])[0]
    plain = search(TableDecoder(random_model, 1, 4), [6], OPTIONS, bos_id=BOS, eos_id=EOS)[0]
    assert hyps[0].missing == 1 and hyps[0].tokens == plain[0].tokens


def test_each_sentence_gets_the_same_result_alone_or_in_a_batch() -> None:
    """Constrained and unconstrained sentences side by side, some finishing before others."""
    constraints = [
        SentenceConstraints([(C,)]),
        SentenceConstraints([]),
        SentenceConstraints([(D, A), (B,)]),
        SentenceConstraints([(A, A, A)]),
    ]
    max_lengths = [12, 4, 15, 9]
    batched = constrained(constraints, max_lengths)
    for s, expected in enumerate(batched):
        model = lambda _s, p, s=s: random_model(s, p)
        alone = constrained([constraints[s]], [max_lengths[s]], model=model)[0]
        assert [(h.tokens, h.score, h.missing) for h in alone] == [(h.tokens, h.score, h.missing) for h in expected]


def test_alignments_follow_constrained_hypotheses() -> None:
    def attention(sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
        return np.random.default_rng(hash((sentence, prefix)) % 2**32).random(5).astype(np.float32)

    options = SearchOptions(beam_size=4, num_hypotheses=4, return_alignments=True)
    for h in constrained([SentenceConstraints([(D, A)])], [12], options, attention=attention)[0]:
        expected = [attention(0, tuple(h.tokens[:t])) for t in range(h.length)]
        np.testing.assert_array_equal(h.attention, np.stack(expected))


def test_progress_on_a_constraint_is_lost_when_the_hypothesis_strays() -> None:
    s = SentenceConstraints([(A, B, C), (D,)])
    p = s.advance(Progress(), A)
    assert (p.current, p.spelled, s.bank(p)) == (0, 1, 1)
    p = s.advance(p, D)  # strays from A B C, but meets D
    assert (p.current, p.met, s.bank(p), s.missing(p)) == (-1, 0b10, 1, 1)
    p = s.advance(s.advance(s.advance(p, A), B), C)
    assert (p.met, s.missing(p), s.bank(p)) == (0b11, 0, 4)
    assert s.wanted(p, None) == []


def test_constrained_search_is_refused_a_beam_of_one() -> None:
    with pytest.raises(ValueError, match="beam of at least 2"):
        constrained([SentenceConstraints([(C,)])], [5], SearchOptions(beam_size=1))


def test_guides_from_strict_to_loose() -> None:
    """A constraint said at source position 2 begins where the hypothesis attends to it: not once its
    attention has gone past (in order), or one position off with slack."""
    strict = SentenceConstraints([(D,)], [(2, 3)], Guide())
    assert strict.wanted(Progress(frontier=1), peak=2) == [D]
    assert strict.wanted(Progress(frontier=4), peak=2) == []
    assert strict.wanted(Progress(frontier=1), peak=3) == []
    assert SentenceConstraints([(D,)], [(2, 3)], Guide(in_order=False)).wanted(Progress(frontier=4), peak=2) == [D]
    near = SentenceConstraints([(D,)], [(2, 3)], Guide(slack=1, in_order=False))
    assert (near.wanted(Progress(), peak=3), near.wanted(Progress(), peak=0)) == ([D], [])
    assert GUIDES[0] == Guide() and GUIDES[-1].anywhere  # the last resort
    anywhere = SentenceConstraints([(D,)], [(2, 3)], Guide(anywhere=True))
    assert anywhere.wanted(Progress(frontier=4), peak=0) == [D]


def test_tokens_meet_the_constraints_as_the_search_judges_them() -> None:
    s = SentenceConstraints([(A, B), (A, B), (C,)])
    assert s.met_by([A, B, D, C, A, B])
    assert not s.met_by([A, B, C])  # A B is needed twice
    assert not s.met_by([A, D, B, C, A, B])


def test_places_are_where_the_tokens_meet_each_constraint() -> None:
    """Each constraint in the order the search meets them: the first A B is the first term's."""
    s = SentenceConstraints([(A, B), (A, B), (C,)])
    assert s.places([A, B, D, C, A, B]) == [(0, 2), (4, 6), (3, 4)]
    assert s.places([A, D, A, B, C]) == [(2, 4), None, (4, 5)]  # a stray A starts over
    assert s.places([]) == [None, None, None]
