"""A float32 graph computed in float16, as CTranslate2's ``compute_type="float16"`` computes a float32
model: converted when the engine loads it, so that every bundle's fp32 variant can be served so on a
GPU, whose tensor cores multiply float16 at many times float32's rate and whose memory moves half the
bytes per weight.

The conversion is onnxruntime's own (``onnxruntime.transformers.float16``): weights and activations
become float16, Cast nodes go where float32 must stay. What stays float32:

- the graph's inputs and outputs: the engine feeds and reads float32 as ever (the search, the
  caches the steps pass on, the alignments), and each graph casts at its edges. The row pool's
  caches are float16 already (``engine.pool_graph.with_half_attention``) and stay so;
- the log-normaliser and all after it (``TopK``, in chunks or not): a hypothesis's score is a sum
  of log-probabilities over many steps, and float16's 11 bits would tie and reorder candidates
  that float32 keeps apart. Those nodes are taken out of the graph while it is converted and put
  back after, reading the logits cast to float32: the converter's own way of keeping a node in
  float32 casts what that node computes back to float16 where it is a graph output;
- the operators the converter keeps in float32 of its own accord (``DEFAULT_OP_BLOCK_LIST``).

The converter puts the casts it adds in the outermost graph, so a graph is converted before the
edits that move its head into subgraphs (``engine.shortlist``, ``engine.step_head``). Its weights
are then in the graph itself: a graph over 2 GB in float16 (a decoder of more than a billion
parameters) cannot be converted so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # onnx is imported where a graph is converted: the engine loads without it otherwise
    import onnx

# The variant a configuration names to serve a bundle's FULL_VARIANT so, where the bundle has no such
# variant of its own.
HALF_VARIANT, FULL_VARIANT = "fp16", "fp32"


def to_float16(model: onnx.ModelProto, weights_dir: Path) -> onnx.ModelProto:
    """``model`` (whose external weights, if any, lie in ``weights_dir``) computed in float16."""
    from onnx import helper
    from onnx.external_data_helper import load_external_data_for_model
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16
    from onnxruntime.transformers.onnx_model import OnnxModel

    graph = model.graph
    head = _head(graph)
    made = {name for node in head for name in node.output}
    given = {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer}
    read = list(dict.fromkeys(name for node in head for name in node.input if name not in made | given))
    read_types = _element_types(model, read)
    outputs = list(graph.output)
    in_head = {id(node) for node in head}
    rest = [node for node in graph.node if id(node) not in in_head]
    del graph.node[:], graph.output[:]
    graph.node.extend(rest)
    graph.output.extend([o for o in outputs if o.name not in made])
    graph.output.extend(helper.make_tensor_value_info(name, read_types[name], None) for name in read)
    load_external_data_for_model(model, str(weights_dir))  # the converter rewrites every weight's values
    half = convert_float_to_float16(model, keep_io_types=True, op_block_list=DEFAULT_OP_BLOCK_LIST)
    del half.graph.output[:]
    half.graph.node.extend(head)
    half.graph.output.extend(outputs)
    # The converter appends its casts: in order again, for the edits that copy nodes into subgraphs.
    OnnxModel.graph_topological_sort(half.graph)
    return half


def _head(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The log-normaliser and every node that reads what it computes, in the graph's order."""
    head, reached = [], set()
    for node in graph.node:
        if node.op_type == "LogSoftmax" or reached.intersection(node.input):
            head.append(node)
            reached.update(node.output)
    return head


def _element_types(model: onnx.ModelProto, names: list[str]) -> dict[str, int]:
    """The element types of ``names``, values the rest of the graph computes for its head: the
    logits are float (shape inference stops at onnxruntime's own operators, such as the pool's
    attention); the others (a chunked TopK's count of chunks) are what inference finds."""
    from onnx import TensorProto, shape_inference

    types = {node.input[0]: TensorProto.FLOAT for node in model.graph.node if node.op_type == "LogSoftmax"}
    if set(names) - set(types):
        inferred = shape_inference.infer_shapes(model).graph.value_info
        types |= {value.name: value.type.tensor_type.elem_type for value in inferred if value.name not in types}
    if unknown := [name for name in names if not types.get(name)]:
        raise ValueError(f"the head of the graph reads {unknown}, of unknown types: it cannot be converted")
    return {name: types[name] for name in names}


def half_graph(path: Path) -> bytes:
    """The graph at ``path`` computed in float16, serialized."""
    import onnx

    return to_float16(onnx.load(str(path), load_external_data=False), path.parent).SerializeToString()
