"""Tiny Hugging Face translation checkpoints, built locally in seconds, for tests and benchmarks.

Each builder writes, with ``save_pretrained``, a randomly initialised (fixed seed) model and a real
sentencepiece tokenizer trained on the first lines of a corpus directory in the Multi30K layout
(``train.en``, ``train.de``, ...), laid out as the Hub checkpoints of that family are:

- ``build_marian``: MarianMT (OPUS-MT): ``source.spm`` and ``target.spm`` (unigram), ``vocab.json``
  with ``</s>`` 0, ``<unk>`` 1, the pieces of both models and ``<pad>`` last (or, with
  ``separate_vocabs``, ``vocab.json`` and ``target_vocab.json``, one per side), and OPUS-MT's
  generation config.
- ``build_nllb``: M2M100 with the NLLB tokenizer: ``sentencepiece.bpe.model`` (BPE) with fairseq's
  ids (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, pieces shifted by one), NLLB's language codes
  as special tokens after the pieces, and NLLB's generation config.

A random decoder never ends its outputs by itself; ``end_by_source_length`` rewires a few weights
so that they end after about ``length_ratio`` (0.7) x as many tokens as the source has.

This module imports torch and transformers; the engine and the service never import it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm
import torch
from transformers import (
    AutoTokenizer,
    GenerationConfig,
    M2M100Config,
    M2M100ForConditionalGeneration,
    MarianConfig,
    MarianMTModel,
    MarianTokenizer,
    PreTrainedConfig,
)
from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

# The corpus file suffix of each NLLB language code that ``build_nllb`` trains on by default.
NLLB_LANGUAGES = {"eng_Latn": "en", "deu_Latn": "de", "fra_Latn": "fr", "ces_Latn": "cs"}
# Token embeddings smaller than the other weights (TinyDims.init_std): a random decoder's logits
# would otherwise favour the token it has just read, tied embeddings being what they are.
EMBEDDING_STD = 0.02
# The calibration in end_by_source_length:
CALIBRATION_SENTENCES = 64
CALIBRATION_STEPS = 48  # decoder positions it looks at (more than the outputs have)
CALIBRATION_ROUNDS = 4  # for the head's weight, whose effect the layer norms make nonlinear
LOGIT_STD = 2.0  # spread of the calibrated model's logits: peaked enough that beams rarely tie
LOGITS_PER_STEP = 1.0  # how fast EOS gains on the best other token around the intended length

Model = MarianMTModel | M2M100ForConditionalGeneration


@dataclass(frozen=True)
class TinyDims:
    """Model sizes: small enough to build in seconds and to decode a sentence in milliseconds."""

    d_model: int = 64
    layers: int = 2  # encoder and decoder each
    heads: int = 4
    ffn: int = 128
    vocab_size: int = 1000  # pieces per sentencepiece model (fewer if the text has too few)
    max_positions: int = 256

    @property
    def init_std(self) -> float:
        """Weights of 1/sqrt(d_model): each sublayer moves the residual stream as much as the
        embeddings do, so that outputs depend on the source (transformers' 0.02 leaves a tiny
        model's cross-attention with almost no say)."""
        return self.d_model**-0.5

    def config(self) -> dict[str, int | float]:
        """The arguments that MarianConfig and M2M100Config share."""
        return {
            "d_model": self.d_model,
            "encoder_layers": self.layers,
            "decoder_layers": self.layers,
            "encoder_attention_heads": self.heads,
            "decoder_attention_heads": self.heads,
            "encoder_ffn_dim": self.ffn,
            "decoder_ffn_dim": self.ffn,
            "max_position_embeddings": self.max_positions,
            "init_std": self.init_std,
            "scale_embedding": True,
        }


def read_corpus(corpus: Path, language: str, lines: int) -> list[str]:
    """The first ``lines`` non-empty lines of ``corpus/train.{language}``."""
    path = corpus / f"train.{language}"
    text = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return text[:lines]


def train_sentencepiece(texts: Sequence[str], *, model_type: str, vocab_size: int) -> bytes:
    """A sentencepiece model with its default special ids (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2), as
    OPUS-MT and NLLB ship them; deterministic for the same text."""
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=1.0,
        hard_vocab_limit=False,  # a small corpus gets a smaller vocabulary instead of an error
        input_sentence_size=0,
        shuffle_input_sentence=False,
        num_threads=1,
        minloglevel=2,
    )
    return buffer.getvalue()


def _pieces(model: bytes) -> list[str]:
    """The pieces of a sentencepiece model after its three special ones."""
    sp = spm.SentencePieceProcessor(model_proto=model)
    return [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())]


def marian_vocab(*models: bytes, codes: Sequence[str] = (), size: int = 0) -> dict[str, int]:
    """OPUS-MT's vocabulary but for ``<pad>``: ``</s>`` 0, ``<unk>`` 1, a multilingual model's target
    language tokens (``>>fra<<`` for each of ``codes``), every piece of ``models`` once, then, up to
    ``size`` entries, filler pieces that no model produces (a model of OPUS-MT's size from a small
    corpus: they cost what real pieces do in the output layer, and decode as text)."""
    vocab = {"</s>": 0, "<unk>": 1}
    for code in codes:
        vocab[f">>{code}<<"] = len(vocab)
    for model in models:
        for piece in _pieces(model):
            vocab.setdefault(piece, len(vocab))
    fillers = (f"▁filler{i}" for i in range(size))
    while len(vocab) < size:
        vocab.setdefault(next(fillers), len(vocab))
    return vocab


def build_marian(
    out_dir: Path,
    corpus: Path,
    *,
    source_language: str = "en",
    target_language: str = "de",
    lines: int = 3000,
    dims: TinyDims = TinyDims(),
    separate_vocabs: bool = False,
    vocab_entries: int = 0,
    target_codes: Sequence[str] = (),
    length_ratio: float = 0.7,
    seed: int = 0,
) -> Path:
    """Write a tiny MarianMT checkpoint to ``out_dir`` (returned). ``separate_vocabs``: one
    vocabulary per side (``vocab.json``, ``target_vocab.json``) and separate embeddings, else one
    joint vocabulary and shared embeddings. ``vocab_entries``: each vocabulary's size without
    ``<pad>``, filled up by ``marian_vocab``. ``target_codes``: a multilingual model's target
    languages, as OPUS-MT names them (``fra``), each with its token for the source text.
    ``length_ratio``: see ``end_by_source_length``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    source_text = read_corpus(corpus, source_language, lines)
    source_spm = train_sentencepiece(source_text, model_type="unigram", vocab_size=dims.vocab_size)
    target_spm = train_sentencepiece(
        read_corpus(corpus, target_language, lines), model_type="unigram", vocab_size=dims.vocab_size
    )
    (out_dir / "source.spm").write_bytes(source_spm)
    (out_dir / "target.spm").write_bytes(target_spm)
    # <pad> comes last, as in OPUS-MT; the model has one pad id, so with two vocabularies it takes
    # the first id after both (the shorter one then has ids without a piece).
    if separate_vocabs:
        source_vocab = marian_vocab(source_spm, codes=target_codes, size=vocab_entries)
        target_vocab = marian_vocab(target_spm, size=vocab_entries)
        source_vocab["<pad>"] = target_vocab["<pad>"] = max(len(source_vocab), len(target_vocab))
        _write_json(out_dir / "target_vocab.json", target_vocab)
    else:
        source_vocab = target_vocab = marian_vocab(source_spm, target_spm, codes=target_codes, size=vocab_entries)
        source_vocab["<pad>"] = len(source_vocab)
    _write_json(out_dir / "vocab.json", source_vocab)
    tokenizer = MarianTokenizer(
        source_spm=str(out_dir / "source.spm"),
        target_spm=str(out_dir / "target.spm"),
        vocab=str(out_dir / "vocab.json"),
        target_vocab_file=str(out_dir / "target_vocab.json") if separate_vocabs else None,
        source_lang=source_language,
        target_lang=target_language,
        separate_vocabs=separate_vocabs,
    )
    tokenizer.save_pretrained(out_dir)

    pad, eos = source_vocab["<pad>"], source_vocab["</s>"]
    config = MarianConfig(
        vocab_size=pad + 1,
        decoder_vocab_size=pad + 1,
        share_encoder_decoder_embeddings=not separate_vocabs,
        activation_function="swish",
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        forced_eos_token_id=eos,
        **dims.config(),
    )
    generation = GenerationConfig(  # as OPUS-MT checkpoints carry it
        bad_words_ids=[[pad]],
        bos_token_id=eos,
        decoder_start_token_id=pad,
        eos_token_id=eos,
        forced_eos_token_id=eos,
        max_length=512,
        num_beams=4,
        pad_token_id=pad,
        renormalize_logits=True,
    )
    calibration = tokenizer(source_text[:CALIBRATION_SENTENCES], return_tensors="pt", padding=True)
    _save_model(out_dir, MarianMTModel, config, generation, dict(calibration), length_ratio, seed)
    return out_dir


def build_nllb(
    out_dir: Path,
    corpus: Path,
    *,
    languages: dict[str, str] | None = None,
    lines: int = 1000,
    dims: TinyDims = TinyDims(),
    length_ratio: float = 0.7,
    seed: int = 0,
) -> Path:
    """Write a tiny M2M100 checkpoint with the NLLB tokenizer to ``out_dir`` (returned).

    ``languages`` maps NLLB codes to corpus suffixes (default ``NLLB_LANGUAGES``): the sentencepiece
    model learns from ``lines`` lines of each; the tokenizer knows all of NLLB's language codes.
    ``length_ratio``: see ``end_by_source_length``.
    """
    languages = languages or NLLB_LANGUAGES
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = {code: read_corpus(corpus, suffix, lines) for code, suffix in languages.items()}
    (out_dir / "sentencepiece.bpe.model").write_bytes(
        train_sentencepiece([line for t in texts.values() for line in t], model_type="bpe", vocab_size=dims.vocab_size)
    )
    # Loaded from a sentencepiece model alone, the tokenizer would take the model's control pieces
    # as its special tokens; NLLB's tokenizer_config.json names the language codes instead.
    source_language = next(iter(languages))
    _write_json(
        out_dir / "tokenizer_config.json",
        {
            "tokenizer_class": "NllbTokenizer",
            "additional_special_tokens": FAIRSEQ_LANGUAGE_CODES,
            "src_lang": source_language,
        },
    )
    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)

    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    config = M2M100Config(
        # NLLB's embeddings have spare rows too (256206 for 256204 tokens): ids no token has.
        vocab_size=len(tokenizer) + 2,
        pad_token_id=pad,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        decoder_start_token_id=eos,
        **dims.config(),
    )
    generation = GenerationConfig(  # as NLLB checkpoints carry it: no forced EOS
        bos_token_id=tokenizer.bos_token_id,
        decoder_start_token_id=eos,
        eos_token_id=eos,
        max_length=200,
        pad_token_id=pad,
    )
    calibration = tokenizer(texts[source_language][:CALIBRATION_SENTENCES], return_tensors="pt", padding=True)
    _save_model(out_dir, M2M100ForConditionalGeneration, config, generation, dict(calibration), length_ratio, seed)
    return out_dir


def _save_model(
    out_dir: Path,
    model_class: type[Model],
    config: PreTrainedConfig,
    generation: GenerationConfig,
    calibration: dict[str, torch.Tensor],
    length_ratio: float,
    seed: int,
) -> None:
    torch.manual_seed(seed)
    model = model_class(config).eval()
    with torch.no_grad():
        for embedding in (model.get_encoder().embed_tokens, model.get_decoder().embed_tokens):
            embedding.weight.normal_(0.0, EMBEDDING_STD)
            embedding.weight[config.pad_token_id] = 0.0
    end_by_source_length(model, calibration, length_ratio=length_ratio)
    model.generation_config = generation
    model.save_pretrained(out_dir)


@dataclass(frozen=True)
class _Channels:
    """Model dimensions that only position embeddings feed (no token embedding, no sublayer)."""

    target: int  # rises with the position: the decoder counts its output with it
    source: int  # rises with the position too: the encoder marks how long the source is
    # About 0: layer norms subtract the same mean from these as from the others, so that
    # differences are exact. Each side has its own, since EOS (also a source token and NLLB's
    # decoder start) embeds the target one.
    target_reference: int
    source_reference: int

    def all(self) -> list[int]:
        return [self.target, self.source, self.target_reference, self.source_reference]


def end_by_source_length(model: Model, calibration: dict[str, torch.Tensor], *, length_ratio: float) -> None:
    """Make a random model end its outputs after about ``length_ratio`` x the source's token count.

    A constant EOS bias does not do it: a random decoder's logits barely change from step to step,
    so EOS is either the best token at the first step or at none. Instead the EOS logit grows with
    the target position and shrinks with the source length:

    - four dimensions carry positions only (``_Channels``): no token embedding has them and no
      sublayer writes them, so the residual streams keep the position embeddings' values there;
    - head 0 of the last decoder layer's cross-attention attends uniformly over the source, so
      that it averages the source channel (larger for longer sources), and subtracts that from the
      target channel;
    - EOS's logit gains the target channel minus its reference (the output projection is tied to the
      embeddings; the final layer norm's weights make the difference): layer norms subtract the
      same mean from both, which the difference cancels. Marian's layer norms on the residual
      stream are made to pass the channels unscaled (``_pass_through_norms``).

    On ``calibration`` (a tokenized batch of sources), teacher-forced on the model's greedy output
    with EOS suppressed, least squares give how that difference depends on target position and
    source length. The head's weight is set so that a source token counts as ``length_ratio``
    steps, then the final layer norm's weights and bias on the two channels so that the EOS logit
    overtakes the mean best other logit there, gaining ``LOGITS_PER_STEP`` per step. The tokens' own
    logits and beam search make the actual lengths vary around that. Before that, the final layer
    norm's other dimensions are scaled so that the logits spread by ``LOGIT_STD``.
    """
    channels = _position_channels(model)
    head = _wire_channels(model, channels)
    norm = _final_norm(model)
    eos_reads = [channels.target, channels.target_reference]
    with torch.no_grad():
        _pass_through_norms(model, calibration, channels)
        scale = _rounded(
            LOGIT_STD / _measure(model, calibration, _random_targets(model, calibration), channels)[2].std()
        )
        norm.weight *= scale
        norm.bias *= scale
        norm.weight[eos_reads], norm.bias[eos_reads] = 1.0, 0.0
        # What follows changes the EOS logit only, so the path the model takes otherwise stays.
        targets = _greedy_targets(model, calibration)
        for _ in range(CALIBRATION_ROUNDS):
            by_position, by_source = _fit(model, calibration, targets, channels)[:2]
            weight = head.weight[channels.target, 0].item()
            head.weight[channels.target, 0] = _rounded(weight * length_ratio * by_position / -by_source)
        by_position, _, intercept, best_other = _fit(model, calibration, targets, channels)
        # EOS reads both channels with weight 1 (so that its own embedding cancels out where it
        # is an input); the layer norm's opposite weights make that the difference.
        weight = _rounded(LOGITS_PER_STEP / by_position)
        norm.weight[channels.target], norm.weight[channels.target_reference] = weight, -weight
        norm.bias[channels.target] = _rounded(best_other - weight * intercept)


def _position_channels(model: Model) -> _Channels:
    """The two dimensions whose position embeddings rise the most, monotonically, over the
    calibrated positions, and the two whose embeddings stay closest to 0 (a layer norm divides the
    channels by a spread that varies from token to token: a reference far from 0 would turn that
    into noise in the differences)."""
    table = model.get_decoder().embed_positions
    # M2M100's position ids start after its padding index; Marian's table starts at position 0.
    rows = table.weights[table.offset :] if hasattr(table, "offset") else table.weight
    rows = rows[:CALIBRATION_STEPS]
    rise = torch.where((rows.diff(dim=0) > 0).all(dim=0), rows[-1] - rows[0], -1.0)
    target, source = rise.topk(2).indices.tolist()
    size = rows.abs().max(dim=0).values
    size[[target, source]] = torch.inf
    target_reference, source_reference = size.topk(2, largest=False).indices.tolist()
    return _Channels(target, source, target_reference, source_reference)


def _wire_channels(model: Model, channels: _Channels) -> torch.nn.Linear:
    """Clear the channels of token embeddings and sublayer outputs; EOS reads target - its
    reference; head 0 of the last decoder layer's cross-attention averages source - its reference
    over the source and subtracts that from target. Returns that head's output projection."""
    encoder, decoder = model.get_encoder(), model.get_decoder()
    cleared = channels.all()
    with torch.no_grad():
        for embedding in (encoder.embed_tokens, decoder.embed_tokens, model.get_output_embeddings()):
            embedding.weight[:, cleared] = 0.0  # tied embeddings are cleared twice, harmlessly
        eos = model.get_output_embeddings().weight[model.config.eos_token_id]
        eos[channels.target] = eos[channels.target_reference] = 1.0
        for layer in [*encoder.layers, *decoder.layers]:
            writers = [layer.self_attn.out_proj, layer.fc2]
            if hasattr(layer, "encoder_attn"):
                writers.append(layer.encoder_attn.out_proj)
            for linear in writers:
                linear.weight[cleared] = 0.0
                linear.bias[cleared] = 0.0
        # Head 0 carries nothing else, lest its output, an average, change the layer norms'
        # spread with the source length.
        attention = decoder.layers[-1].encoder_attn
        head = slice(0, attention.head_dim)
        for linear in (attention.q_proj, attention.v_proj):
            linear.weight[head] = 0.0  # q: equal scores, a uniform average over the source
            linear.bias[head] = 0.0
        attention.v_proj.weight[0, channels.source] = 1.0
        attention.v_proj.weight[0, channels.source_reference] = -1.0
        attention.out_proj.weight[:, head] = 0.0
        attention.out_proj.weight[channels.target, 0] = -1.0
    return attention.out_proj


def _pass_through_norms(model: Model, calibration: dict[str, torch.Tensor], channels: _Channels) -> None:
    """Marian normalizes the residual stream after every sublayer, dividing the channels by the
    spread of its input each time, which would leave little of them after a few layers: these
    norms weight the channels by the spread they see on ``calibration`` instead. (M2M100 normalizes
    only sublayer inputs and the final outputs, which the calibration accounts for.)"""
    if isinstance(model, M2M100ForConditionalGeneration):
        return
    encoder, decoder = model.get_encoder(), model.get_decoder()
    norms = [layer.self_attn_layer_norm for layer in [*encoder.layers, *decoder.layers]]
    norms += [layer.final_layer_norm for layer in [*encoder.layers, *decoder.layers]]
    norms += [layer.encoder_attn_layer_norm for layer in decoder.layers]
    spreads: dict[torch.nn.Module, torch.Tensor] = {}

    def record(norm: torch.nn.Module, args: tuple[torch.Tensor, ...], _: torch.Tensor) -> None:
        spreads[norm] = args[0].std(dim=-1).mean()

    hooks = [norm.register_forward_hook(record) for norm in norms]
    try:
        model(**calibration, decoder_input_ids=_random_targets(model, calibration))
    finally:
        for hook in hooks:
            hook.remove()
    for norm in norms:
        norm.weight[channels.all()] = _rounded(spreads[norm])


def _final_norm(model: Model) -> torch.nn.LayerNorm:
    """The layer norm whose output the output projection reads (M2M100 is pre-norm, Marian post-norm)."""
    decoder = model.get_decoder()
    return decoder.layer_norm if hasattr(decoder, "layer_norm") else decoder.layers[-1].final_layer_norm


def _random_targets(model: Model, calibration: dict[str, torch.Tensor]) -> torch.Tensor:
    """Decoder inputs: the start token, then random tokens."""
    generator = torch.Generator().manual_seed(0)
    shape = (len(calibration["input_ids"]), CALIBRATION_STEPS)
    targets = torch.randint(model.config.vocab_size, shape, generator=generator)
    targets[:, 0] = model.config.decoder_start_token_id
    return targets


def _greedy_targets(model: Model, calibration: dict[str, torch.Tensor]) -> torch.Tensor:
    """Decoder inputs: the start token, then the model's greedy choices other than EOS."""
    eos = model.config.eos_token_id
    return model.generate(
        **calibration,
        do_sample=False,
        num_beams=1,
        max_new_tokens=CALIBRATION_STEPS - 1,
        suppress_tokens=[eos],
        forced_eos_token_id=None,
    )


def _measure(
    model: Model, calibration: dict[str, torch.Tensor], targets: torch.Tensor, channels: _Channels
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-forced on ``targets``: EOS's channel difference in the final hidden states and the
    best non-EOS logit, (B, T) each, and all non-EOS logits."""
    out = model(**calibration, decoder_input_ids=targets, output_hidden_states=True)
    logits = out.logits.clone()
    logits[..., model.config.eos_token_id] = -torch.inf
    hidden = out.decoder_hidden_states[-1]
    difference = hidden[..., channels.target] - hidden[..., channels.target_reference]
    return difference, logits.max(dim=-1).values, logits[logits.isfinite()]


def _fit(
    model: Model, calibration: dict[str, torch.Tensor], targets: torch.Tensor, channels: _Channels
) -> tuple[float, float, float, float]:
    """Least squares: EOS's channel difference ~ by_position x step + by_source x source length +
    intercept; and the mean best non-EOS logit."""
    difference, best_other, _ = _measure(model, calibration, targets, channels)
    batch, steps = difference.shape
    step = torch.arange(steps, dtype=torch.float).expand(batch, steps)
    source = calibration["attention_mask"].sum(dim=1, keepdim=True).float().expand(batch, steps)
    design = torch.stack([step.flatten(), source.flatten(), torch.ones(batch * steps)], dim=1)
    by_position, by_source, intercept = torch.linalg.lstsq(design, difference.flatten()[:, None]).solution.flatten()
    return by_position.item(), by_source.item(), intercept.item(), best_other.mean().item()


def _rounded(value: float | torch.Tensor) -> float:
    """Three significant digits: measurements vary in their last bits from run to run (the order of
    floating-point sums), the checkpoint should not."""
    return float(f"{float(value):.3g}")


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
