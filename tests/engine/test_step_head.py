"""The head normalised a few rows at a time (engine/step_head.py): the whole head's candidates,
bit for bit, all log-probabilities when asked for, and the engine's translations unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import step_head
from engine.shortlist import add_vocab_ids
from engine.step_head import ALL_LOG_PROBS, with_row_chunked_head
from engine.top_k import top_k_nodes
from export.quantize import quantize_matmuls

OPSET, IR_VERSION = 17, 8  # as tests/engine/test_top_k.py
DIM = 16


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    onnx.checker.check_model(model, full_check=True)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def projection_head(vocab: int) -> onnx.ModelProto:
    """The end of a decoder step as exported: hidden (N, D) -> projection + bias -> LogSoftmax ->
    the chunked TopK."""
    rng = np.random.default_rng(vocab)
    weight = rng.standard_normal((DIM, vocab)).astype(np.float32)
    bias = rng.standard_normal(vocab).astype(np.float32)
    initializers = [numpy_helper.from_array(bias, "bias"), numpy_helper.from_array(weight, "weight")]
    top, constants = top_k_nodes("log_probs", "candidates", "top_log_probs", "top_ids", vocab)
    nodes = [
        helper.make_node("MatMul", ["hidden", "weight"], ["product"]),
        helper.make_node("Add", ["product", "bias"], ["logits"]),
        helper.make_node("LogSoftmax", ["logits"], ["log_probs"], axis=-1),
        *top,
        helper.make_node("ReduceMean", ["hidden"], ["alignment"], axes=[-1]),  # an output beside the head's
    ]
    graph = helper.make_graph(
        nodes,
        "head",
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["N", DIM]),
         helper.make_tensor_value_info("candidates", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, ["N", vocab]),
         helper.make_tensor_value_info("alignment", TensorProto.FLOAT, ["N", 1]),
         helper.make_tensor_value_info("top_log_probs", TensorProto.FLOAT, ["N", "C"]),
         helper.make_tensor_value_info("top_ids", TensorProto.INT64, ["N", "C"])],
        initializers + constants,
    )  # fmt: skip
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def outputs(s: ort.InferenceSession, hidden: np.ndarray, k: int, **extra: np.ndarray) -> dict[str, np.ndarray]:
    names = ["log_probs", "alignment", "top_log_probs", "top_ids"]
    feed = {"hidden": hidden, "candidates": np.array([k]), **extra}
    return dict(zip(names, s.run(names, feed), strict=True))


@pytest.mark.parametrize("vocab", [8000, 7919])
def test_chunks_of_rows_give_every_row_the_whole_head_s_candidates(vocab: int) -> None:
    exported, edited = projection_head(vocab), projection_head(vocab)
    assert with_row_chunked_head(edited, rows=3)
    assert not with_row_chunked_head(edited, rows=3)  # its head is in a branch now
    assert "LogSoftmax" not in {n.op_type for n in edited.graph.node}
    before, after = session(exported), session(edited)
    rng = np.random.default_rng(0)
    for rows in [1, 2, 3, 7, 9]:  # within one chunk, a chunk exactly, and a last chunk in part
        hidden = rng.standard_normal((rows, DIM)).astype(np.float32)
        for k in [1, 4, 9]:
            whole = outputs(before, hidden, k)
            chunked = outputs(after, hidden, k, all_log_probs=np.array(False))
            every = outputs(after, hidden, k, all_log_probs=np.array(True))
            for name, expected in whole.items():
                np.testing.assert_array_equal(every[name], expected)
                if name != "log_probs":
                    np.testing.assert_array_equal(chunked[name], expected)
            assert chunked["log_probs"].shape == (0, vocab)


def test_an_int8_head_gives_every_row_the_whole_head_s_candidates() -> None:
    """The projection as the int8 export quantises it (per-row activations, then the bias)."""
    vocab = 8000
    exported, edited = (quantize_matmuls(projection_head(vocab)) for _ in range(2))
    assert "MatMulIntegerToFloat" in {n.op_type for n in exported.graph.node}
    assert with_row_chunked_head(edited, rows=4)
    before, after = session(exported), session(edited)
    hidden = np.random.default_rng(1).standard_normal((6, DIM)).astype(np.float32)
    whole = outputs(before, hidden, 5)
    chunked = outputs(after, hidden, 5, all_log_probs=np.array(False))
    for name in ["top_log_probs", "top_ids", "alignment"]:
        np.testing.assert_array_equal(chunked[name], whole[name])


def test_small_vocabularies_and_shortlisted_heads_are_left_as_they_are() -> None:
    assert step_head.chunk_rows(8000) >= step_head.MAX_CHUNK_ROWS  # the shipped models' vocabulary
    small = projection_head(8000)
    assert not with_row_chunked_head(small)
    assert ALL_LOG_PROBS not in {i.name for i in small.graph.input}
    assert step_head.chunk_rows(58101) == step_head.MIN_CHUNK_ROWS  # OPUS-MT's: 16 rows, 3.7 MB a tensor
    shortlisted = projection_head(58101)
    add_vocab_ids(shortlisted)
    assert not with_row_chunked_head(shortlisted)


def inputs(translator: object) -> set[str]:
    return {i.name for i in translator.runner.decoder.get_inputs()}  # type: ignore[attr-defined]


@pytest.mark.parametrize("variant", ["fp32", "int8"])
@pytest.mark.parametrize("pool", [False, True])
def test_the_translator_translates_as_before_with_its_head_in_chunks(
    tiny_bundle: Path, monkeypatch: pytest.MonkeyPatch, variant: str, pool: bool
) -> None:
    """The tiny model's 150 pieces made to take chunks of 3 rows: every option that reads all
    log-probabilities (the first step, a glossary) or only the best (the rest) gives the same
    hypotheses and scores as the whole head."""
    from engine.api import TranslationOptions
    from engine.glossary import Glossary, Term
    from engine.translator import Translator, TranslatorConfig

    words = ["a", "the", "man", "woman", "dog", "cat", "child", "red", "big", "runs", "sits", "plays", "in", "park"]
    rng = np.random.default_rng(4)
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 20)))).capitalize() + "." for _ in range(12)]
    cases = [
        TranslationOptions(beam_size=4, num_hypotheses=3, return_alignments=True),
        TranslationOptions(beam_size=1),
        TranslationOptions(beam_size=4, glossary=Glossary((Term("dog", "Hund"),))),
    ]
    config = TranslatorConfig(model_dir=tiny_bundle, provider="cpu", threads=1, variant=variant, pool=pool)
    whole = Translator(config)
    assert ALL_LOG_PROBS not in inputs(whole)
    monkeypatch.setattr(step_head, "CHUNK_BYTES", 0)
    monkeypatch.setattr(step_head, "MIN_CHUNK_ROWS", 3)
    chunked = Translator(config)
    assert ALL_LOG_PROBS in inputs(chunked)
    for options in cases:
        expected = whole.translate_batch(texts, options).results
        got = chunked.translate_batch(texts, options).results
        for g, e in zip(got, expected, strict=True):
            assert [(h.text, h.score) for h in g.hypotheses] == [(h.text, h.score) for h in e.hypotheses]
            assert g.alignment == e.alignment
