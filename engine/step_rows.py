"""The decoder step picks its own rows: the edit the CUDA path loads its decoder with.

Between steps the beam search keeps, drops and repeats decoder rows, and drops finished sentences
(``Decoder.select``). On the host each is ``np.take`` on every tensor concerned. On a GPU a separate
Gather run costs more host time than its copies take on the device: a session run and a binding per
tensor, a quarter of a step's time on an H200 (benchmarks/RESULTS.md, section 19). So the step takes
two more inputs and gathers what it reads itself:

- ``cache_rows`` (N,): for each of the step's N rows, the row of the past cache it continues; the
  cache is gathered before the new position is appended.
- ``source_rows`` (B,): for each of the step's B sentences, its sentence in the batch as encoded;
  the source side (cross keys and values, mask) stays as the encoder gave it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.bundle import ROW_INPUTS, encoder_signature

if TYPE_CHECKING:  # onnx is imported where a graph is edited: the engine loads without it otherwise
    import onnx

CACHE_ROWS, SOURCE_ROWS = (spec.name for spec in ROW_INPUTS)


def with_row_inputs(model: onnx.ModelProto) -> bool:
    """Give the step graph ``cache_rows`` and ``source_rows``, each input they index gathered by
    them before use; False if it has them already."""
    from onnx import TensorProto, helper

    graph = model.graph
    inputs = [i.name for i in graph.input]
    if CACHE_ROWS in inputs:
        return False
    outputs = {output.name for output in graph.output}
    cache = [name for name in inputs if f"new_{name}" in outputs]  # what the step returns grown
    source = [spec.name for spec in encoder_signature(len(cache) // 2)[1]]
    gathered = {name: rows for rows, names in ((CACHE_ROWS, cache), (SOURCE_ROWS, source)) for name in names}
    renamed = {name: f"{name}/{rows}" for name, rows in gathered.items()}
    _rename_uses(graph, renamed)
    gathers = [
        helper.make_node("Gather", [name, rows], [renamed[name]], axis=0, name=renamed[name])
        for name, rows in gathered.items()
    ]
    nodes = gathers + list(graph.node)  # the Gathers read graph inputs only: first keeps the order topological
    # What is gathered has other rows than what the step computes: named alike, onnxruntime would
    # take them for one size and reuse one's buffer for the other.
    whole = {CACHE_ROWS: "N_before", SOURCE_ROWS: "B_encoded"}
    for value in graph.input:
        if value.name in gathered:
            value.type.tensor_type.shape.dim[0].dim_param = whole[gathered[value.name]]
    del graph.node[:]
    graph.node.extend(nodes)
    graph.input.extend(helper.make_tensor_value_info(spec.name, TensorProto.INT64, spec.dims) for spec in ROW_INPUTS)
    return True


def _rename_uses(graph: onnx.GraphProto, renamed: dict[str, str]) -> None:
    """Every node input named in ``renamed``, in branches too (they see the outer graph's names)."""
    for node in graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        for attribute in node.attribute:
            for branch in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                _rename_uses(branch, renamed)
