"""Beam search and greedy decoding (engine/beam_search.py) on hand-made step functions."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from search_helpers import (
    BOS,
    EOS,
    TINY,
    A,
    B,
    C,
    D,
    ForceFirstToken,
    Model,
    Table,
    TableDecoder,
    random_model,
    table_model,
)

from engine.beam_search import Hypothesis, SearchOptions, search
from engine.rules import ForcedEosMode


def run(
    table: Table,
    options: SearchOptions,
    max_length: int = 10,
    attention: Model | None = None,
    forced_eos: ForcedEosMode = "model_score",
) -> tuple[list[Hypothesis], TableDecoder]:
    decoder = TableDecoder(table_model(table), 1, options.beam_size, attention)
    return search(decoder, [max_length], options, bos_id=BOS, eos_id=EOS, forced_eos=forced_eos)[0], decoder


# Greedy takes A (0.55) then EOS: 0.55 * 0.36 = 0.198. Beam search finds B EOS: 0.45 * 0.9 = 0.405.
GREEDY_TRAP = {(): {A: 0.55, B: 0.45}, (A,): {EOS: 0.36, C: 0.34, B: 0.3}, (B,): {EOS: 0.9}}


def test_beam_search_finds_the_better_sequence_that_greedy_misses() -> None:
    greedy, _ = run(GREEDY_TRAP, SearchOptions(beam_size=1))
    beam, _ = run(GREEDY_TRAP, SearchOptions(beam_size=2))
    assert greedy[0].tokens == [A]
    assert greedy[0].score == pytest.approx(math.log(0.55 * 0.36), abs=1e-5)
    assert beam[0].tokens == [B]
    assert beam[0].score == pytest.approx(math.log(0.45 * 0.9), abs=1e-5)
    assert beam[0].normalized_score == pytest.approx(beam[0].score / 2)  # 2 tokens with EOS, alpha 1


# X EOS: 0.3 over 2 tokens. Y Z W EOS: 0.45 * 0.9 * 0.85 * 0.73 = 0.251 over 4 tokens.
SHORT_VS_LONG = {(): {A: 0.5, B: 0.45}, (A,): {EOS: 0.6}, (B,): {C: 0.9}, (B, C): {D: 0.85}, (B, C, D): {EOS: 0.73}}


@pytest.mark.parametrize(("alpha", "winner"), [(0.0, [A]), (1.0, [B, C, D])])
def test_length_penalty_changes_the_winner(alpha: float, winner: list[int]) -> None:
    hyps, _ = run(SHORT_VS_LONG, SearchOptions(beam_size=2, num_hypotheses=2, length_penalty=alpha))
    assert [h.tokens for h in hyps] == [winner, [A] if winner != [A] else [B, C, D]]
    for h in hyps:
        assert h.normalized_score == pytest.approx(h.score / (len(h.tokens) + 1) ** alpha)


def test_n_best_is_ordered_by_normalized_score_and_bounded_by_num_hypotheses() -> None:
    hyps, _ = run(GREEDY_TRAP, SearchOptions(beam_size=3, num_hypotheses=3))
    assert len(hyps) == 3
    assert [h.tokens for h in hyps[:2]] == [[B], [A]]
    scores = [h.normalized_score for h in hyps]
    assert scores == sorted(scores, reverse=True)
    assert len(run(GREEDY_TRAP, SearchOptions(beam_size=3, num_hypotheses=2))[0]) == 2


def test_min_length_forbids_early_eos() -> None:
    table = {**GREEDY_TRAP, (A, C): {EOS: 0.9}, (A, B): {EOS: 0.9}}
    assert run(table, SearchOptions(beam_size=2))[0][0].tokens == [B]
    hyps, _ = run(table, SearchOptions(beam_size=2, num_hypotheses=2, min_length=2))
    assert [h.tokens for h in hyps] == [[A, C], [A, B]]
    eos_first = {(): {EOS: 0.6, A: 0.4}, (A,): {EOS: 0.7, B: 0.3}, (A, B): {EOS: 0.9}}
    assert run(eos_first, SearchOptions(beam_size=1))[0][0].tokens == []
    assert run(eos_first, SearchOptions(beam_size=1, min_length=2))[0][0].tokens == [A, B]


def test_max_length_forces_eos_at_the_last_step() -> None:
    loop = {(): {A: 0.9}, (A,): {A: 0.9}, (A, A): {A: 0.9}, (A, A, A): {A: 0.9}}
    for beam in (1, 3):
        hyps, decoder = run(loop, SearchOptions(beam_size=beam), max_length=3)
        assert hyps[0].tokens == [A, A]  # 3 tokens with the forced EOS
        assert len(decoder.rows_per_step) == 3
        assert hyps[0].score == pytest.approx(2 * math.log(0.9) + TINY, abs=1e-4)  # EOS keeps its own log-prob


LOOP = {(): {A: 0.9}, (A,): {A: 0.9}, (A, A): {A: 0.9}, (A, A, A): {A: 0.9}}


@pytest.mark.parametrize("beam", [1, 3])
def test_forced_eos_at_zero_score_adds_nothing_to_the_score(beam: int) -> None:
    hyps, _ = run(LOOP, SearchOptions(beam_size=beam, length_penalty=0.5), max_length=3, forced_eos="zero_score")
    assert (hyps[0].tokens, hyps[0].eos, hyps[0].length) == ([A, A], True, 3)
    assert hyps[0].score == float(np.float32(math.log(0.9)) * 2)
    assert hyps[0].normalized_score == hyps[0].score / 3**0.5


@pytest.mark.parametrize("beam", [1, 3])
def test_without_forced_eos_the_best_continuations_end_as_they_are_at_the_cap(beam: int) -> None:
    """Each of the first K continuations of the last step ends a hypothesis, its token kept and
    counted by the length penalty; one that is EOS ends as any EOS does."""
    table = {**LOOP, (A, A): {A: 0.5, EOS: 0.3, B: 0.15}}
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, length_penalty=0.5)
    hyps, decoder = run(table, options, max_length=3, forced_eos="off")
    assert len(decoder.rows_per_step) == 3
    assert (hyps[0].tokens, hyps[0].eos, hyps[0].length) == ([A, A, A], False, 3)
    assert hyps[0].score == pytest.approx(2 * math.log(0.9) + math.log(0.5), abs=1e-5)
    assert hyps[0].normalized_score == hyps[0].score / 3**0.5
    if beam == 3:
        assert [(h.tokens, h.eos) for h in hyps] == [([A, A, A], False), ([A, A], True), ([A, A, B], False)]
        assert all(h.length == 3 for h in hyps)


def test_eos_finishes_and_finished_sentences_leave_the_batch() -> None:
    longest = {(): {A: 0.9, B: 0.1}, (B,): {EOS: 0.9}, (A,): {B: 0.9}, (A, B): {C: 0.9}, (A, B, C): {EOS: 0.9}}
    tables = [GREEDY_TRAP, SHORT_VS_LONG, longest]
    model = lambda s, p: table_model(tables[s])(s, p)
    for K in (1, 2):
        decoder = TableDecoder(model, 3, K)
        results = search(decoder, [10, 10, 10], SearchOptions(beam_size=K), bos_id=BOS, eos_id=EOS)
        assert [r[0].tokens for r in results] == ([[A], [A], [A, B, C]] if K == 1 else [[B], [B, C, D], [A, B, C]])
        assert decoder.rows_per_step[:2] == [3, 3 * K], "step 0 computes the K identical beams once"
        assert decoder.rows_per_step[-1] < 3 * K, "finished sentences must leave the batch"
        assert len(decoder.rows_per_step) == 4  # stops as soon as every sentence is finished


def prefix_attention(sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(repr(("attention", sentence, prefix)).encode()))
    return rng.random(5).astype(np.float32)


@pytest.mark.parametrize("forced_eos", ["model_score", "off"])
@pytest.mark.parametrize("beam", [1, 4])
def test_attention_follows_each_hypothesis_through_beam_reordering(beam: int, forced_eos: ForcedEosMode) -> None:
    """One row per generated token, EOS's only where there is one."""
    decoder = TableDecoder(random_model, 4, beam, prefix_attention)
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, return_alignments=True)
    results = search(decoder, [12, 5, 9, 12], options, bos_id=BOS, eos_id=EOS, forced_eos=forced_eos)
    for sentence, hyps in enumerate(results):
        for h in hyps:
            expected = [prefix_attention(sentence, tuple(h.tokens[:t])) for t in range(h.length)]
            np.testing.assert_array_equal(h.attention, np.stack(expected))
    assert any(not h.eos for hyps in results for h in hyps) == (forced_eos == "off")


# Sentence b's forced first tokens: sentences leave the batch around those still being forced.
PREFIXES = [(D,), (C, D, A), (), (C, D, A), (B,), (D, A)]


@pytest.mark.parametrize("prefixes", [None, PREFIXES])
@pytest.mark.parametrize("forced_eos", ["model_score", "zero_score", "off"])
@pytest.mark.parametrize("beam", [1, 3, 5])
def test_each_sentence_gets_the_same_result_alone_or_in_a_batch(
    beam: int, forced_eos: ForcedEosMode, prefixes: list[tuple[int, ...]] | None
) -> None:
    max_lengths = [12, 3, 9, 15, 1, 7]
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, length_penalty=0.6)
    kwargs = dict(bos_id=BOS, eos_id=EOS, forced_eos=forced_eos)
    batched = search(TableDecoder(random_model, 6, beam), max_lengths, options, prefixes=prefixes, **kwargs)
    for s, expected in enumerate(batched):
        model = lambda _s, p, s=s: random_model(s, p)
        prefix = None if prefixes is None else [prefixes[s]]
        alone = search(TableDecoder(model, 1, beam), [max_lengths[s]], options, prefixes=prefix, **kwargs)[0]
        assert [(h.tokens, h.score, h.eos) for h in alone] == [(h.tokens, h.score, h.eos) for h in expected]
        assert all(h.length <= max_lengths[s] for h in expected)


def tied_model(sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
    """40 tokens, log-probabilities on a coarse grid: many exact ties."""
    rng = np.random.default_rng(zlib.crc32(repr(("tied", sentence, prefix)).encode()))
    logits = np.round(rng.normal(0, 2, 40)) / 2
    logits[EOS] += len(prefix) / 2 - 1
    logits[: BOS + 1] = -1e9
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


@pytest.mark.parametrize("prefixes", [None, PREFIXES])
@pytest.mark.parametrize("forced_eos", ["model_score", "zero_score", "off"])
@pytest.mark.parametrize(("beam", "min_length"), [(1, 0), (1, 3), (2, 0), (4, 0), (4, 3), (6, 5)])
def test_search_over_each_rows_best_tokens_equals_search_over_all(
    beam: int, min_length: int, forced_eos: ForcedEosMode, prefixes: list[tuple[int, ...]] | None
) -> None:
    """The search reads each row's 2K+1 best tokens (greedy: 2); a decoder that offers fewer makes
    it scan all V log-probabilities. Both give the same hypotheses, ties, min-length, forced prefixes
    and forced EOS included."""
    max_lengths = [12, 3, 9, 15, 1, 7]
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, min_length=min_length)
    results = []
    for max_candidates in (None, 1):
        decoder = TableDecoder(tied_model, 6, beam, max_candidates=max_candidates)
        kwargs = dict(prefixes=prefixes, forced_eos=forced_eos)
        results.append(search(decoder, max_lengths, options, bos_id=BOS, eos_id=EOS, **kwargs))
    top, full = ([[(h.tokens, h.score, h.eos) for h in hyps] for hyps in r] for r in results)
    assert top == full
    if beam > 1:
        assert sum(len(hyps) for hyps in top) > len(max_lengths)  # n-best lists, not just single answers


@pytest.mark.parametrize("beam", [1, 4])
def test_an_extra_rule_takes_effect_over_best_tokens_and_over_all(beam: int) -> None:
    """A rule forcing the first token: every hypothesis starts with it at log-probability 0, unless
    its sentence may generate only one token, where the forced EOS wins."""
    max_lengths = [12, 3, 9, 15, 1, 7]
    options = SearchOptions(beam_size=beam, num_hypotheses=beam)
    plain = search(TableDecoder(random_model, 6, beam), max_lengths, options, bos_id=BOS, eos_id=EOS)
    assert any(h.tokens[:1] != [D] for hyps in plain for h in hyps), "D must not come first anyway"
    results = []
    for max_candidates in (None, 1):
        decoder = TableDecoder(random_model, 6, beam, max_candidates=max_candidates)
        rules = [ForceFirstToken(D)]
        results.append(search(decoder, max_lengths, options, bos_id=BOS, eos_id=EOS, extra_rules=rules))
    top, full = ([[(h.tokens, h.score) for h in hyps] for hyps in r] for r in results)
    assert top == full
    for s, hyps in enumerate(top):
        for tokens, score in hyps:
            assert tokens[:1] == ([] if max_lengths[s] == 1 else [D])
            chosen = [*tokens, EOS]
            expected = np.float32(0.0)  # a float32 sum, as the search adds; the forced D adds 0
            for t in range(1 if tokens else 0, len(chosen)):
                expected += np.float32(random_model(s, tuple(tokens[:t]))[chosen[t]])
            assert score == float(expected)


def forced_score(sentence: int, tokens: list[int], prefix: tuple[int, ...], eos: bool) -> float:
    """The float32 sum the search makes of random_model's log-probabilities, the forced prefix adding 0
    (an EOS forced in its stead keeps its own)."""
    chosen = [*tokens, EOS] if eos else tokens
    total = np.float32(0.0)
    for t in range(min(len(prefix), len(tokens)), len(chosen)):
        total += np.float32(random_model(sentence, tuple(tokens[:t]))[chosen[t]])
    return float(total)


@pytest.mark.parametrize("forced_eos", ["model_score", "off"])
@pytest.mark.parametrize("beam", [1, 4])
def test_prefixes_are_forced_per_sentence_and_count_as_generated_tokens(beam: int, forced_eos: ForcedEosMode) -> None:
    """Each hypothesis of sentence b starts with prefixes[b], which adds 0 to its score and counts in
    its length; where the length cap comes first, the forced EOS wins, or without it the prefix ends
    the hypothesis there."""
    max_lengths = [12, 3, 9, 15, 1, 7]
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, length_penalty=1.0)
    decoder = TableDecoder(random_model, 6, beam)
    results = search(decoder, max_lengths, options, bos_id=BOS, eos_id=EOS, prefixes=PREFIXES, forced_eos=forced_eos)
    capped = {1: ([C, D], True) if forced_eos == "model_score" else ([C, D, A], False)}
    capped[4] = ([], True) if forced_eos == "model_score" else ([B], False)
    for s, hyps in enumerate(results):
        for h in hyps:
            if s in capped:
                assert (h.tokens, h.eos) == capped[s]
            else:
                assert tuple(h.tokens[: len(PREFIXES[s])]) == PREFIXES[s]
            assert h.score == forced_score(s, h.tokens, PREFIXES[s], h.eos)
            assert h.normalized_score == h.score / h.length
    assert [len(hyps) for hyps in results] == [beam, 1, beam, beam, 1, beam], "one row alive while forced to the cap"


def test_full_log_probs_are_asked_for_only_when_the_search_reads_them() -> None:
    """The top path needs all V log-probabilities only at step 0 (to learn whether the decoder gives
    2K+1 candidates) and at a sentence's last step if EOS is forced at its own log-probability."""
    never_ends = table_model({})  # EOS is as unlikely as any other token: every sentence runs to its cap
    decoder = TableDecoder(never_ends, 3, 2)
    search(decoder, [3, 6, 6], SearchOptions(beam_size=2), bos_id=BOS, eos_id=EOS)
    assert decoder.full_steps == [True, False, True, False, False, True]
    for forced_eos in ("zero_score", "off"):
        decoder = TableDecoder(never_ends, 3, 2)
        search(decoder, [3, 6, 6], SearchOptions(beam_size=2), bos_id=BOS, eos_id=EOS, forced_eos=forced_eos)
        assert decoder.full_steps == [True, False, False, False, False, False]
    fewer = TableDecoder(never_ends, 3, 2, max_candidates=1)
    search(fewer, [3, 6, 6], SearchOptions(beam_size=2), bos_id=BOS, eos_id=EOS)
    assert fewer.full_steps == [True] * 6, "with too few candidates every step reads all log-probabilities"
    blocked = TableDecoder(never_ends, 3, 2)
    search(blocked, [3, 6, 6], SearchOptions(beam_size=2, no_repeat_ngram_size=2), bos_id=BOS, eos_id=EOS)
    assert blocked.full_steps == [True] * 6


def test_no_repeat_ngram_size_blocks_repeats() -> None:
    cycle = {(): {A: 0.9}}
    prefix: tuple[int, ...] = (A,)
    for i in range(8):  # A B A B A B ...: greedy repeats the bigram (A, B)
        cycle[prefix] = {(B if i % 2 == 0 else A): 0.6, C: 0.3}
        prefix = (*prefix, B if i % 2 == 0 else A)
    plain, _ = run(cycle, SearchOptions(beam_size=1), max_length=6)
    blocked, _ = run(cycle, SearchOptions(beam_size=1, no_repeat_ngram_size=2), max_length=6)
    assert plain[0].tokens[:4] == [A, B, A, B]
    assert blocked[0].tokens[:3] == [A, B, A] and blocked[0].tokens[3] != B


@pytest.mark.parametrize("beam", [1, 2])
def test_max_consecutive_repeats_ends_a_loop_and_keeps_to_the_best_tokens(beam: int) -> None:
    cycle = {(): {A: 0.9}}
    prefix: tuple[int, ...] = (A,)
    for i in range(10):  # A B A B A B ...: the model loops
        cycle[prefix] = {(B if i % 2 == 0 else A): 0.6, C: 0.3}
        prefix = (*prefix, B if i % 2 == 0 else A)
    plain, _ = run(cycle, SearchOptions(beam_size=beam), max_length=8)
    guarded, decoder = run(cycle, SearchOptions(beam_size=beam, max_consecutive_repeats=2), max_length=8)
    assert plain[0].tokens[:6] == [A, B, A, B, A, B]
    assert guarded[0].tokens[:5] == [A, B, A, B, A] and guarded[0].tokens[5] != B, "no third (A, B)"
    assert decoder.full_steps == [True] + [False] * 6 + [True], "one ban per row: the search stays on the top path"


@pytest.mark.parametrize(
    "bad",
    [
        dict(beam_size=0),
        dict(beam_size=2, num_hypotheses=3),
        dict(num_hypotheses=0),
        dict(length_penalty=-1.0),
        dict(length_penalty=float("nan")),
        dict(min_length=-1),
        dict(max_consecutive_repeats=-1),
    ],
)
def test_invalid_options_are_rejected_with_a_message(bad: dict) -> None:
    with pytest.raises(ValueError, match=r"\w+"):
        SearchOptions(**bad)


def test_invalid_search_arguments_are_rejected_with_a_message() -> None:
    decoder = TableDecoder(random_model, 2, 2)
    with pytest.raises(ValueError, match="forced_eos"):
        search(decoder, [5, 5], SearchOptions(beam_size=2), bos_id=BOS, eos_id=EOS, forced_eos="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 prefixes for 2 sentences"):
        search(decoder, [5, 5], SearchOptions(beam_size=2), bos_id=BOS, eos_id=EOS, prefixes=[[A]])


def test_no_sentences_gives_no_results() -> None:
    decoder = TableDecoder(random_model, 0, 2)
    assert search(decoder, [], SearchOptions(beam_size=2), bos_id=BOS, eos_id=EOS) == []
