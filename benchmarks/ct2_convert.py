"""Convert one of our checkpoints into a CTranslate2 model, so both run the very same weights.

    python -m benchmarks.ct2_convert --checkpoint CKPT --out DIR [--quantization int8] [--force]

The mapping is written here against CTranslate2's specification API (``TransformerSpec`` and its
layer specs); no OpenNMT or fairseq converter is involved. What it has to get right about
``model/transformer.py``:

- pre-norm (or post-norm) residual blocks, each stack closed by a LayerNorm when pre-norm;
- token embeddings scaled by sqrt(d_model) (CTranslate2's ``scale_embeddings``, on by default);
- our *interleaved* sinusoidal table (sin on even, cos on odd features) is passed explicitly:
  CTranslate2's built-in table concatenates sin and cos halves instead, which would not match;
- self-attention Q, K, V projections fused into one matrix, cross-attention K and V fused;
- tied embeddings: the output projection gets the same matrix (CTranslate2 aliases equal weights);
- sentencepiece pieces as the vocabulary, ids unchanged (pad 0, unk 1, bos 2, eos 3), EOS appended
  to the source as our tokenizer does (``add_source_eos``), decoding started from BOS.

``--quantization int8`` stores int8 weights with one scale per output row (CTranslate2's scheme).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import ctranslate2
import numpy as np
import sentencepiece as spm
from ctranslate2.specs import common_spec, transformer_spec
from torch import Tensor, nn

from engine.tokenizer import BOS_ID, EOS_ID, UNK_ID
from model.checkpoint import load_checkpoint, model_from_checkpoint, write_spm
from model.transformer import DecoderLayer, EncoderLayer, MultiHeadAttention, Transformer

QUANTIZATIONS = ("float32", "int8")


def _array(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy().copy()


def _set_linear(spec: common_spec.LinearSpec, *layers: nn.Linear) -> None:
    """One CTranslate2 linear from one or more of ours stacked on the output axis (fused QKV/KV)."""
    spec.weight = np.concatenate([_array(layer.weight) for layer in layers])
    if all(layer.bias is not None for layer in layers):
        spec.bias = np.concatenate([_array(layer.bias) for layer in layers])


def _set_layer_norm(spec: common_spec.LayerNormSpec, norm: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _set_self_attention(spec, attn: MultiHeadAttention, norm: nn.LayerNorm) -> None:
    _set_layer_norm(spec.layer_norm, norm)
    _set_linear(spec.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)
    _set_linear(spec.linear[1], attn.out_proj)


def _set_cross_attention(spec, attn: MultiHeadAttention, norm: nn.LayerNorm) -> None:
    _set_layer_norm(spec.layer_norm, norm)
    _set_linear(spec.linear[0], attn.q_proj)
    _set_linear(spec.linear[1], attn.k_proj, attn.v_proj)
    _set_linear(spec.linear[2], attn.out_proj)


def _set_ffn(spec, layer: EncoderLayer | DecoderLayer) -> None:
    _set_layer_norm(spec.layer_norm, layer.ffn_res.norm)
    _set_linear(spec.linear_0, layer.ffn.fc1)
    _set_linear(spec.linear_1, layer.ffn.fc2)


def transformer_spec_from_model(model: Transformer) -> transformer_spec.TransformerSpec:
    """The CTranslate2 specification of ``model``, weights filled in (vocabularies not yet)."""
    cfg = model.config
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.n_encoder_layers, cfg.n_decoder_layers),
        cfg.n_heads,
        pre_norm=cfg.pre_norm,
        activation=common_spec.Activation.RELU,
    )
    positions = _array(model.positions)  # (max_positions, D), interleaved sin/cos
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = _array(model.src_embed.weight)
    enc.position_encodings.encodings = positions
    dec.embeddings.weight = _array(model.tgt_embed.weight)
    dec.position_encodings.encodings = positions
    _set_linear(dec.projection, model.output_proj)
    if cfg.pre_norm:
        _set_layer_norm(enc.layer_norm, model.encoder_norm)
        _set_layer_norm(dec.layer_norm, model.decoder_norm)
    for layer_spec, layer in zip(enc.layer, model.encoder_layers, strict=True):
        _set_self_attention(layer_spec.self_attention, layer.self_attn, layer.attn_res.norm)
        _set_ffn(layer_spec.ffn, layer)
    for layer_spec, layer in zip(dec.layer, model.decoder_layers, strict=True):
        _set_self_attention(layer_spec.self_attention, layer.self_attn, layer.self_res.norm)
        _set_cross_attention(layer_spec.attention, layer.cross_attn, layer.cross_res.norm)
        _set_ffn(layer_spec.ffn, layer)
    return spec


class CheckpointConverter(ctranslate2.converters.Converter):
    """CTranslate2's converter pipeline (validate, quantize, save, refuse to overwrite) over our mapping."""

    def __init__(self, checkpoint: Path, workdir: Path) -> None:
        self.checkpoint = checkpoint
        self.workdir = workdir  # the sentencepiece model waits here until the spec is saved

    def _load(self) -> transformer_spec.TransformerSpec:
        state = load_checkpoint(self.checkpoint)
        model = model_from_checkpoint(state)
        spm_path = write_spm(state, self.workdir / "spm.model")
        sp = spm.SentencePieceProcessor(model_file=str(spm_path))
        if sp.get_piece_size() != model.config.vocab_size:
            raise ValueError(
                f"{self.checkpoint}: sentencepiece has {sp.get_piece_size()} pieces, "
                f"the model {model.config.vocab_size} embeddings"
            )
        spec = transformer_spec_from_model(model)
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        spec.register_source_vocabulary(pieces)
        spec.register_target_vocabulary(pieces)
        config = spec.config
        config.unk_token, config.bos_token, config.eos_token = pieces[UNK_ID], pieces[BOS_ID], pieces[EOS_ID]
        config.decoder_start_token = pieces[BOS_ID]
        config.add_source_eos = True
        config.layer_norm_epsilon = model.encoder_layers[0].attn_res.norm.eps
        spec.register_file(str(spm_path), "spm.model")  # shipped with the model: clients tokenize with it
        return spec


def convert(checkpoint: Path, out: Path, *, quantization: str = "float32", force: bool = False) -> Path:
    """Write the CTranslate2 model of ``checkpoint`` to ``out`` (``model.bin``, vocabulary, ``spm.model``)."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {QUANTIZATIONS}, got {quantization!r}")
    if not checkpoint.is_file():
        raise FileNotFoundError(f"checkpoint not found: {checkpoint}")
    with tempfile.TemporaryDirectory() as workdir:
        converter = CheckpointConverter(checkpoint, Path(workdir))
        return Path(converter.convert(str(out), quantization=quantization, force=force))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--quantization", choices=QUANTIZATIONS, default="float32")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output directory")
    args = parser.parse_args(argv)
    try:
        out = convert(args.checkpoint, args.out, quantization=args.quantization, force=args.force)
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
