"""Shared by the search's tests: hand-made step functions and a decoder over them, the decoder
graph's TopK, and a rule of the kind a caller adds."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from engine.decoder import Step
from engine.rules import NEG_INF, StepContext

BOS, EOS = 2, 3
A, B, C, D = 4, 5, 6, 7
V = 8
TINY = math.log(1e-6)  # every token not listed in a table

Model = Callable[[int, tuple[int, ...]], np.ndarray]  # (sentence, prefix) -> log_probs (V,) or attention (S,)
Table = dict[tuple[int, ...], dict[int, float]]  # prefix -> {token: probability}


class TableDecoder:
    """A decoder whose next-token distribution is a function of (sentence, prefix).

    ``model(sentence, prefix) -> log_probs (V,)``; ``attention(sentence, prefix) -> (S,)``. It checks
    the search's side of the Decoder protocol (rows and sentences kept consistent) and records the
    number of rows of every step.
    """

    def __init__(
        self,
        model: Model,
        n_sentences: int,
        beams: int,
        attention: Model | None = None,
        max_candidates: int | None = None,
    ) -> None:
        self.model, self.attention = model, attention
        self.rows = [(s, ()) for s in range(n_sentences)]  # (sentence, prefix): one row each at first
        self.sentences = list(range(n_sentences))
        self.beams = beams
        self.max_candidates = max_candidates  # fewer best tokens than asked for: the search must cope
        self.rows_per_step: list[int] = []
        self.full_steps: list[bool] = []  # whether each step was asked for all log-probabilities

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        assert tokens.shape == (len(self.rows),) and tokens.dtype == np.int64 and candidates >= 1
        self.rows = [(s, p if t == BOS else (*p, int(t))) for (s, p), t in zip(self.rows, tokens, strict=True)]
        self.rows_per_step.append(len(self.rows))
        self.full_steps.append(full)
        log_probs = np.stack([self.model(s, p) for s, p in self.rows]).astype(np.float32)
        attention = np.stack([self.attention(s, p) for s, p in self.rows]) if self.attention else None
        best = best_tokens(log_probs, min(candidates, self.max_candidates or candidates))
        return Step(log_probs if full else None, *best, attention)

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        self.rows = [self.rows[r] for r in rows]
        if sentences is not None:
            self.sentences = [self.sentences[i] for i in sentences]
        assert [s for s, _ in self.rows] == [s for s in self.sentences for _ in range(self.beams)]


def table_model(table: Table) -> Model:
    def model(_sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
        out = np.full(V, TINY)
        for token, p in table.get(prefix, {}).items():
            out[token] = math.log(p)
        return out

    return model


def random_model(sentence: int, prefix: tuple[int, ...]) -> np.ndarray:
    """A peaked pseudo-random distribution determined by (sentence, prefix); EOS likelier with length."""
    rng = np.random.default_rng(zlib.crc32(repr((sentence, prefix)).encode()))
    logits = rng.normal(0, 2, V)
    logits[EOS] += len(prefix) - 3
    logits[: BOS + 1] = -1e9  # pad, unk, bos never generated
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()


def best_tokens(log_probs: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``count`` best, as the graph's TopK gives them: (values, ids), both (..., count)."""
    ids = np.argsort(-log_probs, axis=-1, kind="stable")[..., :count]
    return np.take_along_axis(log_probs, ids, axis=-1), ids


@dataclass(frozen=True)
class ForceFirstToken:
    """Every hypothesis starts with ``token``, at log-probability 0 (as a target-language tag would)."""

    token: int
    top_bans: ClassVar[int | None] = 0

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        if ctx.step == 0:
            log_probs[:] = NEG_INF
            log_probs[:, :, self.token] = 0.0

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        if ctx.step == 0:
            top_log_probs[:] = NEG_INF
            top_log_probs[:, :, 0] = 0.0
            top_ids[:, :, 0] = self.token
