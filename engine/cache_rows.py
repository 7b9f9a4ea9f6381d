"""The decoder step reorders its own self-attention cache: the edit the CUDA path loads its decoder with.

Between steps the beam search keeps, drops and repeats decoder rows (``Decoder.select``). On the
host that is ``np.take`` on each cache tensor. On a GPU a separate Gather run costs more host time
than the copy does on the device: a session run and a binding per tensor, a quarter of a step's
time on an H200 (benchmarks/RESULTS.md, section 19). Given ``cache_rows`` (N,), the row of the past
cache that each of the step's N rows continues, the step gathers its past cache itself before it
appends the new position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # onnx is imported where a graph is edited: the engine loads without it otherwise
    import onnx

CACHE_ROWS = "cache_rows"


def cache_inputs(graph: onnx.GraphProto) -> list[str]:
    """The inputs a step returns grown, as ``new_<name>``: the self-attention cache."""
    outputs = {output.name for output in graph.output}
    return [i.name for i in graph.input if f"new_{i.name}" in outputs]


def with_cache_rows(model: onnx.ModelProto) -> bool:
    """Give the step graph the ``cache_rows`` input, gathering every cache input by it before use;
    False if it has that input already or no cache."""
    from onnx import TensorProto, helper

    graph = model.graph
    names = cache_inputs(graph)
    if not names or CACHE_ROWS in {i.name for i in graph.input}:
        return False
    reordered = {name: f"{name}/reordered" for name in names}
    _rename_uses(graph, reordered)
    gathers = [
        helper.make_node("Gather", [name, CACHE_ROWS], [reordered[name]], axis=0, name=f"{name}/reorder")
        for name in names
    ]
    nodes = gathers + list(graph.node)  # the Gathers read graph inputs only: first keeps the order topological
    del graph.node[:]
    graph.node.extend(nodes)
    graph.input.append(helper.make_tensor_value_info(CACHE_ROWS, TensorProto.INT64, ["rows"]))
    return True


def _rename_uses(graph: onnx.GraphProto, renamed: dict[str, str]) -> None:
    """Every node input named in ``renamed``, in branches too (they see the outer graph's names)."""
    for node in graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
        for attribute in node.attribute:
            for branch in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                _rename_uses(branch, renamed)
