"""The chunked TopK (``engine.top_k``): the same candidates as one TopK, as nodes built for an export
and as the edit the engine makes to a graph exported with one TopK."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from repo_root import REPO

from engine.runner import decoder_graph
from engine.top_k import chunk_width, top_k_nodes, with_chunked_top_k

OPSET = 17
# onnx's default IR version can be newer than the pinned onnxruntime-gpu reads (IR 14 against 13)
IR_VERSION = 8
SHIPPED = REPO / "models" / "en-de" / "bundle"


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    onnx.checker.check_model(model, full_check=True)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def top_k_model(vocab: int) -> onnx.ModelProto:
    """``top_k_nodes`` alone: scores (N, vocab), k -> values, ids."""
    nodes, constants = top_k_nodes("scores", "k", "values", "ids", vocab)
    graph = helper.make_graph(
        nodes,
        "top_k",
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", vocab]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("values", TensorProto.FLOAT, ["N", "k"]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "k"])],
        constants,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def single_top_k_head(vocab: int) -> onnx.ModelProto:
    """The end of a decoder-step graph as exported before the chunked TopK: logits -> LogSoftmax ->
    ``log_probs`` -> one TopK of ``candidates`` -> ``top_log_probs``, ``top_ids``."""
    graph = helper.make_graph(
        [helper.make_node("LogSoftmax", ["logits"], ["log_probs"], axis=-1),
         helper.make_node("TopK", ["log_probs", "candidates"], ["top_log_probs", "top_ids"], name="/TopK", axis=-1)],
        "head",
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", vocab]),
         helper.make_tensor_value_info("candidates", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, ["N", vocab]),
         helper.make_tensor_value_info("top_log_probs", TensorProto.FLOAT, ["N", "C"]),
         helper.make_tensor_value_info("top_ids", TensorProto.INT64, ["N", "C"])],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def hard_rows(vocab: int, width: int | None) -> np.ndarray:
    """Rows of many ties (a few distinct values), of banned tokens (-inf), with every chunk's
    maximum equal (only the chunks' order decides), and of ordinary scores."""
    rng = np.random.default_rng(vocab)
    ties = rng.integers(0, 5, size=(3, vocab)).astype(np.float32)
    banned = rng.standard_normal((2, vocab)).astype(np.float32)
    banned[:, rng.choice(vocab, size=vocab // 2, replace=False)] = -np.inf
    spread = np.full((1, vocab), -1.0, dtype=np.float32)
    spread[0, :: width or vocab] = 0.0
    return np.concatenate([ties, banned, spread, rng.standard_normal((2, vocab)).astype(np.float32)])


def some_ks(vocab: int, width: int | None) -> list[int]:
    chunks = vocab // width if width else 1
    return sorted({1, 2, 9, chunks - 1, chunks, chunks + 1, vocab // 2, vocab} & set(range(1, vocab + 1)))


@pytest.mark.parametrize("vocab", [150, 8000, 58101, 7919])
def test_top_k_nodes_are_one_top_k(vocab: int) -> None:
    """Each row's best k, best first, lower id first among equal values, for every k up to the
    vocabulary. 7919 is prime: one TopK."""
    width = chunk_width(vocab)
    assert (width is None) == (vocab == 7919)
    top_k = session(top_k_model(vocab))
    scores = hard_rows(vocab, width)
    for k in some_ks(vocab, width):
        values, ids = top_k.run(None, {"scores": scores, "k": np.array([k])})
        expected = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(ids, expected)
        np.testing.assert_array_equal(values, np.take_along_axis(scores, expected, axis=1))


@pytest.mark.parametrize("vocab", [8000, 58101])
def test_a_graph_exported_with_one_top_k_gets_the_chunked_one_with_the_same_outputs(vocab: int) -> None:
    exported = single_top_k_head(vocab)
    edited = single_top_k_head(vocab)
    assert with_chunked_top_k(edited)
    assert "ReduceMax" in {n.op_type for n in edited.graph.node}
    assert not with_chunked_top_k(edited)  # chunked already
    before, after = session(exported), session(edited)
    logits = hard_rows(vocab, chunk_width(vocab))
    for k in some_ks(vocab, chunk_width(vocab)):
        feed = {"logits": logits, "candidates": np.array([k])}
        for expected, got in zip(before.run(None, feed), after.run(None, feed), strict=True):
            np.testing.assert_array_equal(got, expected)


def test_a_vocabulary_without_a_chunk_width_keeps_its_top_k() -> None:
    model = single_top_k_head(7919)
    assert not with_chunked_top_k(model)
    assert [n.op_type for n in model.graph.node] == ["LogSoftmax", "TopK"]


def test_a_graph_with_mapped_external_weights_keeps_its_top_k_unless_edited_anyway(tmp_path: Path) -> None:
    """Loaded from its bytes, a graph's external weights would be read into the process, not mapped."""
    vocab = 8000
    model = single_top_k_head(vocab)
    graph = model.graph
    graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(vocab, dtype=np.float32), "bias"))
    graph.node.insert(0, helper.make_node("Add", ["logits", "bias"], ["biased"]))
    graph.node[1].input[0] = "biased"
    path = tmp_path / "decoder.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="decoder.onnx.data", size_threshold=0)
    assert decoder_graph(path, shortlist=False, mapped=True) is None
    assert decoder_graph(path, shortlist=False, mapped=False) is not None  # through the weights cache, or on CUDA
    (tmp_path / "embedded.onnx").write_bytes(single_top_k_head(vocab).SerializeToString())
    assert decoder_graph(tmp_path / "embedded.onnx", shortlist=False, mapped=True) is not None


def test_the_engine_edits_only_graphs_that_need_it(tiny_bundle: Path) -> None:
    """A bundle exported now has the chunked TopK: its decoder loads from its file as it is."""
    assert decoder_graph(tiny_bundle / "decoder.onnx", shortlist=False) is None
    assert decoder_graph(tiny_bundle / "decoder.int8.onnx", shortlist=False) is None


@pytest.mark.skipif(not (SHIPPED / "manifest.json").is_file(), reason=f"shipped bundle not found at {SHIPPED}")
@pytest.mark.parametrize("graph", ["decoder.onnx", "decoder.int8.onnx"])
def test_the_shipped_decoders_run_the_chunked_top_k(graph: str) -> None:
    """The shipped graphs were exported with one TopK; the engine runs them with the chunked one
    (tests/engine/test_translator.py checks their translations against the PyTorch reference)."""
    edited = decoder_graph(SHIPPED / graph, shortlist=False)
    assert edited is not None
    assert "/TopK/chunk_max" in {out for n in onnx.load_from_string(edited).graph.node for out in n.output}
