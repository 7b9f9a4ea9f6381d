"""The search's rules (engine/rules.py) on all log-probabilities and on each row's best tokens."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from search_helpers import ForceFirstToken, best_tokens

from engine.beam_search import SearchOptions, default_rules
from engine.candidates import Candidates, candidates_from_top, top_candidates
from engine.rules import (
    NEG_INF,
    ForcedEos,
    ForcedPrefix,
    MinLength,
    NoRepeatLoop,
    NoRepeatNgram,
    Rule,
    StepContext,
    apply_full,
    apply_top,
    ban_repeated_ngrams,
    top_spare,
)

EOS = 3
V = 40
# (beams, best tokens per row, candidates per sentence) as the search reads them: greedy, then beam 4.
SHAPES = [(1, 2, 1), (4, 9, 8)]


def step_log_probs(beams: int, seed: int = 0) -> np.ndarray:
    """(5, beams, V) float32 on a coarse grid (many ties), EOS among a row's best tokens half the time."""
    rng = np.random.default_rng(seed)
    log_probs = rng.integers(-40, 0, size=(5, beams, V)).astype(np.float32) / 4
    log_probs[:, :, EOS] = rng.choice(np.array([0.0, -0.25, -8.0], dtype=np.float32), size=(5, beams))
    return log_probs


def beam_scores(beams: int) -> np.ndarray:
    """(5, beams): sentence 0 at its first step (only beam 0 alive), the others mid-search."""
    scores = -np.arange(5 * beams, dtype=np.float32).reshape(5, beams) / 2
    scores[0, 1:] = NEG_INF
    return scores


def context(
    log_probs: np.ndarray, step: int, last_step: list[bool] | None = None, alive: list[int] | None = None
) -> StepContext:
    B, K, _ = log_probs.shape
    history = np.zeros((B * K, step), dtype=np.int64)
    live = np.arange(B) if alive is None else np.array(alive)
    return StepContext.build(step, np.array(last_step or [False] * B), history, EOS, log_probs, live)


def candidates_both_ways(
    rules: list[Rule], log_probs: np.ndarray, ctx: StepContext, best: int, count: int
) -> tuple[np.ndarray, Candidates]:
    """Applies ``rules`` to a copy of log_probs and to each row's ``best`` tokens, and checks that both
    give the search the same ``count`` finite candidates. Returns the edited copy and its candidates."""
    scores = beam_scores(log_probs.shape[1])
    edited = log_probs.copy()
    apply_full(rules, edited, ctx)
    top_log_probs, top_ids = best_tokens(log_probs, best)
    apply_top(rules, top_log_probs, top_ids, ctx)
    expected = top_candidates(edited, scores, count)
    got = candidates_from_top(top_log_probs, top_ids, scores, count)
    finite = expected.scores > NEG_INF
    np.testing.assert_array_equal(got.scores > NEG_INF, finite)
    for a, b in ((expected.scores, got.scores), (expected.beams, got.beams), (expected.tokens, got.tokens)):
        np.testing.assert_array_equal(a[finite], b[finite])
    return edited, expected


@pytest.mark.parametrize(("beams", "best", "count"), SHAPES)
def test_min_length_bans_eos_before_it_in_both_forms(beams: int, best: int, count: int) -> None:
    log_probs = step_log_probs(beams)
    edited, cand = candidates_both_ways([MinLength(3)], log_probs, context(log_probs, 2), best, count)
    assert (edited[:, :, EOS] == NEG_INF).all()
    np.testing.assert_array_equal(np.delete(edited, EOS, axis=2), np.delete(log_probs, EOS, axis=2))
    assert not (cand.tokens == EOS).any()
    edited, cand = candidates_both_ways([MinLength(3)], log_probs, context(log_probs, 3), best, count)
    np.testing.assert_array_equal(edited, log_probs)
    assert (cand.tokens == EOS).any(), "EOS must be among the best for the check above to mean anything"


@pytest.mark.parametrize(("beams", "best", "count"), SHAPES)
def test_forced_eos_keeps_the_decoders_eos_log_prob_in_both_forms(beams: int, best: int, count: int) -> None:
    """At their last step, sentences 1 and 3 can only end, with EOS's own log-probability even though
    the min-length rule before it banned EOS; the other sentences keep their continuations."""
    log_probs = step_log_probs(beams, seed=1)
    last_step = [False, True, False, True, False]
    rules: list[Rule] = [MinLength(5), ForcedEos()]
    edited, cand = candidates_both_ways(rules, log_probs, context(log_probs, 2, last_step), best, count)
    forced = np.array(last_step)
    np.testing.assert_array_equal(edited[forced, :, EOS], log_probs[forced, :, EOS])
    assert (np.delete(edited[forced], EOS, axis=2) == NEG_INF).all()
    finite = cand.scores[forced] > NEG_INF
    assert finite.sum(axis=1).tolist() == [beams, beams]  # one EOS per beam
    assert (cand.tokens[forced][finite] == EOS).all()
    assert not (cand.tokens[~forced] == EOS).any() and (cand.scores[~forced] > NEG_INF).all()


@pytest.mark.parametrize(("beams", "best", "count"), SHAPES)
def test_forced_eos_at_zero_score_needs_no_log_probs_in_both_forms(beams: int, best: int, count: int) -> None:
    log_probs = step_log_probs(beams, seed=1)
    last_step = [True, False, False, True, False]
    ctx = replace(context(log_probs, 2, last_step), eos_log_probs=None)  # as the top path leaves it
    edited, cand = candidates_both_ways([MinLength(5), ForcedEos(zero_score=True)], log_probs, ctx, best, count)
    forced = np.array(last_step)
    assert (edited[forced, :, EOS] == 0).all()
    assert (np.delete(edited[forced], EOS, axis=2) == NEG_INF).all()
    finite = cand.scores[forced] > NEG_INF
    assert (cand.tokens[forced][finite] == EOS).all()
    np.testing.assert_array_equal(cand.scores[forced][:, :beams], beam_scores(beams)[forced])  # EOS adds 0
    with pytest.raises(ValueError, match="EOS log-probabilities"):
        ForcedEos().apply_full(log_probs.copy(), ctx)


@pytest.mark.parametrize(("beams", "best", "count"), SHAPES)
def test_forced_prefix_follows_the_live_sentences_in_both_forms(beams: int, best: int, count: int) -> None:
    """8 sentences, 5 still alive: at step 1 those whose prefix is longer than 1 get its second token,
    at log-probability 0, whatever rules before it banned; the others keep their continuations."""
    prefixes = ((10, 11), (), (12,), (13, 14, 15), (16, 17), (18,), (), (19, 20))
    alive = [0, 2, 3, 5, 7]
    rule = ForcedPrefix(prefixes)
    log_probs = step_log_probs(beams, seed=3)
    rules: list[Rule] = [MinLength(9), rule]
    edited, cand = candidates_both_ways(rules, log_probs, context(log_probs, 1, alive=alive), best, count)
    forced, tokens = np.array([True, False, True, False, True]), np.array([11, 14, 20])
    assert (cand.tokens[forced, 0] == tokens).all()
    np.testing.assert_array_equal(cand.scores[forced, 0], beam_scores(beams)[forced, 0])
    np.testing.assert_array_equal(edited[forced, :, tokens], 0.0)
    assert (edited[forced] > NEG_INF).sum() == forced.sum() * beams
    np.testing.assert_array_equal(np.delete(edited[~forced], EOS, axis=2), np.delete(log_probs[~forced], EOS, axis=2))
    edited, cand = candidates_both_ways([rule], log_probs, context(log_probs, 2, alive=alive), best, count)
    assert (cand.tokens[2, 0], cand.scores[2, 0]) == (15, beam_scores(beams)[2, 0])
    np.testing.assert_array_equal(np.delete(edited, 2, axis=0), np.delete(log_probs, 2, axis=0))
    edited, _ = candidates_both_ways([rule], log_probs, context(log_probs, 3, alive=alive), best, count)
    np.testing.assert_array_equal(edited, log_probs)


@pytest.mark.parametrize(("beams", "best", "count"), SHAPES)
def test_a_forced_token_replaces_every_continuation_in_both_forms(beams: int, best: int, count: int) -> None:
    log_probs = step_log_probs(beams, seed=2)
    token = int(log_probs[0, 0].argmin())  # the least likely: nothing else would pick it
    _, cand = candidates_both_ways([ForceFirstToken(token)], log_probs, context(log_probs, 0), best, count)
    assert (cand.tokens[:, 0] == token).all()
    np.testing.assert_array_equal(cand.scores[:, 0], beam_scores(beams)[:, 0])
    edited, _ = candidates_both_ways([ForceFirstToken(token)], log_probs, context(log_probs, 1), best, count)
    np.testing.assert_array_equal(edited, log_probs)


def test_no_repeat_ngram_bans_per_row_and_only_on_all_log_probs() -> None:
    history = np.array([[4, 5, 4], [6, 6, 6], [7, 8, 9], [5, 4, 5]])  # rows of 2 sentences x 2 beams
    log_probs = np.zeros((2, 2, 10), dtype=np.float32)
    rule, ctx = NoRepeatNgram(2), StepContext(3, np.zeros(2, dtype=bool), history, EOS, None, np.arange(2))
    rule.apply_full(log_probs, ctx)
    banned = [set(np.flatnonzero(row == NEG_INF)) for row in log_probs.reshape(4, 10)]
    assert banned == [{5}, {6}, set(), {4}]
    assert rule.top_bans is None
    with pytest.raises(NotImplementedError):
        rule.apply_top(log_probs[:, :, :3], np.zeros((2, 2, 3), dtype=np.int64), ctx)


def test_no_repeat_loop_bans_the_token_that_would_repeat_a_span_once_too_often() -> None:
    rule = NoRepeatLoop(max_repeats=2, max_span=3)
    histories = {
        (7, 7): 7,  # a third 7
        (3, 7, 7): 7,
        (5, 4, 5, 4, 5): 4,  # a third "5 4"
        (4, 5, 4, 5): -1,  # a third "4 5" is two tokens away
        (1, 2, 3, 1, 2, 3, 1, 2): 3,  # a third "1 2 3"
        (4, 5, 6, 4, 5): -1,  # a second "4 5 6" is allowed
        (1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3): -1,  # "1 2 3 4" spans 4 > max_span
        (9, 9, 9, 9, 9, 9): 9,  # spans 1, 2 and 3 all repeat: one token, that of the shortest
    }
    for history, banned in histories.items():
        assert rule.banned(np.array([history])).tolist() == [banned], history
    assert NoRepeatLoop(max_repeats=1).banned(np.array([[2, 6]])).tolist() == [6]  # no token twice in a row


def loop_token(history: list[int], max_repeats: int, max_span: int) -> int:
    """The token that would make the shortest span of ``history`` occur once too often in a row, else -1."""
    for span in range(1, max_span + 1):
        window = (max_repeats + 1) * span - 1
        tail = history[len(history) - window :]
        if window <= len(history) and all(tail[j] == tail[j - span] for j in range(span, window)):
            return history[len(history) - span]
    return -1


@pytest.mark.parametrize(("max_repeats", "max_span"), [(1, 2), (2, 3), (2, 8), (3, 4)])
def test_no_repeat_loop_agrees_with_reading_each_history_token_by_token(max_repeats: int, max_span: int) -> None:
    rng = np.random.default_rng(max_repeats * 10 + max_span)
    rule = NoRepeatLoop(max_repeats, max_span)
    loops = 0
    for length in range(1, 26):
        histories = rng.integers(0, 3, (64, length))  # three tokens: loops of every span occur
        expected = [loop_token(row.tolist(), max_repeats, max_span) for row in histories]
        assert rule.banned(histories).tolist() == expected, length
        loops += sum(token >= 0 for token in expected)
    assert loops > 100


@pytest.mark.parametrize(("beams", "best", "count"), SHAPES)
def test_no_repeat_loop_gives_the_same_candidates_in_both_forms(beams: int, best: int, count: int) -> None:
    log_probs = step_log_probs(beams, seed=5)
    B, K, _ = log_probs.shape
    history = np.tile(np.array([[11, 12, 11, 12, 11]]), (B * K, 1))
    history[::2] = [20, 21, 22, 23, 24]  # no loop on every other row
    ctx = StepContext.build(5, np.zeros(B, dtype=bool), history, EOS, log_probs, np.arange(B))
    looping = np.zeros(B * K, dtype=bool)
    looping[1::2] = True
    log_probs.reshape(B * K, V)[looping, 12] = 0.0  # the loop's next token is those rows' best
    edited, cand = candidates_both_ways([NoRepeatLoop(2)], log_probs, ctx, best, count)
    assert (edited.reshape(B * K, V)[looping, 12] == NEG_INF).all()
    np.testing.assert_array_equal(edited.reshape(B * K, V)[~looping], log_probs.reshape(B * K, V)[~looping])
    rows = np.arange(B)[:, None] * K + cand.beams
    assert not ((cand.tokens == 12) & looping[rows] & (cand.scores > NEG_INF)).any()


def test_the_search_reads_one_spare_token_per_ban_the_rules_may_make() -> None:
    assert top_spare([]) == 1
    assert top_spare([ForcedEos(), ForcedPrefix(((5,),))]) == 1
    assert top_spare([MinLength(2), NoRepeatLoop(2), ForcedEos()]) == 2
    assert top_spare([MinLength(2), NoRepeatNgram(3)]) is None


def test_ban_repeated_ngrams_marks_exactly_the_completing_tokens() -> None:
    history = np.array([[4, 5, 4, 6, 4], [7, 7, 7, 7, 7]])
    log_probs = np.zeros((2, 8), dtype=np.float32)
    ban_repeated_ngrams(log_probs, history, 2)
    assert set(np.flatnonzero(log_probs[0] == NEG_INF)) == {5, 6}  # after 4 came 5 and 6
    assert set(np.flatnonzero(log_probs[1] == NEG_INF)) == {7}


def test_default_rules_follow_the_options_and_end_with_the_forced_prefixes_and_eos() -> None:
    extra = ForceFirstToken(7)
    assert default_rules(SearchOptions()) == [ForcedEos()]
    options = SearchOptions(min_length=2, no_repeat_ngram_size=3)
    assert default_rules(options, [extra]) == [MinLength(2), NoRepeatNgram(3), extra, ForcedEos()]
    assert default_rules(SearchOptions(), forced_eos="off", prefixes=[(), ()]) == []
    rules = default_rules(options, [extra], prefixes=[[5, 6], []], forced_eos="zero_score")
    assert rules == [MinLength(2), NoRepeatNgram(3), extra, ForcedPrefix(((5, 6), ())), ForcedEos(zero_score=True)]
