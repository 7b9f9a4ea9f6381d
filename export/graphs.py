"""The two ONNX graphs of a bundle: the encoder (run once per batch) and one decoder step.

The encoder wraps the model's own ``encode``/``cross_kv``. The step is ``export.decoder_step``:
``decode``'s computation for one new token over 2-D activations, with the model's own modules and
weights, because the traced ``decode`` (any number of new tokens) makes a graph of more than twice
as many nodes, each a kernel launch per step; the parity check compares it with ``decode``. Input/output names
and dynamic axes come from the signatures in ``engine.bundle``, the one definition of the contract
the engine relies on.

Exporter choice: the TorchScript-based ``torch.onnx.export(..., dynamo=False)``. The dynamo exporter
of torch 2.13 also produces correct graphs with these dynamic shapes, but is much slower to run
and needs opset 18; the traced graphs are verified by the parity check, including batch, source
and cache lengths other than the traced ones.

Shapes: B sentences, N = B*K decoder rows, S source length, P cached positions, L decoder layers,
H heads, Dh head size, V vocabulary. Keys/values are one tensor per layer (``cross_k_0`` ...), in
the order of ``engine.bundle``'s signatures: all keys, then all values.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import torch
from onnx import helper
from torch import Tensor, nn

from engine.bundle import DYNAMIC_DIMS, TensorSpec, decoder_signature, encoder_signature
from engine.top_k import top_k_nodes
from export.decoder_step import DecoderStep, OutputConstraints
from model.transformer import Transformer

OPSET = 17


class EncoderGraph(nn.Module):
    """src_ids (B, S) -> L cross keys, L cross values (B, H, S, Dh), src_mask (B, S)."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src_ids: Tensor) -> tuple[Tensor, ...]:
        memory, src_mask = self.model.encode(src_ids)
        cross_k, cross_v = self.model.cross_kv(memory)
        return *cross_k, *cross_v, src_mask


def dynamic_axes(specs: tuple[TensorSpec, ...]) -> dict[str, dict[int, str]]:
    # ONNX dimension names must be identifiers: "P+1" becomes "P_plus_1".
    return {
        s.name: {axis: dim.replace("+", "_plus_") for axis, dim in enumerate(s.dims) if dim in DYNAMIC_DIMS}
        for s in specs
    }


def _example_inputs(model: Transformer) -> tuple[Tensor, ...]:
    """Trace inputs whose sizes are all distinct and > 1 (B=2, K=2, S=5, P=3), so that no dynamic
    axis is mistaken for a constant by the tracer."""
    cfg = model.config
    L, H, Dh = cfg.n_decoder_layers, cfg.n_heads, cfg.d_head
    B, N, S, P = 2, 4, 5, 3
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(4, cfg.vocab_size, (B, S), generator=gen)
    src[1, -2:] = cfg.pad_id
    with torch.no_grad():
        source_side = EncoderGraph(model)(src)
    tokens = torch.randint(4, cfg.output_vocab_size, (N, 1), generator=gen)
    caches = [torch.randn(N, H, P, Dh, generator=gen) for _ in range(2 * L)]
    return src, tokens, *caches, *source_side


def _export(module: nn.Module, args: tuple[Tensor, ...], path: Path, inputs: tuple, outputs: tuple) -> None:
    with warnings.catch_warnings():
        # Expected and harmless here: the legacy exporter's deprecation notice, and the tracer's
        # note that sqrt(d_head) becomes a constant (d_head is fixed by the model).
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=[s.name for s in inputs],
            output_names=[s.name for s in outputs],
            dynamic_axes=dynamic_axes(inputs + outputs),
            do_constant_folding=True,
        )


def export_graphs(
    model: Transformer,
    out_dir: Path,
    *,
    alignment_layer: int,
    alignment_heads: int,
    constraints: OutputConstraints | None = None,
) -> tuple[Path, Path]:
    """Write ``encoder.onnx`` and ``decoder.onnx`` for ``model`` into ``out_dir``; the step's
    log-probabilities go through ``constraints`` (banned tokens)."""
    # The wrappers must be in eval mode too: the exporter restores each wrapper's mode afterwards,
    # and a wrapper in training mode would switch the wrapped model (its dropout) back on.
    model.eval()
    encoder = EncoderGraph(model).eval()
    decoder = DecoderStep(
        model, alignment_layer=alignment_layer, alignment_heads=alignment_heads, constraints=constraints
    ).eval()
    src, *decoder_args = _example_inputs(model)
    encoder_path, decoder_path = out_dir / "encoder.onnx", out_dir / "decoder.onnx"
    layers = model.config.n_decoder_layers
    _export(encoder, (src,), encoder_path, *encoder_signature(layers))
    inputs, outputs = decoder_signature(layers)
    top_k_input, top_k_outputs = inputs[-1:], outputs[-2:]
    _export(decoder, tuple(decoder_args), decoder_path, inputs[:-1], outputs[:-2])
    _append_top_k(decoder_path, top_k_input, top_k_outputs)
    return encoder_path, decoder_path


def _append_top_k(path: Path, inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> None:
    """Add ``top_k_nodes`` over ``log_probs`` to the exported step graph: each row's best ``candidates``.

    Added as ONNX nodes rather than traced, because the tracer would freeze ``torch.topk``'s k
    to the traced value; TopK takes k as a graph input.
    """
    elem = {"float": onnx.TensorProto.FLOAT, "int64": onnx.TensorProto.INT64}
    # The weights stay where the exporter put them: in the graph, or (over 2 GB) in files beside it.
    graph = onnx.load(str(path), load_external_data=False)
    (k,) = inputs
    graph.graph.input.append(helper.make_tensor_value_info(k.name, elem[k.dtype], [int(d) for d in k.dims]))
    values, ids = outputs
    log_probs = next(o for o in graph.graph.output if o.name == "log_probs")
    vocab = log_probs.type.tensor_type.shape.dim[1].dim_value  # (N, V)
    nodes, constants = top_k_nodes("log_probs", k.name, values.name, ids.name, vocab)
    graph.graph.node.extend(nodes)
    graph.graph.initializer.extend(constants)
    for spec in outputs:
        graph.graph.output.append(helper.make_tensor_value_info(spec.name, elem[spec.dtype], list(spec.dims)))
    onnx.save(graph, str(path))
    onnx.checker.check_model(str(path))  # by path: a graph in memory cannot be checked past 2 GB
