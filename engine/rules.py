"""Rules on each step's continuations (min length, n-gram ban, forced prefix, forced EOS, and any a
caller adds), in the manner of CTranslate2's and transformers' logits processors (which transformers
applies to the log-probabilities, as these do).

A rule edits the step's log-probabilities in place, in either of two forms: all of them, (B, K, V),
or each row's best C tokens, (B, K, C) values and ids, which the search reads instead when every
rule can work on them. Rules apply in order, each seeing what the ones before it left.

Shape legend: B sentences still decoding, K beams, N = B*K rows, V vocabulary, C best tokens per
row, T tokens generated so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol

import numpy as np

NEG_INF = np.float32(-np.inf)  # a banned continuation's log-probability

# What a sentence's last allowed step does: force EOS with the decoder's log-probability for it (this
# project's models), force it at log-probability 0 (transformers' forced_eos_token_id), or force
# nothing, leaving the hypotheses to end there as they are (transformers without it).
ForcedEosMode = Literal["model_score", "zero_score", "off"]


@dataclass(frozen=True)
class StepContext:
    """What a rule may read besides the log-probabilities it edits."""

    step: int  # tokens generated so far, the same for every row
    last_step: np.ndarray  # (B,) bool: sentences at their length cap
    history: np.ndarray  # (N, T) int64: each row's generated tokens
    eos_id: int
    # (B', K) float32: the decoder's EOS log-probabilities for the last_step sentences, taken before
    # any rule ran; None when no sentence is at its last step or the search did not read them.
    eos_log_probs: np.ndarray | None
    alive: np.ndarray  # (B,) int64: each live sentence's index in the batch the search started with

    @classmethod
    def build(
        cls,
        step: int,
        last_step: np.ndarray,
        history: np.ndarray,
        eos_id: int,
        log_probs: np.ndarray | None,
        alive: np.ndarray,
    ) -> StepContext:
        """log_probs (B, K, V): the decoder's, before any rule; the forced EOS at the model's score
        needs them when a sentence is at its last step."""
        eos_log_probs = log_probs[last_step, :, eos_id] if log_probs is not None and last_step.any() else None
        return cls(step, last_step, history, eos_id, eos_log_probs, alive)


class Rule(Protocol):
    # How many of a row's tokens the rule may ban: 0 when it decides the rows it touches outright,
    # None when it needs all log-probabilities (apply_top cannot stand in for apply_full). The search
    # reads as many tokens more per row than a sentence's best continuations need (2K for beam size
    # K, 1 for greedy) as the rules together may ban, and at least one.
    top_bans: ClassVar[int | None]

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        """Edit log_probs (B, K, V) in place."""
        ...

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        """Edit each row's best tokens, top_log_probs and top_ids (B, K, C), in place, keeping the
        finite entries best first and lower id first among equals, which ``candidates_from_top``
        relies on: ban an entry by setting it to -inf where it stands; to force a token, write it
        first and set the rest to -inf."""
        ...


def top_spare(rules: Sequence[Rule]) -> int | None:
    """The tokens per row the search must read beyond its needs for ``rules``; None: all of them."""
    bans = [rule.top_bans for rule in rules]
    return None if None in bans else max(1, sum(b for b in bans if b is not None))


def apply_full(rules: Sequence[Rule], log_probs: np.ndarray, ctx: StepContext) -> None:
    for rule in rules:
        rule.apply_full(log_probs, ctx)


def apply_top(rules: Sequence[Rule], top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
    for rule in rules:
        rule.apply_top(top_log_probs, top_ids, ctx)


@dataclass(frozen=True)
class MinLength:
    """No EOS before ``min_length`` generated tokens."""

    min_length: int
    top_bans: ClassVar[int | None] = 1  # EOS

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        if ctx.step < self.min_length:
            log_probs[:, :, ctx.eos_id] = NEG_INF

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        if ctx.step < self.min_length:
            top_log_probs[top_ids == ctx.eos_id] = NEG_INF


@dataclass(frozen=True)
class NoRepeatNgram:
    """No token that would repeat an n-gram already in its row's history."""

    size: int
    top_bans: ClassVar[int | None] = None  # it may ban any number of a row's best tokens

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        B, K, V = log_probs.shape
        ban_repeated_ngrams(log_probs.reshape(B * K, V), ctx.history, self.size)

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        raise NotImplementedError("the n-gram ban needs all log-probabilities")


@dataclass(frozen=True)
class NoRepeatLoop:
    """No token that would make a span of up to ``max_span`` generated tokens occur more than
    ``max_repeats`` times in a row: the loops of a model out of its depth ("Allemmmmmmmer",
    "T-T-T-T", "mit einem Hund mit einem Hund mit einem Hund"), while words and phrases that recur
    apart stay allowed. A row bans one token, that of its shortest repeating span, so that the search
    can stay on each row's best tokens."""

    max_repeats: int
    max_span: int = 8
    top_bans: ClassVar[int | None] = 1

    def banned(self, history: np.ndarray) -> np.ndarray:
        """(N,) int64: each row's banned token, -1 for none. history (N, T)."""
        N, T = history.shape
        banned = np.full(N, -1, dtype=np.int64)
        for span in range(self.max_span, 0, -1):  # the shortest span's token wins
            window = (self.max_repeats + 1) * span - 1  # the tokens before the candidate in the run
            if window > T:
                continue
            # A span repeats only where the last token recurs that far back: the few rows worth
            # comparing over the whole window (all of them when the window holds one span or less).
            rows = np.arange(N) if window <= span else np.flatnonzero(history[:, -1] == history[:, T - 1 - span])
            if len(rows):
                tail = history[rows, T - window :]  # (rows, window)
                periodic = rows[(tail[:, span:] == tail[:, :-span]).all(axis=1)]
                banned[periodic] = history[periodic, T - span]
        return banned

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        B, K, V = log_probs.shape
        banned = self.banned(ctx.history)
        rows = np.flatnonzero(banned >= 0)
        log_probs.reshape(B * K, V)[rows, banned[rows]] = NEG_INF

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        B, K, _ = top_ids.shape
        banned = self.banned(ctx.history).reshape(B, K, 1)
        top_log_probs[top_ids == banned] = NEG_INF


@dataclass(frozen=True)
class ForcedPrefix:
    """Sentence b's first len(prefixes[b]) generated tokens are prefixes[b], each at log-probability 0
    whatever the rules before it did, as transformers' forced_bos_token_id does (a target-language
    token). ``prefixes`` is indexed by the sentences' original positions (``StepContext.alive``)."""

    prefixes: tuple[tuple[int, ...], ...]
    top_bans: ClassVar[int | None] = 0  # it decides the rows it touches
    _tokens: np.ndarray = field(init=False, repr=False, compare=False)  # (B0, P) int64, prefixes padded
    _lengths: np.ndarray = field(init=False, repr=False, compare=False)  # (B0,) int64

    def __post_init__(self) -> None:
        lengths = np.array([len(p) for p in self.prefixes], dtype=np.int64)
        tokens = np.zeros((len(self.prefixes), int(lengths.max(initial=0))), dtype=np.int64)
        for b, prefix in enumerate(self.prefixes):
            tokens[b, : len(prefix)] = prefix
        object.__setattr__(self, "_tokens", tokens)
        object.__setattr__(self, "_lengths", lengths)

    def forced(self, ctx: StepContext) -> tuple[np.ndarray, np.ndarray]:
        """The live sentences still in their prefix at this step, (B',) indices, and their tokens (B',)."""
        if ctx.step >= self._tokens.shape[1]:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        sentences = np.flatnonzero(self._lengths[ctx.alive] > ctx.step)
        return sentences, self._tokens[ctx.alive[sentences], ctx.step]

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        sentences, tokens = self.forced(ctx)
        log_probs[sentences] = NEG_INF
        log_probs[sentences, :, tokens] = 0.0

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        sentences, tokens = self.forced(ctx)
        top_log_probs[sentences] = NEG_INF
        top_log_probs[sentences, :, 0] = 0.0
        top_ids[sentences, :, 0] = tokens[:, None]


@dataclass(frozen=True)
class ForcedEos:
    """At a sentence's last step, EOS is its only continuation whatever the rules before it did; so it
    goes last. It keeps the log-probability the decoder gave it (as in the reference), which the
    search must then read (``StepContext.eos_log_probs``), or, with ``zero_score``, gets 0 (as
    transformers' forced_eos_token_id gives it)."""

    zero_score: bool = False
    top_bans: ClassVar[int | None] = 0  # it decides the rows it touches

    def eos_scores(self, ctx: StepContext) -> np.ndarray | np.float32:
        if self.zero_score:
            return np.float32(0.0)
        if ctx.eos_log_probs is None:
            raise ValueError("the forced EOS at the model's score needs the decoder's EOS log-probabilities")
        return ctx.eos_log_probs

    def apply_full(self, log_probs: np.ndarray, ctx: StepContext) -> None:
        if ctx.last_step.any():
            scores = self.eos_scores(ctx)
            log_probs[ctx.last_step] = NEG_INF
            log_probs[ctx.last_step, :, ctx.eos_id] = scores

    def apply_top(self, top_log_probs: np.ndarray, top_ids: np.ndarray, ctx: StepContext) -> None:
        if ctx.last_step.any():
            scores = self.eos_scores(ctx)
            top_log_probs[ctx.last_step] = NEG_INF
            top_log_probs[ctx.last_step, :, 0] = scores
            top_ids[ctx.last_step, :, 0] = ctx.eos_id


def ban_repeated_ngrams(log_probs: np.ndarray, history: np.ndarray, n: int) -> None:
    """Forbid, in place on log_probs (N, V), the tokens that would repeat an n-gram of history (N, T)."""
    N, T = history.shape
    if n < 1 or n - 1 > T:
        return
    if n == 1:
        rows, cols = np.repeat(np.arange(N), T), history.ravel()
    else:
        prefixes = np.lib.stride_tricks.sliding_window_view(history, n - 1, axis=1)[:, : T - n + 1]  # (N, T-n+1, n-1)
        matches = (prefixes == history[:, None, T - n + 1 :]).all(axis=2)  # earlier (n-1)-grams equal to the last one
        rows, starts = np.nonzero(matches)
        cols = history[rows, starts + n - 1]
    log_probs[rows, cols] = NEG_INF
