"""Source-target alignments from the decoder's cross-attention.

The search records, for every generated token, the cross-attention (over the padded source) of the
manifest's alignment layer, heads averaged, at the step that chose the token, followed back through
beam reordering (``engine.attention_trace.AttentionTrace``). From that (T+1, S) matrix, EOS row included:

1. Subword matrix, target pieces x source pieces: the end-of-sentence row and column and the source
   padding are dropped, then each row is renormalized to sum to 1.
2. Word-level matrix: pieces are merged into words, a piece starting with "▁" starting a new word
   (sentencepiece's word-boundary marker). Weights are summed over a source word's pieces and
   averaged over a target word's pieces, so rows still sum to 1.
3. Hard word alignment, Pharaoh pairs (source word, target word): each target word is aligned to
   the source word with the highest word-level weight (the first one on ties); listed in target
   order. End of sentence never appears, as it is not a word.

Shape legend: T target pieces, S source pieces, Tw / Sw target / source words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

WORD_START = "▁"


@dataclass
class Alignment:
    source_tokens: list[str]
    target_tokens: list[str]
    weights: list[list[float]]  # target x source pieces, rows sum to 1
    source_words: list[str]
    target_words: list[str]
    word_alignment: list[tuple[int, int]]  # (source word index, target word index)


class PieceCodec(Protocol):
    """What alignments need from the tokenizer (``engine.tokenizer.Tokenizer`` is one)."""

    def source_pieces(self, ids: Sequence[int]) -> list[str]: ...

    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...

    def decode_source(self, ids: Sequence[int]) -> str: ...

    def decode(self, ids: Sequence[int]) -> str: ...


def subword_matrix(attention: np.ndarray, source_len: int, target_len: int) -> np.ndarray:
    """attention (>= T, >= S) -> (T, S) over the first T target and S source pieces, rows summing to 1.

    A row with no weight on any real source piece (all of it on EOS) becomes uniform.
    """
    weights = np.asarray(attention, dtype=np.float64)[:target_len, :source_len]
    totals = weights.sum(axis=1, keepdims=True)
    uniform = np.full_like(weights, 1.0 / max(source_len, 1))
    return np.divide(weights, totals, out=uniform, where=totals > 0)


def word_groups(pieces: Sequence[str]) -> list[list[int]]:
    """Indices of the pieces of each word: a piece starting with "▁" opens a word, others extend it."""
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if piece.startswith(WORD_START) or not groups:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def word_matrix(weights: np.ndarray, source_groups: list[list[int]], target_groups: list[list[int]]) -> np.ndarray:
    """(T, S) piece weights -> (Tw, Sw): summed over source pieces, averaged over target pieces."""
    by_source = np.stack([weights[:, g].sum(axis=1) for g in source_groups], axis=1)  # (T, Sw)
    return np.stack([by_source[g].mean(axis=0) for g in target_groups])  # (Tw, Sw)


def hard_alignment(words: np.ndarray) -> list[tuple[int, int]]:
    """Each target word to its highest-weight source word: [(source, target), ...] in target order."""
    if words.size == 0:
        return []
    return [(int(s), t) for t, s in enumerate(words.argmax(axis=1))]


@dataclass(frozen=True)
class KnownLink:
    """Target pieces [target) known to translate source pieces [source), whatever the attention
    says: a glossary term put in the translation, which the model did not choose and may attend
    to its neighbours while writing."""

    source: tuple[int, int]
    target: tuple[int, int]


@dataclass
class WordLinks:
    """The hard word alignment alone, and how many words each side has."""

    pairs: list[tuple[int, int]]  # (source word index, target word index)
    source_words: int
    target_words: int


def word_links(
    attention: np.ndarray,
    source_ids: Sequence[int],
    target_ids: Sequence[int],
    codec: PieceCodec,
    known: Sequence[KnownLink] = (),
) -> WordLinks:
    """``build_alignment``'s word pairs, without its strings and matrices; with the words of each
    ``known`` link linked as ``_pinned`` says."""
    _, _, _, source_groups, target_groups, pairs = _words(attention, source_ids, target_ids, codec, known)
    return WordLinks(pairs, len(source_groups), len(target_groups))


def _words(
    attention: np.ndarray,
    source_ids: Sequence[int],
    target_ids: Sequence[int],
    codec: PieceCodec,
    known: Sequence[KnownLink] = (),
) -> tuple[list[str], list[str], np.ndarray, list[list[int]], list[list[int]], list[tuple[int, int]]]:
    """Pieces, piece weights, word groups and hard word pairs of one hypothesis."""
    source_pieces, target_pieces = codec.source_pieces(source_ids), codec.target_pieces(target_ids)
    weights = subword_matrix(attention, len(source_ids), len(target_ids))
    source_groups, target_groups = word_groups(source_pieces), word_groups(target_pieces)
    if source_groups and target_groups:
        words = word_matrix(weights, source_groups, target_groups)
        spans = [(words_over(source_groups, k.source), words_over(target_groups, k.target)) for k in known]
        pairs = _pinned(words, spans) if spans else hard_alignment(words)
    else:
        pairs = []
    return source_pieces, target_pieces, weights, source_groups, target_groups, pairs


def words_over(groups: Sequence[Sequence[int]], span: tuple[int, int]) -> list[int]:
    """The words (``word_groups``) with a piece in pieces [span)."""
    return [w for w, group in enumerate(groups) if span[0] <= group[-1] and group[0] < span[1]]


def _pinned(words: np.ndarray, known: Sequence[tuple[list[int], list[int]]]) -> list[tuple[int, int]]:
    """Hard word pairs of the (Tw, Sw) ``words``, in target order, where each of ``known`` (source
    words, target words) translate each other alone: its target words are linked to its source
    words, every one to every one, and other target words to their best other source word (none
    if they attend to nothing else).

    Every one to every one: a term translates as a whole ("e-mail address", "E-Mail-Adresse"), so
    an element over part of it takes all of its translation rather than a guess at a part. Other
    words are kept off the term's source words: after a word it was made to write, the model's
    attention lags on that word's source ("A hound runs", "runs" on "Hund")."""
    words = words.copy()
    pinned: dict[int, list[int]] = {}
    for sources, targets in known:
        if sources and targets:
            others = [t for t in range(len(words)) if t not in targets]
            words[np.ix_(others, sources)] = 0.0
            pinned.update(dict.fromkeys(targets, sources))
    pairs: list[tuple[int, int]] = []
    for t, row in enumerate(words):
        if t in pinned:
            pairs += [(s, t) for s in pinned[t]]
        elif row.max() > 0:
            pairs.append((int(row.argmax()), t))
    return pairs


def build_alignment(
    attention: np.ndarray, source_ids: Sequence[int], target_ids: Sequence[int], codec: PieceCodec
) -> Alignment:
    """attention (>= T+1, >= S+1) of one hypothesis; source/target ids without EOS or padding."""
    source_pieces, target_pieces, weights, source_groups, target_groups, pairs = _words(
        attention, source_ids, target_ids, codec
    )
    return Alignment(
        source_tokens=source_pieces,
        target_tokens=target_pieces,
        weights=weights.tolist(),
        source_words=[codec.decode_source([source_ids[i] for i in g]) for g in source_groups],
        target_words=[codec.decode([target_ids[i] for i in g]) for g in target_groups],
        word_alignment=pairs,
    )


def concat_alignments(parts: Sequence[Alignment]) -> Alignment:
    """Alignments of consecutive sentences of one text -> one alignment, block-diagonal weights."""
    n_source = sum(len(p.source_tokens) for p in parts)
    weights: list[list[float]] = []
    pairs: list[tuple[int, int]] = []
    column = source_word = target_word = 0
    for p in parts:
        weights += [[0.0] * column + row + [0.0] * (n_source - column - len(row)) for row in p.weights]
        pairs += [(s + source_word, t + target_word) for s, t in p.word_alignment]
        column += len(p.source_tokens)
        source_word += len(p.source_words)
        target_word += len(p.target_words)
    return Alignment(
        source_tokens=[t for p in parts for t in p.source_tokens],
        target_tokens=[t for p in parts for t in p.target_tokens],
        weights=weights,
        source_words=[w for p in parts for w in p.source_words],
        target_words=[w for p in parts for w in p.target_words],
        word_alignment=pairs,
    )
