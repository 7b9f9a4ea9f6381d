"""The decoder step's head, the nodes that turn the last layer's output into the step's vocabulary
outputs (output projection, LogSoftmax, TopK), and that head with its normalisation a few rows at a
time.

A step's largest tensors are the head's, (N, V) each: the projection's logits and LogSoftmax's
log-probabilities, both alive while LogSoftmax runs. At the OPUS-MT size (V = 58,101) and 128 rows
that is 29.7 MB each, per stream, and onnxruntime's arena keeps its high-water mark; CTranslate2
holds one. Yet the search reads all N x V log-probabilities only at a search's first step and under
rules that need them; at every other step it reads each row's best ``candidates``.
``with_row_chunked_head`` gives the graph an If on the input ``all_log_probs``: true, the head as it
is; false, the projection's bias, LogSoftmax and TopK run over ``chunk_rows`` rows of its product
at a time (a Loop), so that the step holds the product and two (chunk_rows, V) tensors. The values
are the whole head's, row by row (each of those works on each row alone). The product itself stays
outside the If: in a Loop's body onnxruntime multiplied by the weight as it lies in its file, at
half the speed.

The engine makes the edit when it loads a decoder graph for its CPU decoders
(``engine.runner.decoder_graph``), for vocabularies large enough for it to matter; a shortlist's
graph has a head of its own (``engine.shortlist``), M pieces wide, which it leaves as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from engine.bundle import CHUNKED_HEAD_INPUT
from engine.top_k import CANDIDATES, IDS, SCORES, VALUES, scored_vocabulary

if TYPE_CHECKING:  # onnx is needed only to edit a graph, at load time
    import onnx

HEAD_OUTPUTS = (SCORES, VALUES, IDS)
ALL_LOG_PROBS = CHUNKED_HEAD_INPUT.name
# A chunk's (rows, V) tensor: small beside the weights, large enough that the Loop's iterations (tens
# of microseconds each) are few.
CHUNK_BYTES = 4 << 20
MIN_CHUNK_ROWS = 16
# Vocabularies whose head is this many rows a chunk or more are left as they are: their tensors are
# a few MB at most.
MAX_CHUNK_ROWS = 128


def chunk_rows(vocab: int) -> int:
    """Rows per chunk for a vocabulary of ``vocab`` pieces: a chunk's (rows, V) float32 tensor about
    CHUNK_BYTES, a multiple of 8 rows."""
    return max(MIN_CHUNK_ROWS, CHUNK_BYTES // (4 * vocab) // 8 * 8)


def head_nodes(nodes: Sequence[onnx.NodeProto], outputs: Iterable[str]) -> set[int]:
    """The indices of the nodes computing only the head outputs among the graph ``outputs``."""
    outputs = list(outputs)
    others = [o for o in outputs if o not in HEAD_OUTPUTS]
    return nodes_computing(nodes, [o for o in outputs if o in HEAD_OUTPUTS]) - nodes_computing(nodes, others)


def nodes_computing(nodes: Sequence[onnx.NodeProto], names: Iterable[str]) -> set[int]:
    """The indices of the nodes that ``names`` are computed from."""
    producer = {out: i for i, node in enumerate(nodes) for out in node.output}
    seen: set[int] = set()
    stack = [producer[n] for n in names if n in producer]
    while stack:
        i = stack.pop()
        if i not in seen:
            seen.add(i)
            stack.extend(producer[name] for name in nodes[i].input if name in producer)
    return seen


def renamed_copies(
    prefix: str, nodes: Sequence[onnx.NodeProto], renames: dict[str, str] | None = None
) -> list[onnx.NodeProto]:
    """Copies of ``nodes`` for a subgraph: each tensor they make renamed under ``prefix`` (a name
    must not be defined twice in a model), each name in ``renames`` read under its new name."""
    made = {out for n in nodes for out in n.output if out}
    renames = renames or {}
    copies = []
    for number, node in enumerate(nodes):
        copy = type(node)()
        copy.CopyFrom(node)
        copy.input[:] = [f"{prefix}/{i}" if i in made else renames.get(i, i) for i in node.input]
        copy.output[:] = [f"{prefix}/{o}" if o else o for o in node.output]
        copy.name = f"{prefix}/{number}/{node.name}"  # node names must be unique too, and may be empty
        copies.append(copy)
    return copies


def branch(prefix: str, nodes: Sequence[onnx.NodeProto], outputs: Sequence[str]) -> onnx.GraphProto:
    """A subgraph of ``renamed_copies`` of ``nodes`` returning ``outputs`` (renamed)."""
    from onnx import helper

    values = [_value(f"{prefix}/{o}", o) for o in outputs]
    return helper.make_graph(renamed_copies(prefix, nodes), prefix, [], values)


def _value(name: str, output: str) -> onnx.ValueInfoProto:
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.INT64 if output == IDS else TensorProto.FLOAT, None)


def with_row_chunked_head(model: onnx.ModelProto, rows: int | None = None) -> bool:
    """Give a decoder-step graph the input ``all_log_probs`` (bool, a scalar), in place: with it
    true the graph computes its head as it is; false, each row's best ``candidates`` ``rows`` rows
    at a time (default ``chunk_rows``), and ``log_probs`` (0, V). False if the graph is left as it
    is: a small vocabulary, or a head that is not a LogSoftmax of one tensor the graph computes (a
    head in a branch already: a shortlist's)."""
    from onnx import TensorProto, helper

    graph = model.graph
    normalizer = [n for n in graph.node if n.op_type == "LogSoftmax" and list(n.output) == [SCORES]]
    vocab = scored_vocabulary(graph)  # 0 where it is not known: the shortlist's M
    if len(normalizer) != 1 or not vocab or (rows := rows or chunk_rows(vocab)) >= MAX_CHUNK_ROWS:
        return False
    # The product stays in the graph itself (onnxruntime multiplied by a weight read in a Loop's
    # body as it lies in its file, at half the speed); a bias added after it goes into the chunks.
    nodes = list(graph.node)
    product = _product(nodes, graph, normalizer[0].input[0])
    in_head = head_nodes(nodes, [o.name for o in graph.output]) - nodes_computing(nodes, [product])
    head = [n for i, n in enumerate(nodes) if i in in_head]
    kept = [n for i, n in enumerate(nodes) if i not in in_head]
    constants = {out for n in kept if n.op_type == "Constant" for out in n.output}
    made = {out for n in kept for out in n.output} - constants
    if {name for n in head for name in n.input if name in made} != {product}:
        return False
    branches = {
        "then_branch": branch("all", head, HEAD_OUTPUTS),
        "else_branch": _chunked_branch(head, product, rows, vocab),
    }
    switch = helper.make_node("If", [ALL_LOG_PROBS], list(HEAD_OUTPUTS), name="/head/If", **branches)
    del graph.node[:]
    graph.node.extend([*kept, switch])
    graph.input.append(helper.make_tensor_value_info(ALL_LOG_PROBS, TensorProto.BOOL, []))
    return True


def _product(nodes: list[onnx.NodeProto], graph: onnx.GraphProto, logits: str) -> str:
    """The first (N, V) tensor of the head: ``logits``, or what an Add of a constant bias to make
    them adds it to (int8's MatMulIntegerToFloat, which cannot add a bias itself: it would scale
    the bias by each row's scale)."""
    constants = {i.name for i in graph.initializer}
    producer = {out: node for node in nodes for out in node.output}
    add = producer.get(logits)
    if add is not None and add.op_type == "Add" and add.input[1] in constants:
        return add.input[0]
    return logits


def _chunked_branch(head: list[onnx.NodeProto], product: str, rows: int, vocab: int) -> onnx.GraphProto:
    """The head's best candidates from ``product`` (N, V) ``rows`` rows at a time, each chunk's
    appended to those before it (a loop-carried value that grows), and an empty ``log_probs``."""
    from onnx import TensorProto, helper, numpy_helper

    def n(name: str) -> str:
        return f"chunks/{name}"

    def const(name: str, values: list[int]) -> onnx.NodeProto:
        tensor = numpy_helper.from_array(np.array(values, dtype=np.int64), n(name))
        return helper.make_node("Constant", [], [n(name)], value=tensor)

    def empty(name: str, shape: str, dtype: int) -> onnx.NodeProto:
        zero = helper.make_tensor("zero", dtype, [1], [0])
        return helper.make_node("ConstantOfShape", [shape], [n(name)], value=zero)

    outer = [
        const("zero", [0]),
        const("rows", [rows]),
        const("rows_less_one", [rows - 1]),
        const("vocab", [vocab]),
        helper.make_node("Shape", [product], [n("n")], start=0, end=1),  # (1,) N
        helper.make_node("Add", [n("n"), n("rows_less_one")], [n("n_up")]),
        helper.make_node("Div", [n("n_up"), n("rows")], [n("chunks_1")]),
        helper.make_node("Squeeze", [n("chunks_1")], [n("chunks")]),  # a scalar: Loop's trip count
        helper.make_node("Concat", [n("zero"), CANDIDATES], [n("no_rows")], axis=0),  # (0, C)
        empty("no_values", n("no_rows"), TensorProto.FLOAT),
        empty("no_ids", n("no_rows"), TensorProto.INT64),
        helper.make_node("Concat", [n("zero"), n("vocab")], [n("no_log_probs_shape")], axis=0),
        empty("log_probs", n("no_log_probs_shape"), TensorProto.FLOAT),  # (0, V)
        helper.make_node(
            "Loop",
            [n("chunks"), "", n("no_values"), n("no_ids")],
            [n(VALUES), n(IDS)],
            body=_chunk_body(head, product, rows),
        ),
    ]
    values = [_value(n(o), o) for o in HEAD_OUTPUTS]
    return helper.make_graph(outer, "chunks", [], values)


def _chunk_body(head: list[onnx.NodeProto], product: str, rows: int) -> onnx.GraphProto:
    """One chunk: rows [i * rows, (i + 1) * rows) of ``product`` through the head's nodes, its best
    candidates appended to those of the chunks before it."""
    from onnx import TensorProto, helper, numpy_helper

    def n(name: str) -> str:
        return f"chunk/{name}"

    size = numpy_helper.from_array(np.array(rows, dtype=np.int64), n("size"))
    nodes = [
        helper.make_node("Constant", [], [n("size")], value=size),
        helper.make_node("Constant", [], [n("axis")], value=numpy_helper.from_array(np.array([0]), n("axis"))),
        helper.make_node("Mul", [n("i"), n("size")], [n("start_0")]),
        helper.make_node("Add", [n("start_0"), n("size")], [n("end_0")]),
        helper.make_node("Unsqueeze", [n("start_0"), n("axis")], [n("start")]),
        helper.make_node("Unsqueeze", [n("end_0"), n("axis")], [n("end")]),
        helper.make_node("Slice", [product, n("start"), n("end"), n("axis")], [n("product")]),  # (rows, V)
        *renamed_copies(n("head"), head, {product: n("product")}),
        helper.make_node("Concat", [n("values_in"), n(f"head/{VALUES}")], [n("values_out")], axis=0),
        helper.make_node("Concat", [n("ids_in"), n(f"head/{IDS}")], [n("ids_out")], axis=0),
        helper.make_node("Identity", [n("cond_in")], [n("cond_out")]),
    ]
    inputs = [
        helper.make_tensor_value_info(n("i"), TensorProto.INT64, []),
        helper.make_tensor_value_info(n("cond_in"), TensorProto.BOOL, []),
        helper.make_tensor_value_info(n("values_in"), TensorProto.FLOAT, None),
        helper.make_tensor_value_info(n("ids_in"), TensorProto.INT64, None),
    ]
    outputs = [
        helper.make_tensor_value_info(n("cond_out"), TensorProto.BOOL, []),
        helper.make_tensor_value_info(n("values_out"), TensorProto.FLOAT, None),
        helper.make_tensor_value_info(n("ids_out"), TensorProto.INT64, None),
    ]
    return helper.make_graph(nodes, "chunk", inputs, outputs)
