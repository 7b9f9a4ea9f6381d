"""The decoder step as the row pool runs it (``engine.pool``): an edit of the exported step graph.

The exported step (``export.decoder_step``) takes each layer's self-attention cache as one
rectangle (N, H, P, Dh), every row at the same position P, and returns it grown to P + 1: the
cache is copied into a new tensor at every step, and a row cannot join a search already running.
The edit, made when the engine loads a graph, turns it into a step over rows that each have their
own length and position, reading the cache where it lies:

- ``self_k_i``/``self_v_i`` (N, H, W, Dh) are the pool's buffers, W positions wide; row n holds
  ``lengths[n]`` cached positions. The new position's score is computed apart and put first,
  before the cached ones, so that the cache is only read; ``self_bias`` (N, 1 + W) is 0 on the new
  position and the cached ones and -inf on the rest. The step returns the new position's keys and
  values, ``step_k_i``/``step_v_i`` (N, H, 1, Dh), which the pool writes into its buffers in place.
  A row's scores then sit at the same places whatever W is, and with W a multiple of the
  kernels' vector width (the last score, the last cached position, is always a masked one) the
  sums over them are the same too: a row's result does not depend on the rows beside it;
- ``positions`` (N,): each row's position, whose encoding is added to its token's embedding;
- the source side is one slot per sentence, (Bs, H, S, Dh), any number of rows reading each:
  ``query_slots`` (Bs * R,) lists for each slot the R rows whose queries it answers (padded with
  any row), and ``row_slots`` (N,) where each row's answer is in those Bs * R. Only queries and
  answers are gathered, never the source's keys and values; ``alignment`` comes back per row.

Names and the graph's other inputs and outputs stay as exported (``engine.bundle``). The edit
recognises the exporter's own pattern of nodes, which holds for every bundle this project writes
(its own models and imported OPUS-MT and NLLB ones), fp32 and int8 alike: attention between
activations is never quantised. ``tests/engine/test_pool_graph.py`` checks the edited step
against the exported one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from engine.bundle import POOL_INPUTS

if TYPE_CHECKING:  # onnx is imported where a graph is edited: the engine loads without it otherwise
    import onnx

POSITIONS, SELF_BIAS, QUERY_SLOTS, ROW_SLOTS = (spec.name for spec in POOL_INPUTS)


def step_output(name: str) -> str:
    """The pool step's output for cache input ``name`` (``self_k_0``): the new position's keys or
    values (``step_k_0``)."""
    return "step_" + name.removeprefix("self_")


class PoolGraphError(Exception):
    """The graph is not an exported decoder step this edit recognises."""


class _Graph:
    """Lookups over a graph's nodes while it is edited."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.counter = 0

    def producer(self, name: str) -> onnx.NodeProto:
        for node in self.graph.node:
            if name in node.output:
                return node
        raise PoolGraphError(f"no node produces {name!r}")

    def consumers(self, name: str) -> list[onnx.NodeProto]:
        return [node for node in self.graph.node if name in node.input]

    def consumer(self, name: str, op: str) -> onnx.NodeProto:
        found = [node for node in self.consumers(name) if node.op_type == op]
        if len(found) != 1:
            raise PoolGraphError(f"expected one {op} reading {name!r}, found {len(found)}")
        return found[0]

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"pool/{stem}_{self.counter}"


def with_pool_inputs(model: onnx.ModelProto) -> None:
    """Edit the exported step ``model`` into the pool's step (module docstring), in place."""
    from onnx import TensorProto, helper

    graph = model.graph
    inputs = [i.name for i in graph.input]
    if POSITIONS in inputs:
        raise PoolGraphError("the graph has the pool's inputs already")
    caches = [name for name in inputs if f"new_{name}" in {o.name for o in graph.output}]
    layers = len(caches) // 2
    if not layers:
        raise PoolGraphError("the graph returns no grown cache: not an exported decoder step")
    g = _Graph(graph)
    nodes: list[onnx.NodeProto] = []
    # The bias of every layer's self-attention scores: (N, W + 1) -> (N, 1, 1, W + 1).
    axes = g.fresh("axes")
    bias = g.fresh("self_bias")
    axes_value = helper.make_tensor(axes, TensorProto.INT64, [2], [1, 2])
    nodes.append(helper.make_node("Constant", [], [axes], value=axes_value))
    nodes.append(helper.make_node("Unsqueeze", [SELF_BIAS, axes], [bias]))
    nodes += _split_sizes("self_k_0")
    for i in range(layers):
        nodes += _self_attention(g, f"self_k_{i}", f"self_v_{i}", bias)
        nodes += _cross_attention(g, f"cross_k_{i}", f"cross_v_{i}")
    _positions(g, "self_k_0")
    nodes += _alignment(g)
    graph.node.extend(nodes)
    elements = {"int64": TensorProto.INT64, "float": TensorProto.FLOAT}
    graph.input.extend(
        helper.make_tensor_value_info(spec.name, elements[spec.dtype], list(spec.dims)) for spec in POOL_INPUTS
    )
    for name in caches:  # the cache is read in place; the step returns the new position only
        output = next(o for o in graph.output if o.name == f"new_{name}")
        output.name = step_output(name)
        output.type.tensor_type.shape.dim[2].dim_value = 1
        cache_input = next(i for i in graph.input if i.name == name)
        cache_input.type.tensor_type.shape.dim[2].dim_param = "W"
    _sort_topologically(graph)
    _prune(graph)
    del graph.value_info[:]  # shapes recorded at export, some no longer true (the position encoding's)


_SPLIT = "pool/split_new_past"  # [1, W]: a step's attention weights into the new position's and the cache's
_LAST_AXIS = "pool/last_axis"


def _split_sizes(self_k: str) -> list[onnx.NodeProto]:
    """The constants every layer's edit reads."""
    from onnx import TensorProto, helper

    one, width = "pool/one", "pool/cache_width"
    return [
        helper.make_node("Constant", [], [one], value=helper.make_tensor(one, TensorProto.INT64, [1], [1])),
        helper.make_node("Constant", [], [_LAST_AXIS], value=helper.make_tensor(one, TensorProto.INT64, [1], [-1])),
        helper.make_node("Shape", [self_k], [width], start=2, end=3),
        helper.make_node("Concat", [one, width], [_SPLIT], axis=0),
    ]


def _self_attention(g: _Graph, self_k: str, self_v: str, bias: str) -> Iterator[onnx.NodeProto]:
    """Replace ``softmax(q [past; new]^T / c) [past; new]`` by scores over the cache where it lies
    and the new position's apart, the cache never copied; the new keys and values are outputs."""
    from onnx import helper

    concat_k = g.consumer(self_k, "Concat")
    concat_v = g.consumer(self_v, "Concat")
    transpose = g.consumer(concat_k.output[0], "Transpose")
    scores = g.consumer(transpose.output[0], "MatMul")
    div = g.consumer(scores.output[0], "Div")
    softmax = g.consumer(div.output[0], "Softmax")
    weighted = g.consumer(concat_v.output[0], "MatMul")
    q, scale = scores.input[0], div.input[1]
    # The new keys and values are the step's outputs, named for the cache they go into.
    new_k, new_v = step_output(self_k), step_output(self_v)
    g.producer(concat_k.input[1]).output[0] = new_k
    g.producer(concat_v.input[1]).output[0] = new_v
    # The new position's score as a product and a sum: as a MatMul it would be N x H products of a
    # row and a column, each a kernel call.
    product, new_score, new_part = g.fresh("new_qk"), g.fresh("new_qk_sum"), g.fresh("new_scores")
    yield helper.make_node("Mul", [q, new_k], [product])
    yield helper.make_node("ReduceSum", [product, _LAST_AXIS], [new_score], keepdims=1)  # (N, H, 1, 1)
    yield helper.make_node("Div", [new_score, scale], [new_part])
    transposed, past_product, past_part = g.fresh("past_k_t"), g.fresh("past_qk"), g.fresh("past_scores")
    yield helper.make_node("Transpose", [self_k], [transposed], perm=[0, 1, 3, 2])
    yield helper.make_node("MatMul", [q, transposed], [past_product])  # (N, H, 1, W)
    yield helper.make_node("Div", [past_product, scale], [past_part])  # fuses into the product
    parts = [new_part, past_part]
    both, biased = g.fresh("scores"), g.fresh("biased")
    yield helper.make_node("Concat", parts, [both], axis=-1)
    yield helper.make_node("Add", [both, bias], [biased])
    softmax.input[0] = biased
    w_new, w_past, o_past, o_new = (g.fresh(s) for s in ("w_new", "w_past", "out_past", "out_new"))
    yield helper.make_node("Split", [softmax.output[0], _SPLIT], [w_new, w_past], axis=-1)
    yield helper.make_node("MatMul", [w_past, self_v], [o_past])  # (N, H, 1, Dh)
    yield helper.make_node("Mul", [w_new, new_v], [o_new])
    yield helper.make_node("Add", [o_past, o_new], [weighted.output[0]])
    for old in (concat_k, concat_v, transpose, scores, div, weighted):
        g.graph.node.remove(old)


def _cross_attention(g: _Graph, cross_k: str, cross_v: str) -> Iterator[onnx.NodeProto]:
    """Gather the rows' queries into their sentences' slots before the cross-attention, and each
    row's answer back out after it."""
    from onnx import helper

    weighted = g.consumer(cross_v, "MatMul")
    node = g.producer(weighted.input[0])  # the Softmax; back along the scores to their MatMul
    while node.op_type != "MatMul":
        node = g.producer(node.input[0])
    q_heads = g.producer(g.producer(node.input[0]).input[0])  # Transpose <- Reshape (N, D) -> (B, K, H, Dh)
    if q_heads.op_type != "Reshape":
        raise PoolGraphError(f"the cross-attention queries of {cross_k} come from {q_heads.op_type}, not Reshape")
    slotted = g.fresh("queries_in_slots")
    yield helper.make_node("Gather", [q_heads.input[0], QUERY_SLOTS], [slotted], axis=0)
    q_heads.input[0] = slotted
    merged = g.consumer(g.consumer(weighted.output[0], "Transpose").output[0], "Reshape")  # (Bs * R, D)
    answers = g.fresh("answers_in_slots")
    out = merged.output[0]
    merged.output[0] = answers
    yield helper.make_node("Gather", [answers, ROW_SLOTS], [out], axis=0)


def _positions(g: _Graph, self_k: str) -> None:
    """The position encoding is looked up at each row's position, not at the cache's length."""
    shape = g.consumer(self_k, "Shape")
    length = g.consumer(shape.output[0], "Gather")
    lookup = g.consumer(length.output[0], "Gather")
    lookup.input[1] = POSITIONS


def _alignment(g: _Graph) -> list[onnx.NodeProto]:
    """``alignment`` per row: the slots' (Bs, R, S) flattened, then each row's gathered."""
    from onnx import helper

    reshape = g.producer("alignment")
    flat = g.fresh("alignment_in_slots")
    g.graph.node.remove(reshape)
    return [
        helper.make_node("Flatten", [reshape.input[0]], [flat], axis=-1),
        helper.make_node("Gather", [flat, ROW_SLOTS], ["alignment"], axis=0),
    ]


def _sort_topologically(graph: onnx.GraphProto) -> None:
    """The nodes in an order in which each follows those it reads (onnx requires it)."""
    known = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        ready = [n for n in pending if all(name in known for name in _reads(n))]
        if not ready:
            raise PoolGraphError("the edited graph has a cycle or reads a name nothing produces")
        for node in ready:
            known.update(node.output)
            ordered.append(node)
        pending = [n for n in pending if all(n is not r for r in ready)]
    del graph.node[:]
    graph.node.extend(ordered)


def _reads(node: onnx.NodeProto) -> list[str]:
    """The names a node reads, those its branches read from the outer graph included."""
    names = list(node.input)
    for attribute in node.attribute:
        for branch in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
            produced = {o for n in branch.node for o in n.output} | {i.name for i in branch.initializer}
            names += [name for n in branch.node for name in _reads(n) if name not in produced]
    return names


def _prune(graph: onnx.GraphProto) -> None:
    """Drop the nodes whose outputs nothing reads (the cache length's Shape and Gather), and the
    constants only they read."""
    while True:
        read = {o.name for o in graph.output} | {name for n in graph.node for name in _reads(n)}
        dead = [n for n in graph.node if not any(o in read for o in n.output)]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    for initializer in [i for i in graph.initializer if i.name not in read]:
        graph.initializer.remove(initializer)
