"""The decoder step as the row pool runs it (``engine.pool``): an edit of the exported step graph.

The exported step (``export.decoder_step``) takes each layer's self-attention cache as one
rectangle (N, H, P, Dh), every row at the same position P, and returns it grown to P + 1: the
cache is copied into a new tensor at every step, and a row cannot join a search already running.
The edit, made when the engine loads a graph, turns it into a step over rows that each have their
own length and position, reading the cache where it lies:

- ``self_k_i``/``self_v_i`` (N, H, W, Dh) are the pool's buffers, W positions wide; row n holds
  ``positions[n]`` cached positions. Each layer's self-attention is onnxruntime's
  ``GroupQueryAttention`` (as many key/value heads as query heads) with ``seqlens_k`` the rows'
  positions: a row attends to its own positions only, so a step costs what the rows' lengths
  cost, not N x W, and its result does not depend on W or on the rows beside it. It writes the new
  position's keys and values into the buffer at each row's position: bound to the same memory as
  the buffer (``present_k_i``/``present_v_i``, io binding), the cache is never copied;
- ``positions`` (N,): each row's position, whose encoding is added to its token's embedding;
  ``total_length`` (), the attention's total length, fed from the host (``_lengths``);
- the source side is one slot per sentence, (Bs, H, S, Dh), any number of rows reading each:
  ``query_slots`` (Bs * R,) lists for each slot the R rows whose queries it answers (padded with
  any row), and ``row_slots`` (N,) where each row's answer is in those Bs * R. Only queries and
  answers are gathered, never the source's keys and values; ``alignment`` comes back per row.

Names and the graph's other inputs and outputs stay as exported (``engine.bundle``). The edit
recognises the exporter's own pattern of nodes, which holds for every bundle this project writes
(its own models and imported OPUS-MT and NLLB ones), fp32 and int8 alike: attention between
activations is never quantised. ``tests/engine/test_pool.py`` checks the edited step
against the exported one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from engine.bundle import POOL_INPUTS

if TYPE_CHECKING:  # onnx is imported where a graph is edited: the engine loads without it otherwise
    import onnx

POSITIONS, QUERY_SLOTS, ROW_SLOTS, TOTAL_LENGTH = (spec.name for spec in POOL_INPUTS)


def present_output(name: str) -> str:
    """The pool step's output for cache input ``name`` (``self_k_0``): the buffer with the new
    position written in (``present_k_0``), bound to the input's memory."""
    return "present_" + name.removeprefix("self_")


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

    def constant(self, name: str) -> onnx.TensorProto:
        """The value of ``name``, an initializer or a Constant node's output."""
        for initializer in self.graph.initializer:
            if initializer.name == name:
                return initializer
        node = self.producer(name)
        if node.op_type != "Constant":
            raise PoolGraphError(f"{name!r} is not a constant")
        return next(a.t for a in node.attribute if a.name == "value")


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
    heads = next(i for i in graph.input if i.name == caches[0]).type.tensor_type.shape.dim[1].dim_value
    if not heads:
        raise PoolGraphError(f"{caches[0]} has no fixed number of heads")
    nodes = _lengths()
    for i in range(layers):
        nodes += _self_attention(g, f"self_k_{i}", f"self_v_{i}", heads)
        nodes += _cross_attention(g, f"cross_k_{i}", f"cross_v_{i}")
    _positions(g, "self_k_0")
    nodes += _alignment(g)
    graph.node.extend(nodes)
    elements = {"int64": TensorProto.INT64, "int32": TensorProto.INT32, "float": TensorProto.FLOAT}
    graph.input.extend(
        helper.make_tensor_value_info(spec.name, elements[spec.dtype], list(spec.dims)) for spec in POOL_INPUTS
    )
    for name in caches:  # the buffer comes back with the new position written in
        output = next(o for o in graph.output if o.name == f"new_{name}")
        output.name = present_output(name)
        output.type.tensor_type.shape.dim[2].dim_param = "W"
        cache_input = next(i for i in graph.input if i.name == name)
        cache_input.type.tensor_type.shape.dim[2].dim_param = "W"
    _sort_topologically(graph)
    _prune(graph)
    del graph.value_info[:]  # shapes recorded at export, some no longer true (the position encoding's)
    if not any(o.domain == MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))


def with_half_attention(model: onnx.ModelProto) -> None:
    """The pool's step (``with_pool_inputs``) with its caches in float16: each
    ``GroupQueryAttention`` reads and writes float16 buffers, its q, k and v cast to float16 just
    before it and its output back to float32 just after it. onnxruntime's CUDA kernel takes only
    float16 or bfloat16 (its CPU kernel takes float16 too, more slowly than float32); the rest of
    the step stays float32."""
    from onnx import TensorProto, helper

    graph = model.graph
    caches: set[str] = set()
    nodes = []
    for node in graph.node:
        if node.op_type != "GroupQueryAttention":
            nodes.append(node)
            continue
        for i in range(3):
            half = f"{node.input[i]}/half"
            nodes.append(helper.make_node("Cast", [node.input[i]], [half], to=TensorProto.FLOAT16))
            node.input[i] = half
        out = node.output[0]
        node.output[0] = f"{out}/half"
        nodes += [node, helper.make_node("Cast", [node.output[0]], [out], to=TensorProto.FLOAT)]
        caches |= {node.input[3], node.input[4], node.output[1], node.output[2]}
    if not caches:
        raise PoolGraphError("the graph has no GroupQueryAttention: not the pool's step")
    graph.ClearField("node")
    graph.node.extend(nodes)
    for value in [*graph.input, *graph.output]:
        if value.name in caches:
            value.type.tensor_type.elem_type = TensorProto.FLOAT16


MS_DOMAIN = "com.microsoft"
_SEQLENS = "pool/seqlens_k"
_ROW_SHAPE = "pool/row_shape"  # [0, 1, -1]: a projection's (N, D) or (N, 1, D) as (N, 1, D)


def _lengths() -> list[onnx.NodeProto]:
    """What every layer's attention reads: each row's cached positions as int32. Its total length
    is an input (``total_length``): CUDA's kernel reads it in host memory, and one computed on the
    device would be copied out in the middle of the step, which a CUDA graph cannot capture."""
    from onnx import TensorProto, helper

    return [
        helper.make_node("Cast", [POSITIONS], [_SEQLENS], to=TensorProto.INT32),
        helper.make_node(
            "Constant", [], [_ROW_SHAPE], value=helper.make_tensor(_ROW_SHAPE, TensorProto.INT64, [3], [0, 1, -1])
        ),
    ]


def _self_attention(g: _Graph, self_k: str, self_v: str, heads: int) -> Iterator[onnx.NodeProto]:
    """Replace ``softmax(q [past; new]^T / c) [past; new]`` by ``GroupQueryAttention`` over each
    row's own positions, writing the new keys and values into the buffer in place."""
    from onnx import helper, numpy_helper

    concat_k = g.consumer(self_k, "Concat")
    concat_v = g.consumer(self_v, "Concat")
    transpose = g.consumer(concat_k.output[0], "Transpose")
    scores = g.consumer(transpose.output[0], "MatMul")
    div = g.consumer(scores.output[0], "Div")
    softmax = g.consumer(div.output[0], "Softmax")
    weighted = g.consumer(concat_v.output[0], "MatMul")
    # (N, H, 1, Dh) -> the output projection's input, the heads moved together first or not
    after = g.consumers(weighted.output[0])
    heads_together = after[0] if len(after) == 1 and after[0].op_type == "Transpose" else None
    merged = g.consumer((heads_together or weighted).output[0], "Reshape")
    # Each of q, k, v as the projection gave it, before its heads were split: (N, 1, D).
    flat = []
    for heads_of in (scores.input[0], concat_k.input[1], concat_v.input[1]):
        split = g.producer(heads_of)
        if split.op_type != "Reshape":
            raise PoolGraphError(f"{heads_of} comes from {split.op_type}, not Reshape")
        name = g.fresh("rows")
        yield helper.make_node("Reshape", [split.input[0], _ROW_SHAPE], [name])
        flat.append(name)
    scale = 1.0 / float(numpy_helper.to_array(g.constant(div.input[1])))
    out, present_k, present_v = g.fresh("attended"), present_output(self_k), present_output(self_v)
    yield helper.make_node(
        "GroupQueryAttention",
        [*flat, self_k, self_v, _SEQLENS, TOTAL_LENGTH],
        [out, present_k, present_v],
        domain=MS_DOMAIN,
        num_heads=heads,
        kv_num_heads=heads,
        scale=scale,
    )
    merged.input[0] = out  # (N, 1, D) into the projection's shape, as the heads' merge gave it
    for old in (
        concat_k,
        concat_v,
        transpose,
        scores,
        div,
        softmax,
        weighted,
        *([heads_together] if heads_together else []),
    ):
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
