"""Batched beam search and greedy decoding in numpy, over any step-wise decoder.

The rules are those of the PyTorch reference, ``model/decoding.py``, so that both give the same
translations from the same log-probabilities:

- Scores are float32 sums of log-probabilities. A finished hypothesis of n generated tokens (EOS
  included) is ranked by ``score / n ** length_penalty``.
- Each step takes the 2K best (beam, token) continuations of a sentence in descending score order
  (ties: lower beam, then lower token id first); an EOS among the first K finishes that hypothesis,
  the first K non-EOS continuations become the next beams.
- A sentence is finished once it has K finished hypotheses, or after the step at which EOS was
  forced (``max_length - 1``). EOS is forbidden before ``min_length`` generated tokens.
- Beam size 1 is greedy decoding, which takes a fast path (each row's best of its 2 best tokens,
  no candidate sorting).

The decoder also returns each row's best 2K+1 tokens (a TopK inside the step graph), and the
search picks among those K*(2K+1) per sentence instead of reading K*V log-probabilities: the same
result, since a sentence's best 2K are among its beams' best 2K+1 once EOS may be ruled out. Only
``no_repeat_ngram_size``, which can rule out any token, falls back to the full log-probabilities.

Finished sentences leave the batch at once: the decoder is told which rows and sentences to keep,
so later steps only compute what is still alive. ``no_repeat_ngram_size`` is an addition of the
engine (the reference has none); at 0 it changes nothing.

Shape legend: B sentences still decoding, K beams, N = B*K decoder rows, V vocabulary, S source
length, T tokens generated so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

NEG_INF = np.float32(-np.inf)
GROUPS = 256  # token groups of top_candidates: few enough to scan, enough to prune well (V = 8000)


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 4
    num_hypotheses: int = 1
    length_penalty: float = 1.0
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    return_attention: bool = False

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {self.beam_size}")
        if not 1 <= self.num_hypotheses <= self.beam_size:
            raise ValueError(f"num_hypotheses must be in 1..beam_size={self.beam_size}, got {self.num_hypotheses}")
        if not np.isfinite(self.length_penalty) or self.length_penalty < 0:
            raise ValueError(f"length_penalty must be a finite number >= 0, got {self.length_penalty}")
        if self.min_length < 0 or self.no_repeat_ngram_size < 0:
            raise ValueError("min_length and no_repeat_ngram_size must be >= 0")


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, EOS excluded
    score: float  # sum of log-probabilities, EOS included
    normalized_score: float  # score / (len(tokens) + 1) ** length_penalty
    attention: np.ndarray | None = None  # (len(tokens) + 1, S): cross-attention when each token and EOS was chosen


@dataclass
class Step:
    """One decoder step's outputs for N rows."""

    log_probs: np.ndarray | None  # (N, V) float32, writable; None unless asked for
    top_log_probs: np.ndarray  # (N, C) float32: each row's C best, best first, lower id first among equals
    top_ids: np.ndarray  # (N, C) int64: their token ids
    attention: np.ndarray | None  # (N, S) cross-attention, when asked for

    def repeat(self, times: int) -> Step:
        """Each row ``times`` times in a row."""
        arrays = (self.log_probs, self.top_log_probs, self.top_ids, self.attention)
        return Step(*(None if a is None else np.repeat(a, times, axis=0) for a in arrays))


class Decoder(Protocol):
    """The model side of the search. It starts with one row per sentence; after the first step,
    row n*K + k is beam k of sentence n."""

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        """tokens (N,) int64 -> the step's outputs, with each row's best ``candidates`` (>= 1) tokens,
        and all log-probabilities only if ``full`` (copying (N, V) floats out costs ~5% of a step)."""
        ...

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        """Keep decoder rows ``rows`` (N',) in that order and, unless None, only the sentences ``sentences`` (B',)."""
        ...


@dataclass
class Candidates:
    """The best continuations of each sentence, best first: all (B, C)."""

    scores: np.ndarray  # float32 cumulative scores
    beams: np.ndarray  # int64 beam the continuation extends
    tokens: np.ndarray  # int64 token it appends


def normalized(score: float, length: int, length_penalty: float) -> float:
    return score / length**length_penalty


def top_candidates(log_probs: np.ndarray, beam_scores: np.ndarray, count: int) -> Candidates:
    """log_probs (B, K, V), beam_scores (B, K) -> the ``count`` best of the B x (K*V) continuations.

    Exact, ties included (lower beam, then lower token first), without sorting or partitioning
    whole rows, which was the search's largest cost per step:

    1. Tokens are dealt into G interleaved groups (token % G) and each group's maximum is taken,
       one vectorized pass over the log-probabilities.
    2. The count-th largest group maximum of a row is a lower bound of the row's count-th largest
       value (count distinct groups reach it), so every token of a row's top ``count`` is at or
       above it. Only the groups that reach the bound are read again, only their tokens at or above
       it are kept: a few more than ``count`` per row.
    3. Those candidates are sorted per sentence by (score, beam, token); the first ``count`` win.
       A sentence's best ``count`` are among its beams' best ``count``, so none is missed.
    """
    B, K, V = log_probs.shape
    rows, tokens, values = _at_or_above_bound(log_probs.reshape(B * K, V), min(count, V))
    return _best_per_sentence(rows, tokens, values, beam_scores, count, V)


def candidates_from_top(
    top_log_probs: np.ndarray, top_ids: np.ndarray, beam_scores: np.ndarray, count: int
) -> Candidates:
    """The ``count`` best continuations from each row's best C > count tokens: top_log_probs and
    top_ids (B, K, C). The same as ``top_candidates`` on the full log-probabilities, since a
    sentence's best ``count`` are among its beams' best ``count``.

    A row's tokens come best first, lower id first among equals (TopK's order), so a stable sort
    of each sentence's K*C scores, beam by beam, breaks ties by beam and then by token as
    ``top_candidates`` does, without sorting all B*K*C candidates together (2.7x faster for 20
    sentences). Only entries ``restrict_top`` set to -inf can be out of token order among
    themselves, and a -inf candidate never finishes a hypothesis.
    """
    B, K, C = top_ids.shape
    scores = (beam_scores[:, :, None] + top_log_probs).reshape(B, K * C)  # float32, as the reference adds
    pick = np.argsort(-scores, axis=1, kind="stable")[:, :count]  # (B, count)
    tokens = np.take_along_axis(top_ids.reshape(B, K * C), pick, axis=1)
    return Candidates(np.take_along_axis(scores, pick, axis=1), pick // C, tokens)


def _best_per_sentence(
    rows: np.ndarray, tokens: np.ndarray, values: np.ndarray, beam_scores: np.ndarray, count: int, vocab: int
) -> Candidates:
    """Candidate (row, token, log-prob) triples -> each sentence's ``count`` best by cumulative score
    (ties: lower beam, then lower token). Every sentence must have at least ``count`` of them."""
    B, K = beam_scores.shape
    scores = beam_scores.reshape(B * K)[rows] + values  # float32, as the reference adds
    sentences, beams = np.divmod(rows, K)
    order = np.lexsort((beams * vocab + tokens, -scores, sentences))
    starts = np.searchsorted(sentences[order], np.arange(B))
    pick = order[starts[:, None] + np.arange(count)]  # (B, count)
    return Candidates(scores[pick], beams[pick], tokens[pick])


def _at_or_above_bound(rows_lp: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rows_lp (N, V) -> (row, token, value) of all entries >= a lower bound of their row's n-th largest."""
    N, V = rows_lp.shape
    G = min(GROUPS, V)
    full = V - V % G
    grouped = rows_lp[:, :full].reshape(N, full // G, G)  # (N, V // G, G) view: group g holds tokens = g mod G
    group_max = grouped.max(axis=1)  # (N, G)
    if full < V:  # the last V % G tokens form one more group
        group_max = np.concatenate([group_max, rows_lp[:, full:].max(axis=1, keepdims=True)], axis=1)
    bound = np.partition(group_max, -n, axis=1)[:, -n] if group_max.shape[1] >= n else np.full(N, NEG_INF)
    hit_rows, hit_groups = np.nonzero(group_max >= bound[:, None])
    parts = []
    regular = hit_groups < G
    r, g = hit_rows[regular], hit_groups[regular]
    parts.append((r[:, None], np.arange(full // G)[None, :] * G + g[:, None], grouped[r, :, g]))
    if full < V:
        r = hit_rows[~regular]
        parts.append((r[:, None], np.arange(full, V)[None, :], rows_lp[r, full:]))
    rows, tokens, values = [], [], []
    for r, t, v in parts:
        keep = v >= bound[r]
        rows.append(np.broadcast_to(r, v.shape)[keep])
        tokens.append(np.broadcast_to(t, v.shape)[keep])
        values.append(v[keep])
    return np.concatenate(rows), np.concatenate(tokens), np.concatenate(values)


def ban_repeated_ngrams(log_probs: np.ndarray, history: np.ndarray, n: int) -> None:
    """Forbid, in place, tokens that would repeat an n-gram already in a row's history.

    log_probs (N, V); history (N, T) generated tokens.
    """
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


def restrict(
    log_probs: np.ndarray, *, step: int, last_step: np.ndarray, history: np.ndarray, options: SearchOptions, eos_id: int
) -> None:
    """Apply, in place on log_probs (B, K, V), the min-length, n-gram and forced-EOS rules.

    last_step (B,) bool marks sentences at their maximum length, where EOS is the only continuation
    (with its unrestricted log-probability, as in the reference).
    """
    B, K, V = log_probs.shape
    forced = last_step.any()
    eos_log_probs = log_probs[last_step, :, eos_id].copy() if forced else None
    if step < options.min_length:
        log_probs[:, :, eos_id] = NEG_INF
    if options.no_repeat_ngram_size:
        ban_repeated_ngrams(log_probs.reshape(B * K, V), history, options.no_repeat_ngram_size)
    if forced:
        log_probs[last_step] = NEG_INF
        log_probs[last_step, :, eos_id] = eos_log_probs


def restrict_top(
    top_log_probs: np.ndarray,
    top_ids: np.ndarray,
    log_probs: np.ndarray | None,
    *,
    step: int,
    last_step: np.ndarray,
    options: SearchOptions,
    eos_id: int,
) -> None:
    """``restrict`` for each row's best tokens, in place on top_log_probs and top_ids (B, K, C);
    log_probs (B, K, V) is only read, for the forced EOS's log-probability (None when no sentence is
    at its last step). No n-gram rule: it can ban any token, so the search uses full
    log-probabilities when it is on."""
    if step < options.min_length:
        top_log_probs[top_ids == eos_id] = NEG_INF
    if last_step.any():
        top_log_probs[last_step] = NEG_INF
        top_log_probs[last_step, :, 0] = log_probs[last_step, :, eos_id]
        top_ids[last_step, :, 0] = eos_id


class AttentionTrace:
    """Every step's cross-attention, kept by reference, and each row's parent row in the step before.

    Reading a hypothesis's attention walks the parents back, which follows beam reordering and
    dropped sentences without copying attention histories at every step.
    """

    def __init__(self) -> None:
        self.steps: list[np.ndarray] = []  # step t: (N_t, S)
        self.parents: list[np.ndarray] = []  # parents[t]: rows of step t continued by the rows of step t+1

    def path(self, row: int) -> np.ndarray:
        """The attention (T, S) that led to ``row`` of the latest step, that step included."""
        rows = []
        for t in range(len(self.steps) - 1, -1, -1):
            rows.append(self.steps[t][row])
            if t:
                row = int(self.parents[t - 1][row])
        return np.stack(rows[::-1])


class _SearchState:
    """What the search keeps between steps, for the B sentences still alive."""

    def __init__(self, max_lengths: np.ndarray, options: SearchOptions, bos_id: int) -> None:
        B, K = len(max_lengths), options.beam_size
        self.options = options
        self.alive = np.arange(B)  # original index of each live sentence
        self.max_lengths = max_lengths
        self.scores = np.full((B, K), NEG_INF, dtype=np.float32)
        self.scores[:, 0] = 0.0  # all beams start identical: only the first may expand at step 0
        self.history = np.empty((B * K, 0), dtype=np.int64)  # (N, T)
        self.tokens = np.full(B * K, bos_id, dtype=np.int64)
        self.finished: list[list[Hypothesis]] = [[] for _ in range(B)]
        self.n_finished = np.zeros(B, dtype=np.int64)  # per live sentence
        self.trace = AttentionTrace() if options.return_attention else None

    def finish(self, sentence: int, row: int, tokens: list[int], score: float) -> None:
        n = len(tokens) + 1
        attention = self.trace.path(row) if self.trace is not None else None
        self.n_finished[sentence] += 1
        self.finished[int(self.alive[sentence])].append(
            Hypothesis(tokens, score, normalized(score, n, self.options.length_penalty), attention)
        )

    def plan(self, step: int, use_top: bool) -> tuple[np.ndarray, bool]:
        """(B,) bool: the sentences at their last step, where EOS is forced; and whether the search
        reads all V log-probabilities at ``step``: always without the top path; with it, at step 0
        (which tells whether the decoder has enough candidates: not if V is that small) and at a
        sentence's last step (the forced EOS's log-probability)."""
        last_step = self.max_lengths - 1 == step
        return last_step, not use_top or step == 0 or bool(last_step.any())

    def record(self, step_out: Step) -> None:
        if self.trace is not None:
            self.trace.steps.append(step_out.attention)

    def advance(
        self,
        decoder: Decoder,
        *,
        keep: np.ndarray,
        rows: np.ndarray,
        tokens: np.ndarray,
        scores: np.ndarray,
        decoder_rows: np.ndarray | None = None,
    ) -> None:
        """Continue rows ``rows`` (N',) with ``tokens`` (N',) for the sentences ``keep`` (B,) bool.
        ``decoder_rows``: the decoder's rows for ``rows``, where its rows differ from the search's."""
        sentences = None if keep.all() else np.flatnonzero(keep)
        if sentences is not None:
            self.alive, self.max_lengths = self.alive[sentences], self.max_lengths[sentences]
            self.n_finished = self.n_finished[sentences]
        self.scores = scores
        self.history = np.concatenate([self.history[rows], tokens[:, None]], axis=1)
        self.tokens = tokens
        if self.trace is not None:
            self.trace.parents.append(rows)
        decoder.select(rows if decoder_rows is None else decoder_rows, sentences)


def search(
    decoder: Decoder, max_lengths: np.ndarray | list[int], options: SearchOptions, *, bos_id: int, eos_id: int
) -> list[list[Hypothesis]]:
    """Decode B sentences; max_lengths (B,) caps each one's generated tokens, EOS included.

    Returns the ``num_hypotheses`` best hypotheses of each sentence, best first.
    """
    state = _SearchState(np.asarray(max_lengths, dtype=np.int64), options, bos_id)
    run = _greedy_steps if options.beam_size == 1 else _beam_steps
    run(decoder, state, eos_id)
    return finalize(state.finished, options.num_hypotheses)


def finalize(finished: list[list[Hypothesis]], num_hypotheses: int) -> list[list[Hypothesis]]:
    """Best first by normalized score; equal scores keep the order in which they finished."""
    return [sorted(hyps, key=lambda h: h.normalized_score, reverse=True)[:num_hypotheses] for hyps in finished]


def is_finished(n_finished: np.ndarray, beam_size: int, last_step: np.ndarray) -> np.ndarray:
    """(B,) bool: K finished hypotheses, or EOS was forced this step."""
    return (n_finished >= beam_size) | last_step


def _greedy_steps(decoder: Decoder, state: _SearchState, eos_id: int) -> None:
    # Each row's best 2 tokens hold its best once EOS is ruled out; as in _beam_steps, the n-gram
    # rule needs all log-probabilities.
    use_top = not state.options.no_repeat_ngram_size
    for step in range(int(state.max_lengths.max(initial=0))):
        last_step, full = state.plan(step, use_top)
        out = decoder.step(state.tokens, 2 if use_top else 1, full=full)
        use_top = use_top and out.top_ids.shape[1] >= 2
        B = len(state.alive)
        state.record(out)
        rules = {"step": step, "last_step": last_step, "options": state.options, "eos_id": eos_id}
        if use_top:
            top_log_probs, top_ids = out.top_log_probs[:, None], out.top_ids[:, None]  # (B, 1, 2)
            restrict_top(top_log_probs, top_ids, None if out.log_probs is None else out.log_probs[:, None], **rules)
            log_probs, ids = top_log_probs[:, 0], top_ids[:, 0]  # (B, 2): ranked, lower id first among equals
            rank = log_probs.argmax(axis=1)  # the first maximum: the best rank
            best, best_log_probs = ids[np.arange(B), rank], log_probs[np.arange(B), rank]
        else:
            log_probs = out.log_probs  # (B, V)
            restrict(log_probs[:, None], history=state.history, **rules)
            best = log_probs.argmax(axis=1)  # (B,)
            best_log_probs = log_probs[np.arange(B), best]
        scores = state.scores[:, 0] + best_log_probs  # (B,) float32, as the reference sums
        ended = best == eos_id
        for b in np.flatnonzero(ended):
            state.finish(b, b, state.history[b].tolist(), float(scores[b]))
        keep = ~ended
        if not keep.any():
            return
        rows = np.flatnonzero(keep)
        state.advance(decoder, keep=keep, rows=rows, tokens=best[rows], scores=scores[rows, None])


def _beam_steps(decoder: Decoder, state: _SearchState, eos_id: int) -> None:
    K = state.options.beam_size
    # Each row's best 2K+1 tokens hold the sentence's best 2K even once EOS is ruled out; the
    # n-gram rule can rule out any token, so it needs the full log-probabilities.
    use_top = not state.options.no_repeat_ngram_size
    for step in range(int(state.max_lengths.max(initial=0))):
        last_step, full = state.plan(step, use_top)
        # At step 0 the K beams of a sentence are one and the same BOS row: the decoder computes it
        # once (as CTranslate2 does) and the search sees it K times.
        first = step == 0 and K > 1
        out = decoder.step(state.tokens[::K] if first else state.tokens, 2 * K + 1 if use_top else 1, full=full)
        out = out.repeat(K) if first else out
        use_top = use_top and out.top_ids.shape[1] > 2 * K
        B = len(state.alive)
        log_probs = out.log_probs.reshape(B, K, -1) if full else None  # (B, K, V)
        state.record(out)
        rules = {"step": step, "last_step": last_step, "options": state.options, "eos_id": eos_id}
        if use_top:
            top_log_probs, top_ids = out.top_log_probs.reshape(B, K, -1), out.top_ids.reshape(B, K, -1)
            restrict_top(top_log_probs, top_ids, log_probs, **rules)
            cand = candidates_from_top(top_log_probs, top_ids, state.scores, 2 * K)  # (B, 2K)
        else:
            restrict(log_probs, history=state.history, **rules)
            cand = top_candidates(log_probs, state.scores, 2 * K)  # (B, 2K)
        is_eos = cand.tokens == eos_id

        # 1) An EOS among the first K candidates finishes a hypothesis (Python work only per event).
        ends = is_eos[:, :K] & (cand.scores[:, :K] > NEG_INF)
        for b, rank in zip(*np.nonzero(ends), strict=True):
            row = b * K + int(cand.beams[b, rank])
            state.finish(b, row, state.history[row].tolist(), float(cand.scores[b, rank]))
        keep = ~is_finished(state.n_finished, K, last_step)
        if not keep.any():
            return

        # 2) The first K non-EOS candidates become the next beams (at most K of the 2K are EOS).
        picks = np.argsort(is_eos, axis=1, kind="stable")[keep, :K]  # (B', K) candidate ranks
        kept = np.flatnonzero(keep)[:, None]
        rows = (kept * K + cand.beams[kept, picks]).ravel()  # (N',) parent rows
        state.advance(
            decoder,
            keep=keep,
            rows=rows,
            tokens=cand.tokens[kept, picks].ravel(),
            scores=cand.scores[kept, picks],
            decoder_rows=rows // K if first else None,
        )
