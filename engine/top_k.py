"""Each decoder row's best candidates, picked by a chunked TopK.

onnxruntime's TopK visits every element of a row one by one, while a ReduceMax over it runs at
vector speed. So ``top_k_nodes`` cuts the row into C chunks of W, finds the k chunks with the
greatest maxima, and runs one TopK over those k*W values only (benchmarks/RESULTS.md, section 13).

The exporter builds decoder graphs with it; ``with_chunked_top_k`` gives graphs exported with one
TopK the same nodes when the engine loads them, so that older bundles need no new files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # onnx is needed only to build or edit a graph
    import onnx

# Narrow chunks lengthen the first TopK, wide ones the second.
MIN_CHUNK, PREFERRED_CHUNK, MAX_CHUNK = 32, 64, 256
SCORES, CANDIDATES, VALUES, IDS = "log_probs", "candidates", "top_log_probs", "top_ids"


def chunk_width(vocab: int) -> int | None:
    """The width of the chunks ``top_k_nodes`` cuts a row into: the divisor of ``vocab`` in
    [MIN_CHUNK, MAX_CHUNK] nearest to PREFERRED_CHUNK; None if it has none (padding a row to a
    multiple would copy all of it, which costs what the chunks save)."""
    widths = [w for w in range(MIN_CHUNK, MAX_CHUNK + 1) if vocab % w == 0 and vocab // w > 1]
    return min(widths, key=lambda w: abs(w - PREFERRED_CHUNK), default=None)


def top_k_nodes(
    scores: str, k: str, values: str, ids: str, vocab: int
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Nodes computing ``values, ids = TopK(scores, k)`` over the last axis of ``scores`` (N, V),
    identical to one TopK, ties included, and faster for V in the thousands.

    The k chunks with the greatest maxima hold the row's best k: a chunk not among them has k
    chunks before it, each holding a value greater than its maximum (or equal and at a lower
    index). Taken in ascending order, the chosen chunks keep TopK's order among equal values:
    lower id first.
    """
    from onnx import helper, numpy_helper

    width = chunk_width(vocab)
    if width is None:
        return [helper.make_node("TopK", [scores, k], [values, ids], name="/TopK", axis=-1)], []
    chunks = vocab // width

    def n(suffix: str) -> str:
        return f"/TopK/{suffix}"

    constants = [
        numpy_helper.from_array(np.array([-1, chunks, width], dtype=np.int64), n("chunked_shape")),
        numpy_helper.from_array(np.array([0, -1], dtype=np.int64), n("flat_shape")),
        numpy_helper.from_array(np.array([chunks], dtype=np.int64), n("chunks")),
        numpy_helper.from_array(np.array(width, dtype=np.int64), n("width")),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), n("last_axis")),
    ]
    nodes = [
        helper.make_node("Reshape", [scores, n("chunked_shape")], [n("chunked")]),  # (N, C, W)
        helper.make_node("ReduceMax", [n("chunked")], [n("chunk_max")], axes=[-1], keepdims=0),  # (N, C)
        helper.make_node("Min", [k, n("chunks")], [n("k_chunks")]),  # k chunks, or all when k > C
        helper.make_node("TopK", [n("chunk_max"), n("k_chunks")], [n("_best_max"), n("best")], axis=-1),
        helper.make_node("TopK", [n("best"), n("k_chunks")], [n("picked"), n("_order")], axis=-1, largest=0),
        helper.make_node("Unsqueeze", [n("picked"), n("last_axis")], [n("picked_index")]),  # (N, k', 1)
        helper.make_node("GatherND", [n("chunked"), n("picked_index")], [n("gathered")], batch_dims=1),
        helper.make_node("Reshape", [n("gathered"), n("flat_shape")], [n("candidates")]),  # (N, k' * W)
        helper.make_node("TopK", [n("candidates"), k], [values, n("position")], axis=-1),  # (N, k)
        helper.make_node("Div", [n("position"), n("width")], [n("slot")]),
        helper.make_node("Mod", [n("position"), n("width")], [n("offset")]),
        helper.make_node("GatherElements", [n("picked"), n("slot")], [n("chunk")], axis=1),
        helper.make_node("Mul", [n("chunk"), n("width")], [n("start")]),
        helper.make_node("Add", [n("start"), n("offset")], [ids]),
    ]
    return nodes, constants


def with_chunked_top_k(model: onnx.ModelProto) -> bool:
    """Replace, in place, a decoder-step graph's one TopK over all V log-probabilities by
    ``top_k_nodes``; False if it has none to replace (chunked already, or V has no chunk width)."""
    graph = model.graph
    single = [
        i
        for i, node in enumerate(graph.node)
        if node.op_type == "TopK" and list(node.input) == [SCORES, CANDIDATES] and list(node.output) == [VALUES, IDS]
    ]
    vocab = scored_vocabulary(graph)
    if len(single) != 1 or chunk_width(vocab) is None:
        return False
    nodes, constants = top_k_nodes(SCORES, CANDIDATES, VALUES, IDS, vocab)
    (at,) = single
    kept = list(graph.node)
    del graph.node[:]
    graph.node.extend(kept[:at] + nodes + kept[at + 1 :])
    graph.initializer.extend(constants)
    return True


def scored_vocabulary(graph: onnx.GraphProto) -> int:
    """V of a decoder-step graph's ``log_probs`` (N, V) output."""
    log_probs = next(o for o in graph.output if o.name == SCORES)
    return log_probs.type.tensor_type.shape.dim[1].dim_value
