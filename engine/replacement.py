"""Glossary terms put in place of the words a translation says them with.

A sentence's translation that misses a glossary term is first mended where it stands: the target
words the decoder translated the term's source words with give way to the term's pieces ("Ein Hund
rennt im Park." with dog -> Köter: "Ein Köter rennt im Park."), and the rest stays as the model
wrote it. Constrained search (``engine.constraints``) places the term and writes the rest anew, and
a small model led off its path by a word it finds unlikely writes the rest worse (benchmarks/
RESULTS.md, section 17); it remains for the sentences whose words cannot be found here.

The words come from the hypothesis's cross-attention (``engine.alignment``'s word matrix): for each
source word of the term, the target word that attends to it most. That is the peak of the source
word's column, not of the target words' rows: an article attends to its noun's source word as much
as the noun does ("Eine" and "Frau" both to "woman"), but the noun attends to it more. The words
must be one run; the term takes their place but for their closing punctuation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.alignment import subword_matrix, word_groups, word_matrix, words_over


@dataclass(frozen=True)
class Replacement:
    """Target pieces [start, end) to be the term's ``pieces``."""

    start: int
    end: int
    pieces: tuple[int, ...]


class WordAttention:
    """One hypothesis's cross-attention between words: which target words translate which source words."""

    def __init__(self, attention: np.ndarray, source_pieces: Sequence[str], target_pieces: Sequence[str]) -> None:
        """``attention`` (>= T, >= S) over the target and source pieces."""
        self.target_pieces = list(target_pieces)
        self.source_groups, self.target_groups = word_groups(source_pieces), word_groups(target_pieces)
        weights = subword_matrix(attention, len(source_pieces), len(target_pieces))
        if self.source_groups and self.target_groups:
            self.words = word_matrix(weights, self.source_groups, self.target_groups)  # (Tw, Sw)
        else:
            self.words = np.zeros((len(self.target_groups), len(self.source_groups)))

    def translated_by(self, span: tuple[int, int]) -> tuple[int, int] | None:
        """The target pieces [start, end) that translate the source words of source pieces [span);
        None when they are not one run of words."""
        said = words_over(self.source_groups, span)
        if not said or not self.target_groups:
            return None
        chosen = sorted({int(self.words[:, w].argmax()) for w in said})
        if chosen[-1] - chosen[0] + 1 != len(chosen):
            return None
        start, end = self.target_groups[chosen[0]][0], self.target_groups[chosen[-1]][-1] + 1
        while end > start and not _has_word_characters(self.target_pieces[end - 1]):
            end -= 1
        if end == start or not _has_word_characters(self.target_pieces[start]):
            return None
        return start, end


def replaced(tokens: Sequence[int], replacements: Sequence[Replacement]) -> list[int] | None:
    """``tokens`` with each replacement made; None if two of them overlap."""
    out = list(tokens)
    edge = len(out)
    for r in sorted(replacements, key=lambda r: r.start, reverse=True):
        if r.end > edge:
            return None
        out[r.start : r.end] = r.pieces
        edge = r.start
    return out


def _has_word_characters(piece: str) -> bool:
    return any(c.isalnum() for c in piece)
