"""The search against transformers' own ``generate()``, both driving the same model.

Mostly a stand-in model whose next-token logits are a pseudo-random function of the whole sequence
so far (decoder prompt included), so transformers' generate can run it without a cache, and a
``Decoder`` over the same function gives the search the very log-probabilities transformers computes
(the same ``torch.log_softmax`` over the same float32 logits): tokens and scores must be identical.
Each sentence's prompt is a token of its own, never generated, which the stand-in reads as the
sentence: transformers counts it as its decoder prompt (as an encoder-decoder's decoder start
token), not as a generated token.

Then tiny random MarianMT and M2M100 (NLLB's) models, which the search drives step by step through
their own key-value cache: their float32 arithmetic differs in the last bits between transformers'
batch of B*K rows and the search's (fewer rows at step 0 and once sentences finish), so the scores
agree to float32 precision and the tokens exactly.

Transformers' beam search runs with ``early_stopping=True``; ``num_beams=1`` is its greedy search.
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from engine.beam_search import Hypothesis, SearchOptions, search
from engine.decoder import Step
from engine.rules import ForcedEosMode

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", minversion="5")
from transformers import (  # noqa: E402
    GenerationConfig,
    GenerationMixin,
    LogitsProcessor,
    M2M100Config,
    M2M100ForConditionalGeneration,
    MarianConfig,
    MarianMTModel,
    PreTrainedConfig,
    PreTrainedModel,
)
from transformers.cache_utils import DynamicCache, EncoderDecoderCache  # noqa: E402
from transformers.generation.logits_process import ForcedEOSTokenLogitsProcessor, LogitsProcessorList  # noqa: E402
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutput  # noqa: E402

V = 40
PAD, EOS = 1, 2  # PAD is not 0: transformers fills finished rows with `pad or eos`
PROMPTS = range(3, 11)  # sentence s's decoder prompt: PROMPTS[s], never generated
LANGS = (37, 38, 39)  # tokens a prefix forces, as target-language tags would be
UNREACHABLE = -1e4  # logit of the tokens never generated
# transformers' beams other than the first start at -1e9 (ours at -inf); where fewer than K real
# continuations exist (all but one forced), they end as hypotheses scored about -1e9.
PLACEHOLDER = -1e8


def logits(sequence: tuple[int, ...]) -> np.ndarray:
    """(V,) float32: peaked, EOS likelier with length, so that some sentences end early."""
    rng = np.random.default_rng(zlib.crc32(repr(sequence).encode()))
    out = rng.normal(0, 2.5, V).astype(np.float32)
    eos = out[EOS] + np.float32(0.9 * len(sequence) - 4)
    out[: PROMPTS.stop] = UNREACHABLE
    out[EOS] = eos
    return out


def log_softmax(sequences: Sequence[tuple[int, ...]]) -> np.ndarray:
    """(N, V) float32, as transformers computes them from the stand-in's logits."""
    return torch.log_softmax(torch.from_numpy(np.stack([logits(s) for s in sequences])), dim=-1).numpy()


class StandIn(PreTrainedModel, GenerationMixin):
    """A causal LM for transformers whose logits are ``logits(row)``."""

    config_class = PreTrainedConfig

    def __init__(self) -> None:
        super().__init__(PreTrainedConfig(vocab_size=V))
        self.unused = torch.nn.Parameter(torch.zeros(1))  # generate() reads the device off a parameter

    def forward(self, input_ids: torch.Tensor, **_: object) -> CausalLMOutput:
        rows = [tuple(r) for r in input_ids.tolist()]
        return CausalLMOutput(logits=torch.from_numpy(np.stack([logits(r) for r in rows]))[:, None, :])


class StandInDecoder:
    """The search's Decoder over the stand-in: row n continues sentence s's sequence (prompt first)."""

    def __init__(self, sentences: int) -> None:
        self.rows = [(PROMPTS[s],) for s in range(sentences)]
        self.started = False

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        if self.started:
            self.rows = [(*r, int(t)) for r, t in zip(self.rows, tokens, strict=True)]
        self.started = True
        log_probs = log_softmax(self.rows)
        ids = np.argsort(-log_probs, axis=1, kind="stable")[:, :candidates]
        return Step(log_probs if full else None, np.take_along_axis(log_probs, ids, axis=1), ids, None)

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        self.rows = [self.rows[r] for r in rows]


@dataclass(frozen=True)
class Case:
    beam: int
    forced_eos: ForcedEosMode
    length_penalty: float = 1.0
    min_length: int = 0
    no_repeat_ngram_size: int = 0


class ForcedTokens(LogitsProcessor):
    """Forces ``tokens`` as the first generated ones, as ForcedBOSTokenLogitsProcessor forces one."""

    def __init__(self, tokens: Sequence[int]) -> None:
        self.tokens = tokens

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[-1] - 1  # tokens generated so far, after the one-token prompt
        if t >= len(self.tokens):
            return scores
        forced = torch.full_like(scores, -float("inf"))
        forced[:, self.tokens[t]] = 0
        return forced


def generate(
    sentence: int, case: Case, max_new_tokens: int, prefix: Sequence[int]
) -> list[tuple[list[int], bool, float]]:
    """transformers' n-best for one sentence: (tokens without EOS, ended with EOS, sequence score)."""
    beam_flags = dict(early_stopping=True, length_penalty=case.length_penalty) if case.beam > 1 else {}
    config = GenerationConfig(
        **beam_flags,
        num_beams=case.beam,
        num_return_sequences=case.beam,
        max_new_tokens=max_new_tokens,
        min_new_tokens=case.min_length,
        no_repeat_ngram_size=case.no_repeat_ngram_size,
        eos_token_id=EOS,
        pad_token_id=PAD,
        do_sample=False,
        use_cache=False,
        return_dict_in_generate=True,
        output_scores=True,
    )
    processors = LogitsProcessorList()
    if len(prefix) == 1:  # what NLLB does for the target language: transformers' own processor
        config.forced_bos_token_id = prefix[0]
    elif prefix:
        processors.append(ForcedTokens(prefix))
    if case.forced_eos == "zero_score":
        if len(prefix) > 1:  # after the prefix processor, as the search orders its rules
            processors.append(ForcedEOSTokenLogitsProcessor(max_new_tokens + 1, EOS))
        else:
            config.forced_eos_token_id = EOS
    out = StandIn().generate(torch.tensor([[PROMPTS[sentence]]]), generation_config=config, logits_processor=processors)
    scores = out.sequences_scores.tolist() if case.beam > 1 else [0.0]
    results = []
    for row, score in zip(out.sequences.tolist(), scores, strict=True):
        generated = row[1:]
        eos = EOS in generated
        tokens = generated[: generated.index(EOS)] if eos else [t for t in generated if t != PAD]
        if score > PLACEHOLDER:
            results.append((tokens, eos, score))
    return results


def ours(hyps: list[Hypothesis], case: Case) -> list[tuple[list[int], bool, float]]:
    """As ``generate`` gives them: transformers ranks float32 scores divided by a float32 length term."""
    lp = case.length_penalty
    return [(h.tokens, h.eos, float(np.float32(h.score) / np.float32(h.length**lp))) for h in hyps]


def run_search(case: Case, max_lengths: list[int], prefixes: list[tuple[int, ...]]) -> list[list[Hypothesis]]:
    options = SearchOptions(
        beam_size=case.beam,
        num_hypotheses=case.beam,
        length_penalty=case.length_penalty,
        min_length=case.min_length,
        no_repeat_ngram_size=case.no_repeat_ngram_size,
    )
    decoder = StandInDecoder(len(max_lengths))
    return search(
        decoder, max_lengths, options, bos_id=PROMPTS[0], eos_id=EOS, prefixes=prefixes, forced_eos=case.forced_eos
    )


def compare(case: Case, max_lengths: list[int], prefixes: list[tuple[int, ...]]) -> list[list[Hypothesis]]:
    """Runs the search on the whole batch and transformers on each sentence alone; returns the search's."""
    results = run_search(case, max_lengths, prefixes)
    for s, hyps in enumerate(results):
        expected = generate(s, case, max_lengths[s], prefixes[s])
        got = ours(hyps, case)
        assert [(t, e) for t, e, _ in got] == [(t, e) for t, e, _ in expected], f"sentence {s}"
        if case.beam > 1:  # greedy generate gives no sequence scores
            assert [score for *_, score in got] == [score for *_, score in expected], f"sentence {s}"
    return results


MAX_LENGTHS = [9, 1, 4, 12, 2, 7, 10, 6]
PREFIXES = [(LANGS[0],), (LANGS[1],), (), (LANGS[2],), (LANGS[0],), (LANGS[1],), (), (LANGS[0],)]


@pytest.mark.parametrize("forced_eos", ["zero_score", "off"])
@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 1.0, 1.4])
@pytest.mark.parametrize("beam", [1, 4])
def test_search_equals_transformers_generate(beam: int, length_penalty: float, forced_eos: ForcedEosMode) -> None:
    """A batch with a different target-language token per sentence (and none), some sentences ending
    before their cap and some reaching it: every n-best list as transformers gives it, in order, with
    the same float32 scores."""
    results = compare(Case(beam, forced_eos, length_penalty), MAX_LENGTHS, PREFIXES)
    hyps = [h for r in results for h in r]
    assert any(h.length < n for r, n in zip(results, MAX_LENGTHS, strict=True) for h in r), "none ended early"
    assert any(h.length == n for r, n in zip(results, MAX_LENGTHS, strict=True) for h in r), "none reached its cap"
    assert all(h.eos for h in hyps) == (forced_eos == "zero_score")


@pytest.mark.filterwarnings("ignore:Unfeasible length constraints")  # min_length above some caps, on purpose
@pytest.mark.parametrize(("min_length", "no_repeat_ngram_size"), [(6, 0), (0, 1)])
@pytest.mark.parametrize("beam", [1, 3])
def test_min_length_and_no_repeat_ngram_equal_transformers(
    beam: int, min_length: int, no_repeat_ngram_size: int
) -> None:
    """min_length as transformers' min_new_tokens (its min_length counts the decoder prompt too); the
    n-gram ban sees the forced prefix, as transformers' sees all of the sequence."""
    changed = []
    for forced_eos in ("zero_score", "off"):
        results = compare(Case(beam, forced_eos, 0.8, min_length, no_repeat_ngram_size), MAX_LENGTHS, PREFIXES)
        plain = run_search(Case(beam, forced_eos, 0.8), MAX_LENGTHS, PREFIXES)
        changed.append([[h.tokens for h in r] for r in results] != [[h.tokens for h in r] for r in plain])
    assert any(changed), "the option must change some hypothesis for the comparison to mean anything"


@pytest.mark.parametrize("forced_eos", ["zero_score", "off"])
@pytest.mark.parametrize("beam", [1, 4])
def test_longer_prefixes_equal_transformers_forcing_them_one_step_at_a_time(
    beam: int, forced_eos: ForcedEosMode
) -> None:
    prefixes = [(LANGS[0], 20, 21), (), (LANGS[1], 25), (LANGS[2], 30, 12, 13), (LANGS[0], 20, 21), (LANGS[1],)]
    results = compare(Case(beam, forced_eos, 1.0), [9, 5, 2, 12, 3, 7], prefixes)
    assert results[3][0].tokens[:4] == [LANGS[2], 30, 12, 13]


TINY = dict(
    vocab_size=64,
    d_model=16,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=32,
    decoder_ffn_dim=32,
    max_position_embeddings=64,
    forced_eos_token_id=None,  # generate() would fill an unset forced_eos_token_id from the model's config
)
# The key-value cache's keyword: `past_key_values` up to transformers 5.23, `cache` from 5.24 on.
CACHE = "cache" if "cache" in inspect.signature(MarianMTModel.forward).parameters else "past_key_values"


def tiny_model(architecture: str) -> PreTrainedModel:
    """Random weights, peaked enough that no two continuations nearly tie. Random weights alone never
    make EOS likely: its logit is set to rise past the row's best as the decoder length passes the
    source length (read off the attention mask), so that sentences end at different steps."""
    if architecture == "marian":
        base, config = MarianMTModel, MarianConfig(**TINY, pad_token_id=63, eos_token_id=0, decoder_start_token_id=63)
    else:
        config = M2M100Config(**TINY, pad_token_id=1, eos_token_id=2, bos_token_id=0, decoder_start_token_id=2)
        base = M2M100ForConditionalGeneration

    class EosRamp(base):
        def forward(self, *args: object, attention_mask: torch.Tensor, **kwargs: object) -> object:
            out = super().forward(*args, attention_mask=attention_mask, **kwargs)
            logits = out.logits[:, -1]
            length = kwargs[CACHE].get_seq_length()  # decoder tokens so far, this step's included
            due = attention_mask.sum(dim=-1) + 1.5  # never a whole number: EOS never ties with the best
            logits[:, self.config.eos_token_id] = logits.max(dim=-1).values + (length - due)
            return out

    torch.manual_seed(0)
    model = EosRamp(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 1.0)
    return model


class CachedDecoder:
    """The search's Decoder over a transformers encoder-decoder, through its key-value cache. Padding
    is banned after log_softmax, as transformers' bad_words_ids does (Marian's checkpoints ban it)."""

    def __init__(self, model: PreTrainedModel, src: torch.Tensor) -> None:
        self.model, self.mask = model, (src != model.config.pad_token_id).long()
        self.encoded = model.get_encoder()(input_ids=src, attention_mask=self.mask).last_hidden_state
        self.row_sentence = torch.arange(len(src))
        self.cache = EncoderDecoderCache(DynamicCache(), DynamicCache())

    def step(self, tokens: np.ndarray, candidates: int, *, full: bool = True) -> Step:
        rows = self.row_sentence
        with torch.no_grad():
            out = self.model(
                encoder_outputs=BaseModelOutput(last_hidden_state=self.encoded[rows]),
                attention_mask=self.mask[rows],
                decoder_input_ids=torch.from_numpy(tokens)[:, None],
                **{CACHE: self.cache},
            )
        log_probs = torch.log_softmax(out.logits[:, -1], dim=-1).numpy()
        log_probs[:, self.model.config.pad_token_id] = -np.inf
        ids = np.argsort(-log_probs, axis=1, kind="stable")[:, :candidates]
        return Step(log_probs if full else None, np.take_along_axis(log_probs, ids, axis=1), ids, None)

    def select(self, rows: np.ndarray, sentences: np.ndarray | None) -> None:
        index = torch.from_numpy(rows)
        self.cache.reorder_cache(index)
        self.row_sentence = self.row_sentence[index]


@pytest.mark.parametrize(("beam", "forced_eos"), [(1, "zero_score"), (1, "off"), (4, "zero_score"), (4, "off")])
@pytest.mark.parametrize("architecture", ["marian", "m2m100"])
def test_search_equals_generate_on_tiny_encoder_decoders(
    architecture: str, beam: int, forced_eos: ForcedEosMode
) -> None:
    """Marian as its checkpoints run (forced_eos_token_id for zero_score, padding banned); M2M100 as
    NLLB does, with a target-language token as forced_bos_token_id. Sources of several lengths, padded."""
    model = tiny_model(architecture)
    config, max_new_tokens = model.config, 8
    src = torch.randint(3, 62, (6, 7), generator=torch.Generator().manual_seed(1))
    for b, length in enumerate([7, 6, 3, 7, 4, 5]):
        src[b, length:] = config.pad_token_id
    lang = 40 if architecture == "m2m100" else None
    beam_flags = dict(early_stopping=True, length_penalty=0.7) if beam > 1 else {}
    generation = GenerationConfig(
        **beam_flags,
        num_beams=beam,
        num_return_sequences=beam,
        max_new_tokens=max_new_tokens,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
        forced_eos_token_id=config.eos_token_id if forced_eos == "zero_score" else None,
        forced_bos_token_id=lang,
        bad_words_ids=[[config.pad_token_id]],
        do_sample=False,
        return_dict_in_generate=True,
        output_scores=True,
    )
    with torch.no_grad():
        out = model.generate(src, attention_mask=(src != config.pad_token_id).long(), generation_config=generation)
    options = SearchOptions(beam_size=beam, num_hypotheses=beam, length_penalty=0.7)
    prefixes = [[lang] if lang is not None else [] for _ in range(len(src))]
    results = search(
        CachedDecoder(model, src),
        [max_new_tokens] * len(src),
        options,
        bos_id=config.decoder_start_token_id,
        eos_id=config.eos_token_id,
        prefixes=prefixes,
        forced_eos=forced_eos,
    )
    scores = out.sequences_scores.tolist() if beam > 1 else [None] * len(out.sequences)
    expected = []
    for row, score in zip(out.sequences.tolist(), scores, strict=True):
        generated = row[1:]
        eos = config.eos_token_id in generated
        end = generated.index(config.eos_token_id) if eos else max_new_tokens
        expected.append((generated[:end], eos, score))
    got = [(h.tokens, h.eos, h.normalized_score if beam > 1 else None) for hyps in results for h in hyps]
    assert [(t, e) for t, e, _ in got] == [(t, e) for t, e, _ in expected]
    assert [score for *_, score in got] == pytest.approx([score for *_, score in expected], abs=1e-5)
    lengths = {h.length for hyps in results for h in hyps}
    assert min(lengths) < max_new_tokens == max(lengths), "some sentences must end early, some reach the cap"
