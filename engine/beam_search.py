"""Batched beam search in numpy over any step-wise ``Decoder``; beam size 1 is greedy decoding.

It decides as the PyTorch reference, ``model/decoding.py``, does, so that both give the same
translations from the same log-probabilities:

- Scores are float32 sums of log-probabilities. A finished hypothesis of n generated tokens (EOS
  included) is ranked by ``score / n ** length_penalty``.
- Each step takes the 2K best (beam, token) continuations of a sentence (``engine.candidates``);
  an EOS among the first K finishes that hypothesis, the first K non-EOS continuations become the
  next beams. Greedy decoding takes each row's best token instead, without ranking candidates.
- A sentence is finished once it has K finished hypotheses, or after its last allowed step
  (``max_length - 1``), where EOS is forced or, with ``forced_eos="off"``, each of the first K
  continuations ends its hypothesis as it is, EOS or not. EOS is forbidden before ``min_length``
  generated tokens (``engine.rules``; ``no_repeat_ngram_size`` is an addition of the engine, off at 0).

With ``forced_eos`` "zero_score" or "off" and ``prefixes`` as the forced_bos_token_id, it also
decides as transformers' ``generate(num_beams=K, early_stopping=True)`` does (num_beams=1 being
its greedy search); the test suite compares them.

With ``constraints``, sentences must generate given piece sequences (glossary terms): their
candidates are chosen by dynamic beam allocation (``engine.constraints``), and a hypothesis that
misses one ranks after all that do not.

The search reads each row's best 2K+1 tokens (greedy: 2), which the decoder's graph ranks, rather
than all V log-probabilities, unless a rule needs them all. Finished sentences leave the batch at
once, so later steps only compute what is still alive.

Shape legend: B sentences still decoding, K beams, N = B*K decoder rows, V vocabulary, S source
length, T tokens generated so far.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import get_args

import numpy as np

from engine.attention_trace import AttentionTrace
from engine.candidates import candidates_from_top, top_candidates
from engine.constraints import ConstraintTracker, SentenceConstraints
from engine.decoder import Selection, Step, StepRequest, Steps, driven
from engine.rules import (
    NEG_INF,
    ForcedEos,
    ForcedEosMode,
    ForcedPrefix,
    MinLength,
    NoRepeatLoop,
    NoRepeatNgram,
    Rule,
    StepContext,
    apply_full,
    apply_top,
    top_spare,
)

PAD = -1  # a history position before a sentence that joined late began: no token's id


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 4
    num_hypotheses: int = 1
    length_penalty: float = 1.0
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    max_consecutive_repeats: int = 0  # a span of generated tokens at most this many times in a row; 0: any
    return_alignments: bool = False

    def __post_init__(self) -> None:
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {self.beam_size}")
        if not 1 <= self.num_hypotheses <= self.beam_size:
            raise ValueError(f"num_hypotheses must be in 1..beam_size={self.beam_size}, got {self.num_hypotheses}")
        if not np.isfinite(self.length_penalty) or self.length_penalty < 0:
            raise ValueError(f"length_penalty must be a finite number >= 0, got {self.length_penalty}")
        if min(self.min_length, self.no_repeat_ngram_size, self.max_consecutive_repeats) < 0:
            raise ValueError("min_length, no_repeat_ngram_size and max_consecutive_repeats must be >= 0")


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, EOS excluded
    score: float  # sum of log-probabilities, EOS's included
    normalized_score: float  # score / length ** length_penalty
    attention: np.ndarray | None = None  # (length, S): cross-attention when each token (EOS included) was chosen
    # False when the hypothesis reached its length cap without EOS (forced_eos="off")
    eos: bool = True
    missing: int = 0  # constraints it does not meet: a fallback, ranked after those that meet them all

    @property
    def length(self) -> int:
        """Generated tokens, EOS included: what the length penalty counts."""
        return len(self.tokens) + self.eos


def normalized(score: float, length: int, length_penalty: float) -> float:
    return score / length**length_penalty


def default_rules(
    options: SearchOptions,
    extra: Sequence[Rule] = (),
    *,
    prefixes: Sequence[Sequence[int]] | None = None,
    forced_eos: ForcedEosMode = "model_score",
) -> list[Rule]:
    """The rules ``options`` ask for, then ``extra``, then the forced prefixes, which override those,
    then the forced EOS, which overrides them all (as transformers orders its logits processors)."""
    rules: list[Rule] = []
    if options.min_length:
        rules.append(MinLength(options.min_length))
    if options.no_repeat_ngram_size:
        rules.append(NoRepeatNgram(options.no_repeat_ngram_size))
    if options.max_consecutive_repeats:
        rules.append(NoRepeatLoop(options.max_consecutive_repeats))
    rules.extend(extra)
    if prefixes is not None and any(prefixes):
        rules.append(ForcedPrefix(tuple(tuple(int(t) for t in p) for p in prefixes)))
    if forced_eos != "off":
        rules.append(ForcedEos(zero_score=forced_eos == "zero_score"))
    return rules


class _SearchState:
    """What the search keeps between steps, for the B sentences still alive. Each sentence has its
    own count of generated tokens (``steps``): sentences may join between two steps
    (``JoinableSearch``), so a row's history is right-aligned, padded on the left with ``PAD``."""

    def __init__(
        self,
        max_lengths: np.ndarray,
        options: SearchOptions,
        rules: Sequence[Rule],
        forced_eos: ForcedEosMode,
        *,
        bos_id: int,
        eos_id: int,
        constraints: ConstraintTracker | None = None,
    ) -> None:
        B, K = len(max_lengths), options.beam_size
        self.options, self.rules, self.bos_id, self.eos_id = options, rules, bos_id, eos_id
        self.forced_eos = forced_eos
        self.alive = np.arange(B)  # original index of each live sentence
        self.max_lengths = max_lengths
        self.steps = np.zeros(B, dtype=np.int64)  # tokens each live sentence has generated
        self.scores = np.full((B, K), NEG_INF, dtype=np.float32)
        self.scores[:, 0] = 0.0  # all beams start identical: only the first may expand at step 0
        self.history = np.empty((B * K, 0), dtype=np.int64)  # (N, T)
        self.tokens = np.full(B * K, bos_id, dtype=np.int64)
        self.finished: list[list[Hypothesis]] = [[] for _ in range(B)]
        self.n_finished = np.zeros(B, dtype=np.int64)  # per live sentence
        self.trace = AttentionTrace() if options.return_alignments else None
        self.constraints = constraints
        self.selection: Selection | None = None  # the decoder's rows for the next step, once chosen
        # Set by the search's steps: each row's best tokens it reads, and whether those suffice.
        self.width = 1
        self.use_top = False
        self.started = False  # its first step is done
        # Asked at the last request: all V log-probabilities; sentences at their first step, whose K
        # beams are one decoder row (CTranslate2 computes it once too).
        self.full = True
        self.fresh = np.zeros(B, dtype=bool)
        self.last_step = np.zeros(B, dtype=bool)  # (B,) the sentences at their last step
        # Called as each sentence finishes, with its original index and best hypotheses.
        self.on_done: Callable[[int, list[Hypothesis]], None] | None = None

    def request(self) -> StepRequest:
        """The next step's request, with the selection made since the last one."""
        K = self.options.beam_size
        self.last_step = last_step = self.max_lengths - 1 == self.steps
        reads_eos = self.forced_eos == "model_score" and bool(last_step.any())
        # All V log-probabilities: without the top path; at the first step, which tells whether
        # the decoder has enough candidates (not if V is that small); at a sentence's last step
        # if EOS is forced at the decoder's log-probability for it; and at every step under
        # constraints, whose pieces need not be among a row's best.
        self.full = not self.use_top or not self.started or reads_eos or self.constraints is not None
        self.fresh = self.steps == 0 if K > 1 else np.zeros(len(self.steps), dtype=bool)
        rows = self.computed_rows()
        tokens = self.tokens if rows is None else self.tokens[rows]
        row_sentences = None
        if self.fresh.any() and not self.fresh.all():  # sentences of 1 row and of K: say whose each is
            row_sentences = np.repeat(np.arange(len(self.steps)), self.rows_per_sentence())
        selection, self.selection = self.selection, None
        return StepRequest(tokens, self.width, self.full, selection, row_sentences)

    def computed_rows(self) -> np.ndarray | None:
        """(N_decoder,) the search's rows that the decoder computes: a fresh sentence's first only;
        None when it computes them all."""
        if not self.fresh.any():
            return None
        K = self.options.beam_size
        first = np.zeros((len(self.steps), K), dtype=bool)
        first[:, 0] = True
        return np.flatnonzero((first | ~self.fresh[:, None]).ravel())

    def expand(self, out: Step) -> Step:
        """The decoder's outputs as the search's rows: a fresh sentence's one row as its K beams."""
        if not self.fresh.any():
            return out
        counts = self.rows_per_sentence()
        return out.repeat(np.repeat(self.options.beam_size // counts, counts))  # K for a fresh row, else 1

    def parents(self, rows: np.ndarray) -> np.ndarray | None:
        """The decoder rows that the search's rows ``rows`` continue; None where they are the same."""
        if not self.fresh.any():
            return None
        K = self.options.beam_size
        counts = self.rows_per_sentence()
        starts = np.cumsum(counts) - counts  # each sentence's first decoder row
        sentence, beam = np.divmod(rows, K)
        return starts[sentence] + np.where(self.fresh[sentence], 0, beam)

    def finish(self, sentence: int, row: int, token: int, score: float, missing: int = 0) -> None:
        """Row ``row`` of live sentence ``sentence`` ends with ``token``: EOS, or at the length cap any."""
        eos = token == self.eos_id
        generated = self.history[row, self.history.shape[1] - self.steps[sentence] :].tolist()
        tokens = generated if eos else [*generated, token]
        attention = self.trace.path(row) if self.trace is not None else None
        self.n_finished[sentence] += not missing  # one with a constraint unmet is a fallback
        n = len(tokens) + eos
        self.finished[int(self.alive[sentence])].append(
            Hypothesis(tokens, score, normalized(score, n, self.options.length_penalty), attention, eos, missing)
        )

    def context(self, last_step: np.ndarray, log_probs: np.ndarray | None) -> StepContext:
        # Rules that read the step itself (MinLength, ForcedPrefix) keep a search from taking
        # joiners (JoinableSearch), so that all live sentences are at this step.
        step = int(self.steps.max(initial=0))
        return StepContext.build(step, last_step, self.history, self.eos_id, log_probs, self.alive)

    def record(self, step_out: Step) -> None:
        if self.trace is not None:
            self.trace.steps.append(step_out.attention)

    def done(self, leaving: np.ndarray) -> None:
        """The live sentences ``leaving`` (B,) bool are finished: each told to ``on_done``."""
        if self.on_done is not None:
            for b in np.flatnonzero(leaving):
                index = int(self.alive[b])
                self.on_done(index, finalize([self.finished[index]], self.options.num_hypotheses)[0])

    def advance(
        self,
        *,
        keep: np.ndarray,
        rows: np.ndarray,
        tokens: np.ndarray,
        scores: np.ndarray,
    ) -> None:
        """Continue rows ``rows`` (N',) with ``tokens`` (N',) for the sentences ``keep`` (B,) bool."""
        parents = self.parents(rows)
        sentences = None if keep.all() else np.flatnonzero(keep)
        if sentences is not None:
            self.alive, self.max_lengths = self.alive[sentences], self.max_lengths[sentences]
            self.n_finished, self.steps = self.n_finished[sentences], self.steps[sentences]
        self.steps = self.steps + 1
        self.scores = scores
        # Only the longest live history is kept: a sentence that joined late is padded, not the rest.
        history = self.history[rows, self.history.shape[1] - int(self.steps.max()) + 1 :]
        self.history = np.concatenate([history, tokens[:, None]], axis=1)
        self.tokens = tokens
        self.started = True
        if self.trace is not None:
            self.trace.parents.append(rows)
        self.selection = Selection(rows if parents is None else parents, sentences)

    def rows_per_sentence(self) -> np.ndarray:
        """(B,) the decoder rows each live sentence has: 1 at its first step (beams > 1), else K."""
        return np.where(self.fresh, 1, self.options.beam_size)

    def drop(self, keep: np.ndarray) -> Selection | None:
        """Keep only the live sentences ``keep`` (B,) bool, between steps: the decoder's selection
        that takes the others' rows out; None if all are kept."""
        if keep.all():
            return None
        rows = np.flatnonzero(np.repeat(keep, self.rows_per_sentence()))  # the decoder rows kept
        search_rows = np.flatnonzero(np.repeat(keep, self.options.beam_size))
        sentences = np.flatnonzero(keep)
        self.alive, self.max_lengths = self.alive[sentences], self.max_lengths[sentences]
        self.steps, self.n_finished = self.steps[sentences], self.n_finished[sentences]
        self.scores, self.fresh = self.scores[sentences], self.fresh[sentences]
        self.history, self.tokens = self.history[search_rows], self.tokens[search_rows]
        return Selection(rows, sentences)

    def add(self, max_lengths: np.ndarray) -> list[int]:
        """Sentences that join before the next step, each capped at ``max_lengths`` generated
        tokens; their original indices."""
        B, K, T = len(max_lengths), self.options.beam_size, self.history.shape[1]
        first = len(self.finished)
        self.finished += [[] for _ in range(B)]
        self.alive = np.concatenate([self.alive, np.arange(first, first + B)])
        self.max_lengths = np.concatenate([self.max_lengths, max_lengths])
        self.steps = np.concatenate([self.steps, np.zeros(B, dtype=np.int64)])
        self.n_finished = np.concatenate([self.n_finished, np.zeros(B, dtype=np.int64)])
        scores = np.full((B, K), NEG_INF, dtype=np.float32)
        scores[:, 0] = 0.0
        self.scores = np.concatenate([self.scores, scores])
        self.history = np.concatenate([self.history, np.full((B * K, T), PAD, dtype=np.int64)])
        self.tokens = np.concatenate([self.tokens, np.full(B * K, self.bos_id, dtype=np.int64)])
        return list(range(first, first + B))


def search_steps(
    max_lengths: np.ndarray | list[int],
    options: SearchOptions,
    *,
    bos_id: int,
    eos_id: int,
    extra_rules: Sequence[Rule] = (),
    prefixes: Sequence[Sequence[int]] | None = None,
    forced_eos: ForcedEosMode = "model_score",
    constraints: Sequence[SentenceConstraints] | None = None,
) -> Steps[list[list[Hypothesis]]]:
    """Decode B sentences; max_lengths (B,) caps each one's generated tokens, EOS included.
    ``extra_rules`` apply after those of ``options``, before the forced prefixes and EOS
    (``default_rules``).

    ``prefixes`` (B,), each possibly empty: sentence b's first generated tokens, forced at
    log-probability 0. They count as generated tokens (length penalty, max_lengths) and begin its
    hypotheses' tokens, unless the forced EOS comes first (max_lengths[b] <= len(prefixes[b])).
    ``forced_eos``: what a sentence's last allowed step does (``engine.rules.ForcedEosMode``).
    ``constraints`` (B,), each possibly empty: the piece sequences sentence b's translation must
    contain (``engine.constraints``); they need a beam of at least 2, and the decoder's attention
    where they have source spans.

    Returns the ``num_hypotheses`` best hypotheses of each sentence, best first.

    The search as the steps it asks of a decoder (``engine.decoder.Steps``), so that a pool can run
    many at once; ``search`` runs it on one decoder. Raises when first advanced.
    """
    if forced_eos not in get_args(ForcedEosMode):
        raise ValueError(f"forced_eos must be one of {get_args(ForcedEosMode)}, got {forced_eos!r}")
    max_lengths = np.asarray(max_lengths, dtype=np.int64)
    if prefixes is not None and len(prefixes) != len(max_lengths):
        raise ValueError(f"{len(prefixes)} prefixes for {len(max_lengths)} sentences")
    tracker = None
    if constraints is not None and any(len(c) for c in constraints):
        if len(constraints) != len(max_lengths):
            raise ValueError(f"{len(constraints)} constraint lists for {len(max_lengths)} sentences")
        if options.beam_size < 2:
            raise ValueError("constrained search needs a beam of at least 2")
        tracker = ConstraintTracker(constraints, options.beam_size, eos_id)
    rules = default_rules(options, extra_rules, prefixes=prefixes, forced_eos=forced_eos)
    state = _SearchState(max_lengths, options, rules, forced_eos, bos_id=bos_id, eos_id=eos_id, constraints=tracker)
    run = _greedy_steps if options.beam_size == 1 else _beam_steps
    yield from run(state)
    return finalize(state.finished, options.num_hypotheses)


search = driven(search_steps)


def joinable(options: SearchOptions, *, prefixes: bool = False) -> bool:
    """Whether a search with ``options`` can take sentences between steps (``JoinableSearch``):
    not with rules that read the step itself (a minimum length, forced prefixes) or all of a row's
    history (the n-gram ban), nor with attention kept for alignments."""
    return not (options.min_length or options.no_repeat_ngram_size or options.return_alignments or prefixes)


class JoinableSearch:
    """A beam search (greedy at beam 1) that sentences join between steps and leave as each
    finishes, decided as ``search_steps`` decides each sentence alone: the search a row pool runs
    for every call with the same options (``engine.pool_scheduler``). ``on_done`` is called with a
    sentence's index (from ``add``) and its best hypotheses as it finishes. ``steps`` ends once no
    sentence is left; sentences added after that are never decoded."""

    def __init__(
        self,
        options: SearchOptions,
        on_done: Callable[[int, list[Hypothesis]], None],
        *,
        bos_id: int,
        eos_id: int,
        forced_eos: ForcedEosMode,
    ) -> None:
        if not joinable(options):
            raise ValueError("a search that sentences join needs no minimum length, n-gram ban or alignments")
        rules = default_rules(options, forced_eos=forced_eos)
        self.state = _SearchState(np.empty(0, dtype=np.int64), options, rules, forced_eos, bos_id=bos_id, eos_id=eos_id)
        self.state.on_done = on_done
        self.steps: Steps[None] = (_greedy_steps if options.beam_size == 1 else _beam_steps)(self.state)

    def add(self, max_lengths: Sequence[int]) -> list[int]:
        """Sentences that join before the next step (``request`` then asks for them too): their
        indices. Each starts with one decoder row, its first step's."""
        return self.state.add(np.asarray(max_lengths, dtype=np.int64))

    def request(self) -> StepRequest:
        """The next step's request, asked again after sentences joined or left."""
        return self.state.request()

    def sentences(self) -> np.ndarray:
        """(B,) the live sentences' indices, in the order of their rows."""
        return self.state.alive

    @property
    def options(self) -> SearchOptions:
        return self.state.options

    def rows_per_sentence(self) -> np.ndarray:
        """(B,) the decoder rows each live sentence has now."""
        return self.state.rows_per_sentence()

    def drop(self, indices: Sequence[int]) -> Selection | None:
        """Stop decoding the sentences ``indices`` (cancelled): the decoder's selection that takes
        their rows out, None if none of them is live."""
        return self.state.drop(~np.isin(self.state.alive, np.asarray(indices, dtype=np.int64)))


def finalize(finished: list[list[Hypothesis]], num_hypotheses: int) -> list[list[Hypothesis]]:
    """Best first by constraints met, then by normalized score; equal scores keep the order in
    which they finished."""
    return [
        sorted(hyps, key=lambda h: (-h.missing, h.normalized_score), reverse=True)[:num_hypotheses] for hyps in finished
    ]


def is_finished(n_finished: np.ndarray, beam_size: int, last_step: np.ndarray) -> np.ndarray:
    """(B,) bool: K finished hypotheses, or the sentence's last step."""
    return (n_finished >= beam_size) | last_step


def _greedy_steps(state: _SearchState) -> Steps[None]:
    # Each row's best 1 + spare tokens hold its best once the rules have banned what they may.
    spare = top_spare(state.rules)
    state.use_top = spare is not None
    state.width = 1 + spare if spare is not None else 1
    while len(state.alive):
        out = yield state.request()
        state.use_top = state.use_top and out.top_ids.shape[1] >= state.width
        B = len(state.alive)
        last_step = state.last_step
        state.record(out)
        all_log_probs = None if out.log_probs is None else out.log_probs[:, None]  # (B, 1, V)
        ctx = state.context(last_step, all_log_probs)
        if state.use_top:
            top_log_probs, top_ids = out.top_log_probs[:, None], out.top_ids[:, None]  # (B, 1, 2)
            apply_top(state.rules, top_log_probs, top_ids, ctx)
            log_probs, ids = top_log_probs[:, 0], top_ids[:, 0]  # (B, 2): ranked, lower id first among equals
            rank = log_probs.argmax(axis=1)  # the first maximum: the best rank
            best, best_log_probs = ids[np.arange(B), rank], log_probs[np.arange(B), rank]
        else:
            log_probs = out.log_probs  # (B, V)
            apply_full(state.rules, log_probs[:, None], ctx)
            best = log_probs.argmax(axis=1)  # (B,)
            best_log_probs = log_probs[np.arange(B), best]
        scores = state.scores[:, 0] + best_log_probs  # (B,) float32, as the reference sums
        # With the forced EOS, the last step's best is EOS; without it, the best ends the hypothesis anyway.
        ended = (best == state.eos_id) | last_step
        for b in np.flatnonzero(ended):
            state.finish(b, b, int(best[b]), float(scores[b]))
        state.done(ended)
        keep = ~ended
        if not keep.any():
            return
        rows = np.flatnonzero(keep)
        state.advance(keep=keep, rows=rows, tokens=best[rows], scores=scores[rows, None])


def _beam_steps(state: _SearchState) -> Steps[None]:
    K = state.options.beam_size
    # Each row's best 2K + spare tokens hold the sentence's best 2K once the rules have banned what they may.
    spare = top_spare(state.rules)
    state.use_top = spare is not None
    state.width = 2 * K + spare if spare is not None else 1
    while len(state.alive):
        # A sentence at its first step has its K beams as one decoder row, which the search sees K times.
        out = state.expand((yield state.request()))
        state.use_top = use_top = state.use_top and out.top_ids.shape[1] >= state.width
        B = len(state.alive)
        last_step = state.last_step
        log_probs = out.log_probs.reshape(B, K, -1) if state.full else None  # (B, K, V)
        state.record(out)
        ctx = state.context(last_step, log_probs)
        if use_top:
            top_log_probs, top_ids = out.top_log_probs.reshape(B, K, -1), out.top_ids.reshape(B, K, -1)
            apply_top(state.rules, top_log_probs, top_ids, ctx)
            cand = candidates_from_top(top_log_probs, top_ids, state.scores, 2 * K)  # (B, 2K)
        else:
            apply_full(state.rules, log_probs, ctx)
            cand = top_candidates(log_probs, state.scores, 2 * K)  # (B, 2K)
        if state.constraints is not None:  # the plain candidates, dealt out with those of the constraints
            if use_top:  # the constraints' pieces need not be among a row's best
                apply_full(state.rules, log_probs, ctx)
                rank = top_log_probs.argmax(axis=2)[..., None]  # the first maximum: the best rank
                best = np.take_along_axis(top_ids, rank, axis=2)[..., 0]  # (B, K)
            else:
                best = log_probs.argmax(axis=2)  # (B, K)
            attention = None if out.attention is None else out.attention.reshape(B, K, -1)
            cand = state.constraints.candidates(log_probs, state.scores, cand, best, attention)  # (B, 2K)
        is_eos = cand.tokens == state.eos_id

        # 1) An EOS among the first K candidates finishes a hypothesis (Python work only per event), and
        # so does any of them at the last step: the forced EOS, or whatever the token is without it.
        ends = (is_eos[:, :K] | last_step[:, None]) & (cand.scores[:, :K] > NEG_INF)
        for b, rank in zip(*np.nonzero(ends), strict=True):
            row = b * K + int(cand.beams[b, rank])
            missing = state.constraints.missing(b, rank) if state.constraints is not None else 0
            state.finish(b, row, int(cand.tokens[b, rank]), float(cand.scores[b, rank]), missing)
        keep = ~is_finished(state.n_finished, K, last_step)
        state.done(~keep)
        if not keep.any():
            return

        # 2) The first K non-EOS candidates become the next beams (at most K of the 2K are EOS).
        picks = np.argsort(is_eos, axis=1, kind="stable")[keep, :K]  # (B', K) candidate ranks
        kept = np.flatnonzero(keep)[:, None]
        rows = (kept * K + cand.beams[kept, picks]).ravel()  # (N',) parent rows
        if state.constraints is not None:
            state.constraints.advance(kept[:, 0], picks)
        state.advance(
            keep=keep,
            rows=rows,
            tokens=cand.tokens[kept, picks].ravel(),
            scores=cand.scores[kept, picks],
        )
