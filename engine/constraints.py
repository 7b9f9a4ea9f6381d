"""Lexically constrained beam search: dynamic beam allocation (Post & Vilar, 2018).

Each sentence may come with constraints, sequences of target pieces (a glossary's target terms)
that its translation must contain. A hypothesis meets a constraint once it has generated all its
pieces in a row; the pieces it has met so far, whole constraints plus those of the one it is
spelling, are its *bank*. At each step:

1. The candidates of a sentence are its best continuations by score (those of the plain search),
   each beam's best token, and for each beam every token that advances a constraint it has not met:
   the next piece of the one it is spelling, or the first piece of any other whose source words it
   attends to most (its cross-attention's peak in the constraint's source span, when it has one)
   and has not gone past yet (no earlier peak beyond the span). Without that guide, the model would
   put a term it finds unlikely where it costs least, often after its own translation of the source
   words ("Ein Hund rennt im Park. Köter.").
2. The candidates are dealt out bank by bank, from the most pieces met down, each bank's best first,
   then each bank's second best, and so on: the beam keeps hypotheses at every stage of meeting the
   constraints, instead of letting the model's favourites (which meet none) crowd them out.

The ordered candidates then go through the plain search's rules (an EOS among the first K finishes a
hypothesis, the first K others become the beams). A hypothesis that stops spelling a constraint
loses its progress on it. One that ends with a constraint unmet finishes too, ranked after every
hypothesis that met them all (``Hypothesis.missing``), and does not count towards the K that
finish a sentence: when no hypothesis can meet the constraints, the translation is the model's
best one without them, not one stretched to its length cap.

Shape legend: B sentences still decoding, K beams, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from engine.candidates import Candidates
from engine.rules import NEG_INF


@dataclass(frozen=True)
class Progress:
    """A hypothesis's progress on its sentence's constraints."""

    met: int = 0  # bit c set: constraint c is met
    current: int = -1  # the constraint it is spelling; -1: none
    spelled: int = 0  # that constraint's pieces generated so far
    frontier: int = -1  # the furthest source position it attended to most, before this step


@dataclass(frozen=True)
class Guide:
    """How closely a hypothesis must attend to a constraint's source words to begin it."""

    slack: int = 0  # source positions either side of them that count
    in_order: bool = True  # not once its attention has gone past them
    anywhere: bool = False  # wherever it attends


# From the strictest guide to none: a sentence whose translation misses a constraint under one is
# decoded again under the next. Stricter guides place terms better; looser ones place more of them.
GUIDES = (Guide(), Guide(in_order=False), Guide(slack=1, in_order=False), Guide(anywhere=True))


class SentenceConstraints:
    """One sentence's constraints: the target pieces each must appear as."""

    def __init__(
        self,
        constraints: Sequence[Sequence[int]],
        sources: Sequence[tuple[int, int] | None] | None = None,
        guide: Guide | None = None,
    ) -> None:
        """``sources``: each constraint's source positions [start, end), which a hypothesis must
        attend to (as ``guide`` says) to begin it; None: anywhere."""
        self.guide = guide or Guide()
        self.tokens = [tuple(int(t) for t in c) for c in constraints]
        if any(not c for c in self.tokens):
            raise ValueError("a constraint needs at least one piece")
        self.sources = list(sources) if sources is not None else [None] * len(self.tokens)
        if len(self.sources) != len(self.tokens):
            raise ValueError(f"{len(self.sources)} source spans for {len(self.tokens)} constraints")
        self.starts: dict[int, list[int]] = {}  # first piece -> the constraints that begin with it
        for c, pieces in enumerate(self.tokens):
            self.starts.setdefault(pieces[0], []).append(c)

    def __len__(self) -> int:
        return len(self.tokens)

    def met_by(self, tokens: Sequence[int]) -> bool:
        """Whether ``tokens`` meet every constraint, as the search would judge them."""
        return None not in self.places(tokens)

    def places(self, tokens: Sequence[int]) -> list[tuple[int, int] | None]:
        """Where ``tokens`` meet each constraint, as the search would judge them: the positions
        [start, end) of the pieces that met it; None for one they do not meet."""
        places: list[tuple[int, int] | None] = [None] * len(self.tokens)
        progress = Progress()
        for i, token in enumerate(tokens):
            after = self.advance(progress, token)
            if after.met != progress.met:  # a token meets one constraint at most: its last piece
                c = (after.met ^ progress.met).bit_length() - 1
                places[c] = (i + 1 - len(self.tokens[c]), i + 1)
            progress = after
        return places

    def missing(self, progress: Progress) -> int:
        """Constraints not met."""
        return len(self.tokens) - progress.met.bit_count()

    def bank(self, progress: Progress) -> int:
        """Pieces met: of the constraints met and of the one being spelled."""
        met = sum(len(p) for c, p in enumerate(self.tokens) if progress.met >> c & 1)
        return met + progress.spelled

    def wanted(self, progress: Progress, peak: int | None) -> list[int]:
        """The pieces that advance a constraint from ``progress``, attending most to source
        position ``peak`` (None: not known)."""
        if progress.current >= 0:
            return [self.tokens[progress.current][progress.spelled]]
        unmet = [c for c in range(len(self.tokens)) if not progress.met >> c & 1]
        return [self.tokens[c][0] for c in unmet if self._attended(c, peak, progress.frontier)]

    def _attended(self, c: int, peak: int | None, frontier: int) -> bool:
        """Whether a hypothesis attending most to ``peak``, having attended at most as far as
        ``frontier`` before, is at constraint c's source words."""
        span, guide = self.sources[c], self.guide
        if span is None or peak is None or guide.anywhere:
            return True
        start, end = span[0] - guide.slack, span[1] + guide.slack
        return start <= peak < end and (not guide.in_order or frontier < end)

    def advance(self, progress: Progress, token: int) -> Progress:
        """The progress after generating ``token``."""
        if progress.current >= 0:
            pieces = self.tokens[progress.current]
            if pieces[progress.spelled] == token:
                if progress.spelled + 1 == len(pieces):
                    return replace(progress, met=progress.met | 1 << progress.current, current=-1, spelled=0)
                return replace(progress, spelled=progress.spelled + 1)
            progress = replace(progress, current=-1, spelled=0)  # it strayed: the constraint starts over
        for c in self.starts.get(token, ()):
            if not progress.met >> c & 1:
                if len(self.tokens[c]) == 1:
                    return replace(progress, met=progress.met | 1 << c)
                return replace(progress, current=c, spelled=1)
        return progress


class ConstraintTracker:
    """The progress of every beam of every live sentence, and the candidate order of each step."""

    def __init__(self, sentences: Sequence[SentenceConstraints], beam_size: int, eos_id: int) -> None:
        self.sentences = list(sentences)
        self.K, self.eos_id = beam_size, eos_id
        self.alive = np.arange(len(sentences))
        self.progress: list[Progress] = [Progress()] * (len(sentences) * beam_size)  # row b*K + k
        self._chosen: list[list[Progress]] = []  # per live sentence: the progress of each candidate

    def candidates(
        self,
        log_probs: np.ndarray,
        beam_scores: np.ndarray,
        plain: Candidates,
        best: np.ndarray,
        attention: np.ndarray | None,
    ) -> Candidates:
        """log_probs (B, K, V) after the rules, beam_scores (B, K), the plain search's candidates
        (B, count), each row's best token (B, K), attention (B, K, S) or None -> (B, count)
        candidates in the order of dynamic beam allocation; -inf scores where a sentence has fewer."""
        B, count = plain.scores.shape
        peaks = attention.argmax(axis=2) if attention is not None else None  # (B, K)
        scores = np.full((B, count), NEG_INF, dtype=np.float32)
        beams = np.zeros((B, count), dtype=np.int64)
        tokens = np.zeros((B, count), dtype=np.int64)
        self._chosen = []
        for b in range(B):
            ranked = self._allocate(b, log_probs[b], beam_scores[b], plain, best[b], peaks)[:count]
            for rank, (score, k, token, _) in enumerate(ranked):
                scores[b, rank], beams[b, rank], tokens[b, rank] = score, k, token
            self._chosen.append([p for *_, p in ranked] + [Progress()] * (count - len(ranked)))
        return Candidates(scores, beams, tokens)

    def _allocate(
        self,
        b: int,
        log_probs: np.ndarray,
        beam_scores: np.ndarray,
        plain: Candidates,
        best: np.ndarray,
        peaks: np.ndarray | None,
    ) -> list[tuple[np.float32, int, int, Progress]]:
        """Sentence b's candidates (score, beam, token, progress), dealt out bank by bank."""
        sentence = self.sentences[int(self.alive[b])]
        pool: dict[tuple[int, int], np.float32] = {}
        for score, k, token in zip(plain.scores[b], plain.beams[b], plain.tokens[b], strict=True):
            pool[int(k), int(token)] = score
        for k in range(self.K):
            if beam_scores[k] == NEG_INF:
                continue
            peak = None if peaks is None else int(peaks[b, k])
            for token in (*sentence.wanted(self.progress[b * self.K + k], peak), int(best[k])):
                pool.setdefault((k, token), beam_scores[k] + log_probs[k, token])  # float32, as the search adds
        entries = []
        for (k, token), score in pool.items():
            if score == NEG_INF:
                continue
            progress = self.progress[b * self.K + k]
            if token != self.eos_id:
                progress = sentence.advance(progress, token)
            if peaks is not None:
                progress = replace(progress, frontier=max(progress.frontier, int(peaks[b, k])))
            entries.append((score, k, token, progress, sentence.bank(progress)))
        entries.sort(key=lambda e: (-e[0], e[1], e[2]))
        # Round-robin over the banks: each candidate's rank within its bank, then the fuller bank first.
        seen: dict[int, int] = {}
        order = []
        for i, (*_, bank) in enumerate(entries):
            order.append((seen.get(bank, 0), -bank, i))
            seen[bank] = seen.get(bank, 0) + 1
        return [entries[i][:4] for *_, i in sorted(order)]

    def missing(self, b: int, rank: int) -> int:
        """Constraints unmet by candidate ``rank`` of live sentence b, of the last ``candidates``."""
        return self.sentences[int(self.alive[b])].missing(self._chosen[b][rank])

    def advance(self, kept: np.ndarray, picks: np.ndarray) -> None:
        """The sentences ``kept`` (B',) go on with their candidates ``picks`` (B', K) as beams."""
        self.progress = [self._chosen[b][rank] for b, ranks in zip(kept, picks, strict=True) for rank in ranks]
        self.alive = self.alive[kept]
