"""Alignment extraction (engine/alignment.py) on constructed attention matrices."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from engine.alignment import (
    KnownLink,
    build_alignment,
    concat_alignments,
    hard_alignment,
    subword_matrix,
    word_groups,
    word_links,
    word_matrix,
)

# Source "▁The ▁dog s ▁run ." = words "The", "dogs", "run." ; target "▁Die ▁Hund e ▁rennen ."
SOURCE = ["▁The", "▁dog", "s", "▁run", "."]
TARGET = ["▁Die", "▁Hund", "e", "▁rennen", "."]


class PieceTable:
    """A codec over a fixed piece list: id i is piece i; decoding joins pieces like sentencepiece."""

    def __init__(self, pieces: list[str]) -> None:
        self.table = pieces

    def source_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.table[i] for i in ids]

    target_pieces = source_pieces

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.table[i] for i in ids).replace("▁", " ").strip()

    decode_source = decode


def test_word_groups_merge_pieces_at_word_start_markers() -> None:
    assert word_groups(SOURCE) == [[0], [1, 2], [3, 4]]
    assert word_groups(["s", "▁a", "▁", "1"]) == [[0], [1], [2, 3]]  # leading continuation; lone marker
    assert word_groups([]) == []


def test_subword_matrix_drops_eos_and_padding_and_rows_sum_to_one() -> None:
    # 3 target tokens + EOS row; 2 source tokens + EOS + 1 padding column.
    attention = np.array(
        [[0.6, 0.2, 0.2, 0.0], [0.1, 0.1, 0.8, 0.0], [0.0, 0.0, 1.0, 0.0], [0.3, 0.3, 0.4, 0.0]], dtype=np.float32
    )
    weights = subword_matrix(attention, source_len=2, target_len=3)
    assert weights.shape == (3, 2)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(weights[0], [0.75, 0.25])
    np.testing.assert_allclose(weights[2], [0.5, 0.5])  # all mass on EOS: uniform


def test_word_matrix_sums_source_pieces_and_averages_target_pieces() -> None:
    weights = np.array([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # 3 target x 3 source pieces
    words = word_matrix(weights, source_groups=[[0], [1, 2]], target_groups=[[0, 1], [2]])
    np.testing.assert_allclose(words, [[0.25, 0.75], [0.0, 1.0]])
    np.testing.assert_allclose(words.sum(axis=1), 1.0)


def test_hard_alignment_takes_each_target_words_best_source_word() -> None:
    words = np.array([[0.1, 0.9], [0.7, 0.3], [0.5, 0.5]])
    assert hard_alignment(words) == [(1, 0), (0, 1), (0, 2)]  # ties go to the first source word
    assert hard_alignment(np.zeros((0, 2))) == []


def test_build_alignment_end_to_end_on_a_constructed_matrix() -> None:
    codec = PieceTable(SOURCE + TARGET)
    source_ids, target_ids = [0, 1, 2, 3, 4], [5, 6, 7, 8, 9]
    # Rows: target pieces + EOS; columns: source pieces + EOS + padding. Die->The, Hund/e->dog/s, rennen/.->run/.
    attention = np.zeros((6, 7), dtype=np.float32)
    for t, s in [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]:
        attention[t, s] = 0.7
        attention[t, 5] = 0.3  # EOS column, dropped
    attention[5, 5] = 1.0
    alignment = build_alignment(attention, source_ids, target_ids, codec)
    assert alignment.source_tokens == SOURCE and alignment.target_tokens == TARGET
    assert alignment.source_words == ["The", "dogs", "run."]
    assert alignment.target_words == ["Die", "Hunde", "rennen."]
    assert alignment.word_alignment == [(0, 0), (1, 1), (2, 2)]
    np.testing.assert_allclose(np.array(alignment.weights).sum(axis=1), 1.0)
    assert np.array(alignment.weights).shape == (5, 5)


def test_empty_hypothesis_gives_an_empty_alignment() -> None:
    codec = PieceTable(SOURCE)
    alignment = build_alignment(np.ones((1, 6), dtype=np.float32) / 6, [0, 1, 2, 3, 4], [], codec)
    assert alignment.target_tokens == [] and alignment.weights == [] and alignment.word_alignment == []


def test_concat_alignments_is_block_diagonal_with_shifted_word_indices() -> None:
    codec = PieceTable(SOURCE + TARGET)
    first = build_alignment(np.eye(3, 3, dtype=np.float32), [0, 1], [5, 6], codec)
    second = build_alignment(np.eye(2, 2, dtype=np.float32), [3], [8], codec)
    joined = concat_alignments([first, second])
    assert joined.source_tokens == ["▁The", "▁dog", "▁run"]
    assert joined.weights == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert joined.word_alignment == [(0, 0), (1, 1), (2, 2)]
    assert joined.source_words == ["The", "dog", "run"]


@pytest.mark.parametrize("rows", [1, 4])
def test_subword_rows_sum_to_one_for_random_attention(rows: int) -> None:
    rng = np.random.default_rng(rows)
    attention = rng.random((rows + 1, 9)).astype(np.float32)
    attention /= attention.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(subword_matrix(attention, 6, rows).sum(axis=1), 1.0)


def test_known_links_override_the_attention_of_their_words() -> None:
    """A glossary term's target pieces ("Hund e", 1-2) attend to "The"; they translate "dogs"
    (source pieces 1-2) alone, so "rennen.", which attends to "dogs" most, takes its next best
    ("run."), and "Die", which attends to nothing else, is linked to nothing."""
    codec = PieceTable(SOURCE + TARGET)
    source_ids, target_ids = [0, 1, 2, 3, 4], [5, 6, 7, 8, 9]
    attention = np.zeros((6, 6), dtype=np.float32)
    attention[0, 1] = 1.0  # "Die" -> "dog"
    attention[[1, 2], 0] = 1.0  # "Hund", "e" -> "The"
    attention[3, 1] = 1.0  # "rennen" -> "dog"
    attention[4, [1, 3]] = [0.2, 0.8]  # "." -> "dog", "run"
    plain = word_links(attention, source_ids, target_ids, codec)
    assert plain.pairs == [(1, 0), (0, 1), (1, 2)]
    known = word_links(attention, source_ids, target_ids, codec, [KnownLink((1, 3), (1, 3))])
    assert known.pairs == [(1, 1), (2, 2)]
    assert (known.source_words, known.target_words) == (3, 3)
    assert build_alignment(attention, source_ids, target_ids, codec).word_alignment == plain.pairs


def test_a_known_link_of_several_words_links_each_to_each() -> None:
    """A term translates as a whole: an element over one of its source words takes all its translation."""
    codec = PieceTable(SOURCE + TARGET)
    attention = np.eye(6, dtype=np.float32)
    links = word_links(attention, [0, 1, 2, 3, 4], [5, 6, 7, 8, 9], codec, [KnownLink((0, 3), (0, 3))])
    assert links.pairs == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 2)]
