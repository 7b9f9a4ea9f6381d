"""The translation engine: texts in, translations out, on onnxruntime (no torch, no HTTP).

``Translator`` loads and validates a bundle (``engine.bundle``), builds the runner, warms it up,
and translates a list of texts in one call:

1. each text is split into sentences (``engine.segmenter``), which are tokenized, except those
   with nothing to translate (symbols, emoji, numbers, URLs), which are kept as they are;
2. all sentences are sorted by length and cut into sub-batches bounded by ``max_batch_sentences``
   and ``max_batch_tokens`` (padded source tokens), so padding stays small;
3. per sub-batch: the encoder once, then beam search (``engine.beam_search``) over decoder steps
   with the KV cache; a sentence that says a term of the request's glossary (``engine.glossary``)
   and whose translation does not use its target term gets it in place of the words that
   translate it (``engine.replacement``, scored by ``engine.forced_decoding``), or else is decoded
   again with the term as a constraint (``engine.constraints``), in sub-batches of such sentences:
   the others are translated as without the glossary. ``streams`` sub-batches decode at once,
   each on its share of the threads (see ``TranslatorConfig.streams``);
   calls made at the same time (from several threads) share the streams one encoder pass or
   decoder step at a time, the least served call first (``engine.scheduler``), and a call whose
   ``Cancellation`` is set stops at its next step with ``Cancelled``. With ``pool``, every
   sub-batch of every call is instead a search in one of ``streams`` row pools, which it joins
   and leaves between steps (``engine.pool``, ``engine.pool_scheduler``; on CUDA its caches in
   float16 in device memory, ``engine.pool_storage``);
4. translations are detokenized and reassembled per text, in input order.

A sentence's translation does not depend on what else is in the batch: rows are decoded
independently, and with at least one padding position (``pad_batch``) the fp32 graphs give bitwise
the same results for a sentence alone or inside a larger batch (tests/engine/test_translator.py).
So do the int8 graphs: they quantise activations per row, not per batch (``export.quantize``).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine import beam_search, forced_decoding
from engine.alignment import Alignment, KnownLink, build_alignment, concat_alignments, word_links
from engine.api import (
    BatchStats,
    Hypothesis,
    ModelInfo,
    TermUse,
    TranslatedBatch,
    TranslationOptions,
    TranslationResult,
    term_uses,
)
from engine.beam_search import SearchOptions
from engine.bundle import Bundle, BundleError, Language, check_graph, load_bundle
from engine.casing import ordinary_case
from engine.constraints import GUIDES, Guide, SentenceConstraints
from engine.cost import glossary_beam, glossary_work
from engine.cpus import available_cpus, default_threads
from engine.decoder import Decoder, Step, Steps, drive
from engine.forced_decoding import Forced
from engine.glossary import Glossary
from engine.half_precision import FULL_VARIANT, HALF_VARIANT
from engine.insets import Stripped, take_out, visible
from engine.language_id import is_passthrough
from engine.languages import pairs, word_separator
from engine.markup import Document, Translation, WordAlignment
from engine.pool import PoolConfig, RowPool
from engine.pool_scheduler import PoolScheduler, Timing
from engine.pool_storage import DeviceStorage
from engine.replacement import Replacement, WordAttention, replaced
from engine.runner import DecoderShape, Provider, Runner, RunnerConfig, pad_batch, resolve_provider
from engine.scheduler import Cancellation, StepScheduler, Task, Turns
from engine.segmenter import SegmentedText, segment
from engine.shortlist import Shortlist
from engine.tokenizer import Tokenizer

__all__ = ["Translator", "TranslatorConfig", "auto_streams"]

WARMUP_TEXT = "Warm-up: the first request should not pay for memory allocation."
_Results = list[list[beam_search.Hypothesis]]  # each sentence's hypotheses, best first


@dataclass(frozen=True)
class TranslatorConfig:
    model_dir: Path | str = Path("models/en-de/bundle")
    provider: Provider = "auto"
    # CPU threads for onnxruntime in all; 0 = its default, one per physical core (with streams > 1:
    # one per logical CPU, split between the streams), at most the CPUs a container may use.
    threads: int = 0
    # Sub-batches decoded concurrently, each running onnxruntime on threads // streams threads (its
    # runs release the GIL). A decoder step is many small kernels, which split poorly across
    # threads, so independent streams use the cores better than one stream with all of them; a
    # lone sentence gets only one stream's threads.
    streams: int = 1
    # None: the manifest's default for the provider. "fp16" where the bundle has no such variant:
    # its fp32 computed in float16 (engine.half_precision), for CUDA
    variant: str | None = None
    max_batch_sentences: int = 64
    max_batch_tokens: int = 4096  # padded source tokens per sub-batch
    warmup: bool = True
    weights_cache: Path | None = None  # engine.shared_weights: one copy of the weights per machine
    # Decode in a row pool per stream (engine.pool), which sub-batches join and leave between steps
    # (on CUDA: its caches in float16 in device memory); off: each sub-batch decodes as one
    # rectangle of rows. Off by default until the pool is at least as fast (benchmarks/RESULTS.md,
    # sections 21, 24 and 33; on a GPU not yet measured).
    pool: bool = False
    pool_rows: int = 128  # decoder rows a stream's pool gives large searches (engine.pool.PoolConfig.rows)
    # With the pool: its step at a few fixed shapes (engine.captured_step), captured as CUDA graphs
    # on CUDA (on the CPU the same shapes without capture, for tests). Every step then scores the
    # whole vocabulary: a shortlist's step varies in shape
    cuda_graphs: bool = False

    def __post_init__(self) -> None:
        if self.max_batch_sentences < 1 or self.max_batch_tokens < 1:
            raise ValueError("max_batch_sentences and max_batch_tokens must be at least 1")
        if self.streams < 1 or self.threads < 0:
            raise ValueError("streams must be at least 1 and threads at least 0")
        if self.cuda_graphs and not self.pool:
            raise ValueError("cuda_graphs captures the row pool's step: it needs pool")

    @property
    def threads_per_stream(self) -> int:
        """onnxruntime intra-op threads of each stream; 0 (its default) only for a single stream
        that may use every CPU of the machine."""
        if self.streams == 1:
            return self.threads or default_threads()
        return max(1, (self.threads or available_cpus()) // self.streams)


def auto_streams(provider: Provider) -> int:
    """The streams ``MT_STREAMS=0`` means: 2 on a CPU with at least 2 usable cores (more requests
    served under load, see benchmarks/RESULTS.md); 1 on CUDA, where one stream's larger batches
    suit the GPU, and on a single core."""
    if resolve_provider(provider) == "cuda":
        return 1
    return 2 if available_cpus() >= 2 else 1


@dataclass
class _Sentence:
    """One segment of one input text, tokenized."""

    text_index: int
    ids: list[int]  # source ids, EOS included; none for a verbatim segment
    truncated: bool
    verbatim: str | None = None  # the segment itself when it has nothing to translate
    hypotheses: list[beam_search.Hypothesis] = field(default_factory=list)
    terms: list[_SentenceTerm] = field(default_factory=list)  # the glossary terms it says
    forced: list[Forced] = field(default_factory=list)  # its translations with those terms put in
    # Its hypotheses had its terms put in (forced or constrained), not chosen by the model itself.
    terms_put_in: bool = False
    reads: str = ""  # what the model reads of it: in ordinary case if it was in capitals, without its insets
    stripped: Stripped | None = None  # without its insets (engine.insets), which the model does not read
    capitals: bool = False  # written in capitals: read in ordinary case, translated into capitals (engine.casing)

    def constraints(self, guide: Guide) -> SentenceConstraints:
        """Its glossary terms as constraints, begun where ``guide`` says."""
        spelled = self._spelled()
        return SentenceConstraints([t.pieces for t in spelled], [t.source_ids for t in spelled], guide)

    def term_links(self, tokens: Sequence[int], pair: _Pair) -> list[KnownLink]:
        """The source and target pieces (language tokens left out) of each glossary term it says
        and its translation ``tokens`` was made to use, found as the search judges a term met:
        the model's attention at a term it was made to write is no guide to the words it
        translates. None if it used its terms by itself: its attention shows that, and its tags
        go as without the glossary."""
        if not self.terms_put_in:
            return []
        src, tgt = len(pair.source_prefix), len(pair.target_prefix)
        places = self.constraints(Guide()).places(tokens)
        return [
            KnownLink((term.source_ids[0] - src, term.source_ids[1] - src), (place[0] - tgt, place[1] - tgt))
            for term, place in zip(self._spelled(), places, strict=True)
            if term.source_ids is not None and place is not None
        ]

    def _spelled(self) -> list[_SentenceTerm]:
        """Its glossary terms the target vocabulary can spell: those it is made to use."""
        return [t for t in self.terms if t.pieces]

    def spells_terms(self) -> bool:
        """Whether it says a glossary term the target vocabulary can spell: one it is made to use."""
        return bool(self._spelled())

    def misses_terms(self) -> bool:
        """Whether its best translation misses a glossary term it can use."""
        if not self.hypotheses or not self.spells_terms():
            return False
        return not self.constraints(Guide()).met_by(self.hypotheses[0].tokens)


@dataclass
class _Allowance:
    """The work, in source tokens times beams, that putting a call's glossary terms in may take:
    what the service admits for it (``engine.cost.glossary_work``). Without it, a sentence no guide
    can give its terms to would be decoded under all of them, several times what was admitted."""

    left: int

    @classmethod
    def of(cls, sentences: Sequence[_Sentence], beam: int) -> _Allowance:
        return cls(sum(glossary_work(len(s.ids), beam) for s in sentences if s.spells_terms()))

    def spend(self, work: int) -> None:
        self.left -= work

    def take(self, sentences: Sequence[_Sentence], beam: int) -> list[_Sentence]:
        """Those of ``sentences`` it has room to decode at ``beam``, in order, spent."""
        taken = []
        for s in sentences:
            if (work := len(s.ids) * beam) <= self.left:
                taken.append(s)
                self.left -= work
        return taken


@dataclass(frozen=True)
class _Call:
    """What every sub-batch of one ``translate_batch`` call shares."""

    pair: _Pair
    max_length: int | None  # the request's cap on generated tokens
    shortlist: Shortlist | None
    task: Task
    stats: BatchStats  # added to as sub-batches finish


@dataclass(frozen=True)
class _Job:
    """A sub-batch to decode: searched (under ``guide``'s constraints, if one is given), or its
    sentences' ``forced`` translations scored."""

    sentences: list[_Sentence]
    search: SearchOptions
    guide: Guide | None = None
    forced: bool = False

    def pieces(self) -> list[int]:
        """The target pieces its translations must be able to write besides the model's own."""
        if self.forced:
            return [p for s in self.sentences for f in s.forced for p in f.tokens]
        if self.guide is not None:
            return [p for s in self.sentences for t in s.terms for p in t.pieces or ()]
        return []


@dataclass(frozen=True)
class _SentenceTerm:
    term: int  # index into the glossary's terms
    span: tuple[int, int] | None  # [start, end) in its unit's text; None for a placed term
    source_ids: tuple[int, int] | None  # the source positions it is said at; None for a placed term
    pieces: list[int] | None  # the target term's; None where the target vocabulary cannot spell it


class Translator:
    def __init__(self, config: TranslatorConfig) -> None:
        self.config = config
        # Only the graphs served are checked, on the sessions that serve them: an inspection session
        # per graph of every variant would load each model's weights once more.
        bundle = load_bundle(config.model_dir, check_graphs=False)
        manifest = bundle.manifest
        self.tokenizer = Tokenizer.from_bundle(bundle)
        self._check_tokenizer(bundle)
        provider = resolve_provider(config.provider)
        variant = config.variant or getattr(manifest.default_variant, provider)
        half = variant == HALF_VARIANT and variant not in manifest.variants
        if half and FULL_VARIANT not in manifest.variants:
            raise BundleError(
                f"{bundle.path}: variant {HALF_VARIANT!r} computes the {FULL_VARIANT!r} variant in float16, and the "
                f"bundle has none (available: {sorted(manifest.variants)})"
            )
        d = manifest.dimensions
        graphs = bundle.graph_paths(FULL_VARIANT if half else variant)
        listed = None if config.cuda_graphs else manifest.shortlist
        self.shortlist = Shortlist.load(bundle.path / listed.file) if listed else None
        self.runner = Runner(
            *graphs,
            DecoderShape(d.decoder_layers, d.heads, d.d_head, d.vocab_size),
            RunnerConfig(
                provider=config.provider,
                threads=config.threads_per_stream,
                weights_cache=config.weights_cache,
                pool=config.pool,
                cuda_graphs=config.cuda_graphs,
                half_precision=half,
            ),
            shortlist=self.shortlist is not None,
        )
        check_graph(self.runner.encoder, "encoder", manifest, where=str(graphs[0]))
        check_graph(self.runner.decoder, "decoder", manifest, where=str(graphs[1]))
        self.pools: list[PoolScheduler] | None = None
        self.streams: ThreadPoolExecutor | None = None
        if self.runner.pooled:  # a row pool per stream, each decoded by a thread of its own
            shape = self.runner.shape
            self.pools = [
                PoolScheduler(
                    RowPool(
                        self.runner.decoder,
                        shape,
                        PoolConfig(rows=config.pool_rows, positions=d.max_positions, fixed_shapes=config.cuda_graphs),
                        DeviceStorage("cuda", self.runner.device_id) if self.runner.provider == "cuda" else None,
                    ),
                    self.runner.encode,
                    pad_id=manifest.special_tokens.pad,
                    searches=functools.partial(
                        beam_search.JoinableSearch,
                        bos_id=manifest.special_tokens.bos,
                        eos_id=manifest.special_tokens.eos,
                        forced_eos=manifest.decoding.forced_eos,
                    ),
                    name=f"mt-pool-{i}",
                )
                for i in range(config.streams)
            ]
        elif config.streams > 1:
            self.streams = ThreadPoolExecutor(config.streams, thread_name_prefix="decode")
        self.scheduler = StepScheduler(config.streams)
        self.manifest = manifest
        self._sources = {lang.code: lang for lang in manifest.languages.source}
        self._targets = {lang.code: lang for lang in manifest.languages.target}
        self.max_positions = d.max_positions
        self.max_source_ids = d.max_positions - 1  # EOS included, one position left for padding (pad_batch)
        self.info = ModelInfo(
            name=manifest.name,
            version=manifest.version,
            languages=manifest.languages,
            variant=variant,
            provider=self.runner.provider,
            # fp16 is measured nowhere: fp32's figures are not its own
            quality={} if half else {k: q.model_dump() for k, q in manifest.variants[variant].quality.items()},
            decoding=manifest.decoding,
        )
        if config.warmup:
            source, target = pairs(manifest.languages)[0]
            self.translate_batch([WARMUP_TEXT], TranslationOptions(source_language=source, target_language=target))

    def _check_tokenizer(self, bundle: Bundle) -> None:
        outputs, ids = bundle.manifest.dimensions.vocab_size, self.tokenizer.target_vocab_size
        if ids > outputs:  # the model may have more outputs than the tokenizer ids (NLLB does)
            raise BundleError(f"{bundle.path}: the tokenizer has {ids} target ids, the model only {outputs} outputs")

    # -- public API -------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Source pieces of ``text`` as one sentence, EOS included (what batching bounds count)."""
        return len(self.tokenizer.encode(text))

    def translate_batch(
        self,
        texts: list[str],
        options: TranslationOptions | None = None,
        cancellation: Cancellation | None = None,
    ) -> TranslatedBatch:
        """Translate ``texts`` with ``options`` (default: the model's); ValueError if invalid,
        ``engine.scheduler.Cancelled`` once ``cancellation`` is set."""
        with self.scheduler.task(cancellation) as task:
            return self._translate(texts, options, task)

    def _translate(self, texts: list[str], options: TranslationOptions | None, task: Task) -> TranslatedBatch:
        options = (options or TranslationOptions()).resolved(self.info)
        pair = _Pair.of(
            self._sources[options.source_language],
            self._targets[options.target_language],
            in_source=self.manifest.languages.target_tokens_in == "source",
        )
        search = options.search_options()
        # Markup: each text's blocks and attribute values are translated as texts of their own, with
        # alignments, which put the inline tags back (engine.markup).
        documents = [Document(text, options.format) for text in texts] if options.format != "text" else None
        units = [unit for d in documents for unit in d.units] if documents else texts
        stats = BatchStats()
        segmented = [self._segment(text, pair, plain=documents is None) for text in units]
        sentences = [
            self._sentence(i, s.text, s.truncated, pair, plain=documents is None)
            for i, seg in enumerate(segmented)
            for s in seg.segments
        ]
        by_unit: list[list[_Sentence]] = [[] for _ in units]
        for s in sentences:
            by_unit[s.text_index].append(s)
        translated = list(zip(segmented, by_unit, strict=True))
        if options.glossary is not None:
            places = _places(options.glossary, documents, len(units))
            for text, unit, placed in zip(units, translated, places, strict=True):
                self._find_terms(options.glossary, text, *unit, pair, placed)
        # prefix and EOS alone: nothing to say
        spoken = [s for s in sentences if s.verbatim is None and len(s.ids) > len(pair.source_prefix) + 1]
        decode_search = replace(search, return_alignments=True) if documents else search
        self._decode(spoken, decode_search, _Call(pair, options.max_length, self._shortlist(options), task, stats))
        glossary = options.glossary
        if documents is None:
            results = [self._result([unit], search, pair, glossary=glossary) for unit in translated]
        else:
            results, first = [], 0
            for d in documents:
                units_of = translated[first : first + len(d.units)]
                results.append(self._result(units_of, search, pair, d.render, glossary=glossary))
                first += len(d.units)
        return TranslatedBatch(results, stats)

    def _find_terms(
        self,
        glossary: Glossary,
        text: str,
        seg: SegmentedText,
        sentences: list[_Sentence],
        pair: _Pair,
        placed: list[tuple[int, float]] | None,
    ) -> None:
        """Give each sentence of ``text`` (``seg``'s segments) the glossary terms it must use: those
        it says or, for a glossary of placed terms, those ``placed`` in it (each a term's number and
        a fraction of the text's length)."""
        pieces: dict[int, list[int] | None] = {}
        spoken = [(start, s.reads, s) for start, s in zip(seg.starts(), sentences, strict=True) if s.verbatim is None]
        if not spoken:
            return
        if placed is not None:
            for term, place in placed:
                there = [s for start, _, s in spoken if start <= place * len(text)] or [spoken[0][2]]
                there[-1].terms.append(_SentenceTerm(term, None, None, self._term_pieces(glossary, term, pieces)))
            return
        for start, segment_text, s in spoken:
            for m in glossary.find(segment_text):
                # The source pieces before the term and up to its end: where the encoder has it.
                ids = (self.tokenizer.count(segment_text[: m.start]), self.tokenizer.count(segment_text[: m.end]))
                at = (len(pair.source_prefix) + ids[0], len(pair.source_prefix) + max(ids[1], ids[0] + 1))
                origin = s.stripped.origin if s.stripped else int
                span = (start + origin(m.start), start + origin(m.end))
                s.terms.append(_SentenceTerm(m.term, span, at, self._term_pieces(glossary, m.term, pieces)))

    def _shortlist(self, options: TranslationOptions) -> Shortlist | None:
        """The shortlist a request's batches use: the model's, unless the request or the model's default says no."""
        info = self.manifest.shortlist
        wanted = options.shortlist if options.shortlist is not None else info is not None and info.default
        return self.shortlist if wanted and self.runner.takes_vocab_ids else None

    def _term_pieces(self, glossary: Glossary, term: int, known: dict[int, list[int] | None]) -> list[int] | None:
        """The target pieces of a term, None if the target vocabulary cannot spell it (an unknown
        piece): that term is left to the model."""
        if term not in known:
            ids = self.tokenizer.encode_target(glossary.terms[term].target)
            known[term] = ids if ids and self.manifest.special_tokens.unk not in ids else None
        return known[term]

    def close(self) -> None:
        """Release the onnxruntime sessions; the translator cannot be used afterwards."""
        if self.streams is not None:
            self.streams.shutdown()
        for pool in self.pools or []:
            pool.close()
        del self.runner

    # -- steps ------------------------------------------------------------------------------

    def _segment(self, text: str, pair: _Pair, *, plain: bool) -> SegmentedText:
        room = self.max_source_ids - 1 - len(pair.source_prefix)  # for the language tokens and EOS
        return segment(text, count_tokens=self._read_tokens if plain else self.tokenizer.count, max_tokens=room)

    def _read_tokens(self, text: str) -> int:
        """The pieces of ``text`` that the model reads: without its insets, which cost it nothing
        (cut to fit them, a long URL's pieces were read as sentences of their own)."""
        stripped = take_out(text)
        return self.tokenizer.count(stripped.words if stripped else text)

    def _sentence(self, text_index: int, text: str, truncated: bool, pair: _Pair, *, plain: bool) -> _Sentence:
        if is_passthrough(visible(text)):  # symbols, numbers, URLs, escapes: a model would only invent words
            return _Sentence(text_index, [], truncated, verbatim=text)
        # Markup takes its insets out of its blocks (engine.markup.document). Capitals are judged
        # without the insets ("\x1b[1m" has a lower-case letter); ordinary case moves no character,
        # so that markup's tags are placed by the alignment with the text as written.
        stripped = take_out(text) if plain else None
        words = stripped.words if stripped else text
        cased = ordinary_case(words, self.tokenizer.score)
        reads = cased or words
        ids = self.tokenizer.encode(reads, prefix=pair.source_prefix)
        if not self._reads_a_word(ids, pair):  # a script it has no pieces for: it would invent a sentence
            return _Sentence(text_index, [], truncated, verbatim=text)
        if len(ids) > self.max_source_ids:  # the segmenter's estimate was off: cut, keep EOS, and say so
            ids, truncated = [*ids[: self.max_source_ids - 1], ids[-1]], True
        return _Sentence(text_index, ids, truncated, reads=reads, stripped=stripped, capitals=cased is not None)

    def _reads_a_word(self, ids: list[int], pair: _Pair) -> bool:
        """Whether the model knows a piece of the sentence with a letter in it: a text wholly in a
        script its vocabulary lacks is one unknown piece per run of letters ("狗在公园里跑。" is
        3 ids), whatever its length."""
        unknown = self.tokenizer.specials.unk
        known = [i for i in ids[len(pair.source_prefix) : -1] if i != unknown]
        return not is_passthrough("".join(self.tokenizer.source_pieces(known)))

    def _decode(self, sentences: list[_Sentence], search: SearchOptions, call: _Call) -> None:
        """Fill in each sentence's hypotheses, in length-sorted sub-batches, ``streams`` at a time.
        A sentence with glossary terms whose translation does not use them all gets them put in
        place of the words it translated them with (``engine.replacement``), scored by the model;
        failing that, it is decoded again under each guide of ``engine.constraints.GUIDES`` in turn
        until it uses them, in sub-batches of such sentences: a term the model uses by itself
        costs nothing. Mending and decoding again draw on one allowance (``_Allowance``): a guide
        runs for the sentences still missing terms that it has room for, and a sentence it has no
        room for keeps its translation, its term reported unused."""
        self._run([_Job(batch, search) for batch in self._sub_batches(sentences)], call)
        wide = replace(search, beam_size=glossary_beam(search.beam_size))
        allowance = _Allowance.of(sentences, search.beam_size)
        mended = [s for s in sentences if s.misses_terms() and self._put_terms_in(s, call)]
        allowance.spend(sum(len(s.ids) * len(s.forced) for s in mended))  # one row per translation scored
        self._run([_Job(batch, search, forced=True) for batch in self._sub_batches(mended)], call)
        for guide in GUIDES:
            pending = allowance.take([s for s in sentences if s.misses_terms()], wide.beam_size)
            for s in pending:
                s.terms_put_in = True
            if not pending:
                break
            self._run([_Job(batch, wide, guide) for batch in self._sub_batches(pending)], call)

    def _put_terms_in(self, sentence: _Sentence, call: _Call) -> bool:
        """Give ``sentence`` its hypotheses with its glossary terms put in place of the words that
        translate them, to be scored (``_Sentence.forced``); False if its best cannot have them, or
        not within the request's length. They keep the search's order, so that the best is the
        same whatever the number asked for."""
        max_length = self._max_length(len(sentence.ids), call.max_length)
        mended = [self._mended(sentence, h, call.pair, max_length) for h in sentence.hypotheses]
        if not mended or mended[0] is None:
            return False
        sentence.forced = list(dict.fromkeys(m for m in mended if m is not None))
        sentence.terms_put_in = True
        return True

    def _mended(
        self, sentence: _Sentence, hypothesis: beam_search.Hypothesis, pair: _Pair, max_length: int
    ) -> Forced | None:
        """``hypothesis`` with each glossary term of ``sentence`` in place of the words that
        translate it (``engine.replacement``); None where a term's words cannot be found, or the
        result would be longer than ``max_length`` generated tokens (EOS included)."""
        attention, source_ids, target_ids = self._alignment_inputs(sentence, hypothesis, pair)
        words = WordAttention(
            attention, self.tokenizer.source_pieces(source_ids), self.tokenizer.target_pieces(target_ids)
        )
        changes = []
        for term in (t for t in sentence.terms if t.pieces):
            if term.source_ids is None:  # a placed term: no source words
                return None
            start, end = (i - len(pair.source_prefix) for i in term.source_ids)
            run = words.translated_by((start, end))
            if run is None:
                return None
            changes.append(Replacement(*run, tuple(term.pieces)))
        tokens = replaced(target_ids, changes)
        if tokens is None or not sentence.constraints(Guide()).met_by(tokens):
            return None
        if len(pair.target_prefix) + len(tokens) + hypothesis.eos > max_length:
            return None
        return Forced((*hypothesis.tokens[: len(pair.target_prefix)], *tokens), hypothesis.eos)

    def _run(self, jobs: list[_Job], call: _Call) -> None:
        """Decode every job: all at once in the row pools, or each on a decoder state of its own
        (CUDA, or the CPU without the pool), ``streams`` at a time."""
        if self.pools is None:
            mapped = self.streams.map if self.streams else map
            timings = list(mapped(self._decode_batch, jobs, [call] * len(jobs)))
        else:
            futures = [self._submit(job, call) for job in jobs]
            timings = [self._decoded(job, call, *future.result()) for job, future in zip(jobs, futures, strict=True)]
        for job, (encode_seconds, decode_seconds) in zip(jobs, timings, strict=True):
            call.stats.encode_seconds += encode_seconds
            call.stats.decode_seconds += decode_seconds
            width = max(len(s.ids) for s in job.sentences) + 1  # as pad_batch pads
            call.stats.sub_batches.append((len(job.sentences), len(job.sentences) * width))

    def _submit(self, job: _Job, call: _Call) -> Future[tuple[object, Timing]]:
        """Queue a job in the least loaded row pool: a plain search's sentences join the pool's
        search for its options, any other job is a search of its own."""
        pools = self.pools
        assert pools is not None
        pool = min(pools, key=lambda p: p.load)
        ids = [s.ids for s in job.sentences]
        if self._joinable(job, call):
            return pool.submit_joinable(ids, self._max_lengths(job, call), job.search, task=call.task)
        alignments, vocab_ids, steps = self._steps(job, call)
        rows = sum(len(s.forced) for s in job.sentences) if job.forced else len(job.sentences) * job.search.beam_size
        return pool.submit(ids, steps, rows=rows, task=call.task, alignments=alignments, vocab_ids=vocab_ids)

    def _joinable(self, job: _Job, call: _Call) -> bool:
        """Whether ``job`` is a search that sentences of other calls may share: no glossary
        terms, insets, shortlist or target-language prefix, options that read no step."""
        plain = not (job.forced or job.guide is not None or call.shortlist is not None or call.pair.target_prefix)
        unmarked = not any(s.stripped or s.terms for s in job.sentences)
        return plain and unmarked and beam_search.joinable(job.search)

    def _decoded(self, job: _Job, call: _Call, results: object, timing: Timing) -> tuple[float, float]:
        self._keep(job, call, results)  # type: ignore[arg-type]
        return timing.encode_seconds, timing.decode_seconds

    def _decode_batch(self, job: _Job, call: _Call) -> tuple[float, float]:
        """Encode and decode one job on a decoder state of its own (one rectangle of rows), a turn
        per step; returns its encode and decode seconds."""
        src = pad_batch([s.ids for s in job.sentences], self.manifest.special_tokens.pad)  # (B, S)
        start = time.perf_counter()
        with call.task.turns() as turns:
            turns.next()
            encoded = self.runner.encode(src)
            encoded_at = time.perf_counter()
            alignments, vocab_ids, steps = self._steps(job, call)
            decoder = _TurnTaking(self.runner.start(encoded, alignments=alignments, vocab_ids=vocab_ids), turns)
            self._keep(job, call, drive(steps, decoder))
        return encoded_at - start, time.perf_counter() - encoded_at

    def _steps(self, job: _Job, call: _Call) -> tuple[bool, np.ndarray | None, Steps[_Results]]:
        """A job's search (or the scoring of its sentences' ``forced`` translations) with its
        glossary terms placed as the job's guide says (None: without them), and what its decoder
        must give it: attention, and the call's shortlist's pieces for it if given (with what it
        must be able to write: EOS, the target language's tokens, those terms)."""
        batch, search, guide, pair = job.sentences, job.search, job.guide, call.pair
        specials = self.manifest.special_tokens
        vocab_ids = None
        if call.shortlist is not None:
            must = [specials.eos, *pair.target_prefix, *job.pieces()]
            vocab_ids = call.shortlist.for_batch([s.ids for s in batch], must)
        # The attention shows the words a missed glossary term may replace, and where insets go back.
        misses = guide is None and not job.forced and any(t.pieces for s in batch for t in s.terms)
        if misses or any(s.stripped for s in batch):
            search = replace(search, return_alignments=True)
        # the decoder's attention also places constraints
        alignments = search.return_alignments or (guide is not None and not guide.anywhere)
        if job.forced:
            steps = forced_decoding.score_steps(
                [s.forced for s in batch],
                bos_id=specials.bos,
                eos_id=specials.eos,
                prefix_length=len(pair.target_prefix),
                length_penalty=search.length_penalty,
            )
        else:
            steps = beam_search.search_steps(
                self._max_lengths(job, call),
                search,
                bos_id=specials.bos,
                eos_id=specials.eos,
                forced_eos=self.manifest.decoding.forced_eos,
                prefixes=[pair.target_prefix] * len(batch),
                constraints=[s.constraints(guide) for s in batch] if guide is not None else None,
            )
        return alignments, vocab_ids, steps

    def _keep(self, job: _Job, call: _Call, results: _Results) -> None:
        """Give each of the job's sentences its hypotheses."""
        prefix = len(call.pair.target_prefix)
        for s, hyps in zip(job.sentences, results, strict=True):
            # An alternative that ends at once says nothing of a sentence with words; the best stays
            # what the search chose.
            s.hypotheses = hyps[:1] + [h for h in hyps[1:] if len(h.tokens) > prefix]

    def _sub_batches(self, sentences: list[_Sentence]) -> list[list[_Sentence]]:
        """Length-sorted runs of at most max_batch_sentences and max_batch_tokens padded tokens, and
        small enough that every stream gets one."""
        limit = min(self.config.max_batch_sentences, math.ceil(len(sentences) / self.config.streams))
        batches: list[list[_Sentence]] = []
        for s in sorted(sentences, key=lambda s: len(s.ids)):
            batch = batches[-1] if batches else []
            fits = len(batch) < limit
            if batch and fits and (len(batch) + 1) * (len(s.ids) + 1) <= self.config.max_batch_tokens:
                batch.append(s)
            else:
                batches.append([s])
        return batches

    def _max_lengths(self, job: _Job, call: _Call) -> list[int]:
        return [self._max_length(len(s.ids), call.max_length) for s in job.sentences]

    def _max_length(self, source_len: int, cap: int | None) -> int:
        """The request's cap as given, else a * source length + b (source length counting EOS)
        within the model's own cap; never past the model's positions."""
        d = self.manifest.decoding
        wanted = cap or min(int(d.max_length_a * source_len + d.max_length_b), d.max_length or self.max_positions)
        return max(1, min(self.max_positions, wanted))

    def _result(
        self,
        units: list[tuple[SegmentedText, list[_Sentence]]],
        search: SearchOptions,
        pair: _Pair,
        render: Callable[[list[Translation]], str] | None = None,
        *,
        glossary: Glossary | None = None,
    ) -> TranslationResult:
        """Reassemble one text from its units: the text itself, or (``render`` given) a markup
        text's blocks and attribute values, which ``render`` puts back. Its hypothesis i joins
        every sentence's i-th best (or last) hypothesis. The target language's forced tokens are
        generated (they count in scores and lengths) but are not part of the translation."""
        parts = [p for _, unit_parts in units for p in unit_parts]
        n_best = max([1, *(len(p.hypotheses) for p in parts)])
        words = len(pair.target_prefix)
        markup = render is not None
        hypotheses = []
        for i in range(n_best):
            picks = [p.hypotheses[min(i, len(p.hypotheses) - 1)] if p.hypotheses else None for p in parts]
            score = sum(h.score for h in picks if h)
            length = sum(h.length for h in picks if h)
            translations, done = [], 0
            for seg, unit_parts in units:
                unit_picks = picks[done : done + len(unit_parts)]
                translations.append(self._joined(seg, unit_parts, unit_picks, pair, markup=markup))
                done += len(unit_parts)
            normalized = beam_search.normalized(score, length, search.length_penalty) if length else 0.0
            text = render(translations) if render else translations[0].text
            hypotheses.append(Hypothesis(text, score, normalized))
        best = [p.hypotheses[0] if p.hypotheses else None for p in parts]
        alignment = None
        if search.return_alignments:
            alignment = concat_alignments(
                [self._alignment(p, h, pair) for p, h in zip(parts, best, strict=True) if h and h.attention is not None]
            )
        return TranslationResult(
            text=hypotheses[0].text,
            hypotheses=hypotheses,
            alignment=alignment,
            truncated=any(p.truncated for p in parts),
            input_tokens=sum(len(p.ids) for p in parts),
            output_tokens=sum(len(h.tokens) - words for h in best if h),
            terms=_term_uses(parts, glossary, hypotheses[0].text, markup=markup) if glossary else [],
        )

    def _joined(
        self,
        seg: SegmentedText,
        parts: list[_Sentence],
        picks: list[beam_search.Hypothesis | None],
        pair: _Pair,
        *,
        markup: bool,
    ) -> Translation:
        """One text's sentences translated by ``picks``, joined. For a unit of markup, with its
        words aligned, and without the final period the model adds to a text that has none (a
        heading, a table cell, an alt text: the captions it learned from all end in one)."""
        texts = [self._text(p, h, pair) for p, h in zip(parts, picks, strict=True)]
        if markup and texts and _added_period(seg.segments[-1].text, texts[-1]):
            texts[-1] = texts[-1][:-1]
        text, starts = seg.join_spans(texts, pair.word_separator)
        if not markup:
            return Translation(text)
        words = WordAlignment()
        sentences = zip(seg.segments, seg.starts(), parts, picks, texts, starts, strict=True)
        for piece, source_at, sentence, hypothesis, target, target_at in sentences:
            if sentence.verbatim is not None:  # copied word for word
                words.add(piece.text, source_at, target, target_at, None)
            elif hypothesis is not None and hypothesis.attention is not None:
                inputs = self._alignment_inputs(sentence, hypothesis, pair)
                links = word_links(*inputs, self.tokenizer, sentence.term_links(hypothesis.tokens, pair))
                groups = links.source_words, links.target_words
                words.add(piece.text, source_at, target, target_at, links.pairs, groups)
            else:
                words.add(piece.text, source_at, target, target_at, [])
        return Translation(text, words)

    def _text(self, sentence: _Sentence, hypothesis: beam_search.Hypothesis | None, pair: _Pair) -> str:
        if sentence.verbatim is not None:
            return sentence.verbatim
        if hypothesis is None:
            return ""
        text = self.tokenizer.decode(hypothesis.tokens[len(pair.target_prefix) :])
        if sentence.capitals:  # before the insets go back: they stay as written
            text = text.upper()
        if sentence.stripped is not None:
            text = self._put_back(sentence.stripped, text, sentence, hypothesis, pair)
        return text

    def _put_back(
        self, stripped: Stripped, text: str, sentence: _Sentence, hypothesis: beam_search.Hypothesis, pair: _Pair
    ) -> str:
        """``text``, a translation of ``stripped.words``, with the insets put back where its words align."""
        alignment = WordAlignment()
        if hypothesis.attention is None:  # placed by position alone
            alignment.add(stripped.words, 0, text, 0, [])
        else:
            links = word_links(*self._alignment_inputs(sentence, hypothesis, pair), self.tokenizer)
            alignment.add(stripped.words, 0, text, 0, links.pairs, (links.source_words, links.target_words))
        return stripped.put_back(text, alignment)

    def _alignment(self, sentence: _Sentence, best: beam_search.Hypothesis, pair: _Pair) -> Alignment:
        """Between the words of the text and of the translation: language tokens and EOS left out."""
        return build_alignment(*self._alignment_inputs(sentence, best, pair), self.tokenizer)

    @staticmethod
    def _alignment_inputs(
        sentence: _Sentence, hypothesis: beam_search.Hypothesis, pair: _Pair
    ) -> tuple[np.ndarray, list[int], list[int]]:
        """The attention and the ids an alignment is built from: language tokens and EOS left out."""
        src, tgt = len(pair.source_prefix), len(pair.target_prefix)
        assert hypothesis.attention is not None
        return hypothesis.attention[tgt:, src:], sentence.ids[src:-1], hypothesis.tokens[tgt:]


class _TurnTaking:
    """A decoder that takes a turn (``engine.scheduler``) for each step."""

    def __init__(self, decoder: Decoder, turns: Turns) -> None:
        self.decoder, self.turns = decoder, turns

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        self.turns.next()
        return self.decoder.step(tokens, candidates, full=full)

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        self.decoder.select(rows, sentences)


@dataclass(frozen=True)
class _Pair:
    """The language tokens of a translation: before the source text, and forced as the first
    generated tokens."""

    source_prefix: list[int]
    target_prefix: list[int]
    word_separator: str  # between two translated sentences that touched in the source

    @classmethod
    def of(cls, source: Language, target: Language, *, in_source: bool) -> _Pair:
        """``in_source``: the target language's tokens go before the source text."""
        if in_source:
            return cls([*source.tokens, *target.tokens], [], word_separator(target))
        return cls(source.tokens, target.tokens, word_separator(target))


def _term_uses(parts: list[_Sentence], glossary: Glossary, translation: str, *, markup: bool) -> list[TermUse]:
    """The glossary terms the sentences ``parts`` say, and where ``translation`` uses them. Source
    places are in the text, not known for markup."""
    said = [(glossary.terms[t.term], None if markup else t.span) for part in parts for t in part.terms]
    return term_uses(said, translation)


def _added_period(source: str, translation: str) -> bool:
    return source[-1:].isalnum() and translation.endswith(".") and not translation.endswith("..")


def _places(glossary: Glossary, documents: list[Document] | None, units: int) -> list[list[tuple[int, float]] | None]:
    """The terms placed in each of a batch's ``units``, by number, each at its place in it; None
    where the glossary is not placed (a unit uses the terms it says). In markup a placed term is in
    one unit only."""
    if glossary.placed is None:
        return [None] * units
    if documents is None:
        return [list(enumerate(glossary.placed))] * units
    return [placed for d in documents for placed in glossary.in_units(len(d.units))]
