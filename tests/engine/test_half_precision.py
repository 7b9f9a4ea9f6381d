"""The ``fp16`` variant: a bundle's fp32 graphs computed in float16 (``engine.half_precision``).

It exists for CUDA (the last test runs it there, skipped without onnxruntime's CUDA provider).
onnxruntime's CPU kernels take float16 too, so it is checked on the CPU as every path loads it: the
graphs' weights and activations are float16, their inputs and outputs and the log-normaliser and
TopK float32, and the shipped model translates as in float32 but for float16's rounding, through
the rectangles, the row pool, the pool's fixed shapes, a shortlist and the step CUDA's rectangles
run (its row inputs, ``DeviceDecoder``).
"""

from __future__ import annotations

from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from repo_root import REPO
from test_cuda import SHIPPED_SENTENCES, assert_same_translations

from engine.api import TranslationOptions
from engine.beam_search import SearchOptions, search
from engine.bundle import BundleError, load_bundle
from engine.half_precision import half_graph
from engine.runner import (
    DecoderShape,
    DeviceDecoder,
    HostDecoder,
    Runner,
    RunnerConfig,
    decoder_graph,
    load_session,
    pad_batch,
)
from engine.translator import Translator, TranslatorConfig

SHIPPED = REPO / "models" / "en-de" / "bundle"


def float_weights(model: onnx.ModelProto) -> set[int]:
    """The element types of the graph's matrices."""
    return {tensor.data_type for tensor in model.graph.initializer if len(tensor.dims) == 2}


def io_types(model: onnx.ModelProto) -> dict[str, int]:
    return {value.name: value.type.tensor_type.elem_type for value in [*model.graph.input, *model.graph.output]}


def producer(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(node for node in model.graph.node if name in node.output)


@pytest.mark.parametrize("edits", [{}, {"pool": True}, {"cuda": True}, {"cuda": True, "pool": True}])
def test_the_graphs_compute_in_float16_and_keep_float32_at_their_edges(tiny_bundle: Path, edits: dict) -> None:
    encoder_path, decoder_path = load_bundle(tiny_bundle).graph_paths("fp32")
    encoder = onnx.load_model_from_string(half_graph(encoder_path))
    graph = decoder_graph(decoder_path, shortlist=False, half=True, **edits)
    assert graph is not None
    decoder = onnx.load_model_from_string(graph)
    plain = decoder_graph(decoder_path, shortlist=False, **edits)
    exported = [onnx.load(str(encoder_path)), onnx.load_model_from_string(plain) if plain else onnx.load(decoder_path)]
    for half, before in zip((encoder, decoder), exported, strict=True):
        assert float_weights(before) == {TensorProto.FLOAT} and float_weights(half) == {TensorProto.FLOAT16}
        assert io_types(half) == io_types(before)  # the engine feeds and reads what it always has
    log_softmax = next(node for node in decoder.graph.node if node.op_type == "LogSoftmax")
    cast = producer(decoder, log_softmax.input[0])
    assert cast.op_type == "Cast" and cast.attribute[0].i == TensorProto.FLOAT  # logits in float32
    after, reached = [], set(log_softmax.output)  # what reads the log-probabilities: TopK, its chunks
    for node in decoder.graph.node:
        if reached.intersection(node.input):
            after.append(node.op_type)
            reached.update(node.output)
    assert "TopK" in after and "Cast" not in after  # all of it float32, as the log-probabilities are


def assert_near(reference: Translator, half: Translator, options: TranslationOptions) -> None:
    """Float16's rounding may change a close call between candidates, nothing more."""
    assert_same_translations(reference, half, SHIPPED_SENTENCES, options, share=0.85, tolerance=0.05)


@pytest.mark.parametrize(
    "engine", [{}, {"pool": True}, {"pool": True, "cuda_graphs": True}], ids=["rectangles", "pool", "fixed shapes"]
)
def test_the_shipped_model_in_float16_translates_as_in_float32(engine: dict) -> None:
    def translator(variant: str) -> Translator:
        return Translator(TranslatorConfig(model_dir=SHIPPED, provider="cpu", threads=1, variant=variant, **engine))

    reference, half = translator("fp32"), translator("fp16")
    assert half.info.variant == "fp16" and half.info.quality == {}  # fp32's figures are not its own
    assert_near(reference, half, TranslationOptions(beam_size=4, return_alignments=True))
    assert_near(reference, half, TranslationOptions(beam_size=1))
    if not engine.get("cuda_graphs"):
        assert_near(reference, half, TranslationOptions(beam_size=4, shortlist=True))


def test_the_step_cuda_s_rectangles_run_computes_in_float16_on_the_device_path() -> None:
    bundle = load_bundle(SHIPPED)
    d = bundle.manifest.dimensions
    shape = DecoderShape(d.decoder_layers, d.heads, d.d_head, d.vocab_size)
    encoder, decoder = bundle.graph_paths("fp32")
    config = RunnerConfig(provider="cpu", threads=1)
    runner = Runner(encoder, decoder, shape, config)
    half = load_session(decoder, "cpu", config, decoder_graph(decoder, shortlist=False, cuda=True, half=True))
    encoded = runner.encode(pad_batch([[40, 200, 31, 1500, 9, 3], [77, 12, 3], [5, 600, 42, 3]], 0))
    options = SearchOptions(beam_size=4, num_hypotheses=1)
    host = HostDecoder(runner.decoder, encoded, shape, alignments=False)
    full = search(host, [12, 8, 8], options, bos_id=2, eos_id=3)
    bound = DeviceDecoder(half, encoded, shape, alignments=False, device_id=0, device="cpu")
    reduced = search(bound, [12, 8, 8], options, bos_id=2, eos_id=3)
    for a, b in zip(full, reduced, strict=True):
        assert b[0].score == pytest.approx(a[0].score, abs=0.05)
        assert b[0].tokens[:3] == a[0].tokens[:3]


def test_fp16_of_a_bundle_without_fp32_is_a_clear_error(tiny_bundle: Path, tmp_path: Path) -> None:
    manifest = (tiny_bundle / "manifest.json").read_text()
    assert '"fp32"' in manifest
    bundle = tmp_path / "without-fp32"
    bundle.mkdir()
    for path in tiny_bundle.iterdir():
        (bundle / path.name).symlink_to(path)
    (bundle / "manifest.json").unlink()
    (bundle / "manifest.json").write_text(manifest.replace('"fp32"', '"f32"'))
    with pytest.raises(BundleError, match="computes the 'fp32' variant in float16"):
        Translator(TranslatorConfig(model_dir=bundle, provider="cpu", variant="fp16", warmup=False))


@pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers(), reason="onnxruntime has no CUDA provider here"
)
@pytest.mark.parametrize("engine", [{}, {"pool": True, "cuda_graphs": True}], ids=["rectangles", "captured"])
def test_on_the_gpu_float16_translates_as_float32(engine: dict) -> None:
    def translator(variant: str) -> Translator:
        return Translator(TranslatorConfig(model_dir=SHIPPED, provider="cuda", variant=variant, **engine))

    reference, half = translator("fp32"), translator("fp16")
    assert "CUDAExecutionProvider" in half.runner.decoder.get_providers()
    assert_near(reference, half, TranslationOptions(beam_size=4, return_alignments=True, shortlist=False))
    assert_near(reference, half, TranslationOptions(beam_size=1, shortlist=False))
