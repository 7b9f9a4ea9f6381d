"""The engine's public types: what a caller passes in, what comes back, and the ``Engine`` protocol.

``engine.translator.Translator`` (in this process) and ``service.engine_process.EngineProcess``
(in child processes) both implement ``Engine``; the batcher, cache and routes depend on this module only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from engine.alignment import Alignment
from engine.beam_search import SearchOptions
from engine.bundle import DecodingDefaults, Languages
from engine.glossary import Glossary, Term
from engine.languages import resolve_pair
from engine.scheduler import Cancellation

TextFormat = Literal["text", "html", "xml"]


@dataclass(frozen=True)  # hashable: the batcher merges only equal options
class TranslationOptions:
    """What and how to translate. ``None`` means the model's default: its manifest's ``decoding``,
    and for the languages, the model's only one on that side."""

    source_language: str | None = None
    target_language: str | None = None
    beam_size: int | None = None  # 1 = greedy; None: the model's, widened to num_hypotheses
    num_hypotheses: int = 1
    length_penalty: float | None = None  # alpha in score / length ** alpha
    max_length: int | None = None  # cap on generated tokens (EOS included); None: the model's length rule
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    max_consecutive_repeats: int | None = None  # a span of generated pieces at most this many times in a row; 0: any
    return_alignments: bool = False
    # "html", "xml": each text is markup, translated with its tags in place (engine.markup)
    format: TextFormat = "text"
    # terms the translation must use wherever the text says their source (engine.glossary); a
    # sentence with one is decoded with a beam of at least engine.cost.GLOSSARY_MIN_BEAM
    glossary: Glossary | None = None
    # score only the target pieces the batch's sources make likely (engine.shortlist), where the
    # model has a shortlist; None: the model's default (on where it keeps BLEU within 0.2)
    shortlist: bool | None = None

    def __post_init__(self) -> None:
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be at least 1, got {self.max_length}")
        # The search's own checks, on what is known before the model's defaults fill the rest in.
        beam_size = max(1, self.num_hypotheses) if self.beam_size is None else self.beam_size
        length_penalty = 0.0 if self.length_penalty is None else self.length_penalty
        self._search_options(beam_size, length_penalty, self.max_consecutive_repeats or 0)

    def beam(self, default: int) -> int:
        """The beam these options get from a model whose default beam is ``default``: as many beams
        as hypotheses asked for at least."""
        return max(default, self.num_hypotheses) if self.beam_size is None else self.beam_size

    def resolved(self, info: ModelInfo) -> TranslationOptions:
        """These options with the model's defaults in place of ``None`` and languages by their
        codes; ValueError if invalid (``engine.languages.UnsupportedLanguage`` for a language)."""
        defaults = info.decoding
        source, target = resolve_pair(info.languages, self.source_language, self.target_language)
        return replace(
            self,
            source_language=source.code,
            target_language=target.code,
            beam_size=self.beam(defaults.beam_size),
            length_penalty=defaults.length_penalty if self.length_penalty is None else self.length_penalty,
            max_consecutive_repeats=(
                self.max_consecutive_repeats
                if self.max_consecutive_repeats is not None
                else defaults.max_consecutive_repeats
            ),
        )

    def search_options(self) -> SearchOptions:
        if self.beam_size is None or self.length_penalty is None or self.max_consecutive_repeats is None:
            raise ValueError("options must be resolved against the model's defaults first")
        return self._search_options(self.beam_size, self.length_penalty, self.max_consecutive_repeats)

    def _search_options(self, beam_size: int, length_penalty: float, max_consecutive_repeats: int) -> SearchOptions:
        return SearchOptions(
            beam_size=beam_size,
            num_hypotheses=self.num_hypotheses,
            length_penalty=length_penalty,
            min_length=self.min_length,
            no_repeat_ngram_size=self.no_repeat_ngram_size,
            max_consecutive_repeats=max_consecutive_repeats,
            return_alignments=self.return_alignments,
        )


@dataclass
class Hypothesis:
    text: str
    score: float  # sum of log-probabilities, EOS included
    normalized_score: float  # score / length ** length_penalty, the ranking criterion


@dataclass
class TermUse:
    """A glossary term the text says, and where the translation uses it."""

    source: str  # the term's source, as the glossary has it
    target: str
    # where the text says it: [start, end) in the text; None for markup, where it is in a block's text
    source_span: tuple[int, int] | None
    target_span: tuple[int, int] | None  # where the translation has the target term; None: nowhere

    @property
    def used(self) -> bool:
        return self.target_span is not None


def term_uses(said: Sequence[tuple[Term, tuple[int, int] | None]], translation: str) -> list[TermUse]:
    """Each term a text says (with where it says it), with where ``translation`` has its target
    term: looked for after the previous use of the same target, so that a term said twice is
    found twice."""
    uses = []
    searched_from: dict[str, int] = {}
    for term, span in said:
        start = searched_from.get(term.target, 0)
        # As written, or in capitals where the sentence was written in them (engine.casing).
        found = [(at, len(t)) for t in (term.target, term.target.upper()) if (at := translation.find(t, start)) >= 0]
        place = (found[0][0], sum(found[0])) if found else None
        if place is not None:
            searched_from[term.target] = place[1]
        uses.append(TermUse(term.source, term.target, span, place))
    return uses


@dataclass
class TranslationResult:
    text: str
    hypotheses: list[Hypothesis]  # best first (mended with glossary terms: in the order the search ranked them)
    alignment: Alignment | None = None  # of the best hypothesis, when asked for
    truncated: bool = False  # a sentence was too long for the model and was translated in pieces
    input_tokens: int = 0  # source pieces read by the encoder, EOS included
    output_tokens: int = 0  # target pieces of the best hypothesis, EOS excluded
    terms: list[TermUse] = field(default_factory=list)  # the glossary's terms the text says, in order


@dataclass
class BatchStats:
    encode_seconds: float = 0.0
    decode_seconds: float = 0.0
    sub_batches: list[tuple[int, int]] = field(default_factory=list)  # (sentences, padded source tokens)


@dataclass
class TranslatedBatch:
    results: list[TranslationResult]  # one per input text, in input order
    stats: BatchStats


@dataclass(frozen=True)
class ModelInfo:
    name: str
    version: str
    languages: Languages
    variant: str
    provider: str
    quality: dict[str, Any]  # test set -> BLEU/chrF with signatures, of this variant
    decoding: DecodingDefaults  # what ``None`` options mean for this model


class Engine(Protocol):
    """A loaded model that translates batches of texts; safe to call from several threads, whose
    calls share it one model step at a time (``engine.scheduler``); a call stops with
    ``engine.scheduler.Cancelled`` once its ``cancellation`` is set."""

    info: ModelInfo

    def count_tokens(self, text: str) -> int:
        """Source pieces of ``text`` as one sentence, EOS included (what batch limits count)."""
        ...

    def translate_batch(
        self, texts: list[str], options: TranslationOptions | None = None, cancellation: Cancellation | None = None
    ) -> TranslatedBatch: ...

    def close(self) -> None: ...
