"""How a bundle's graphs are stored: ``name.onnx`` holds the graph, ``name.onnx.data`` its weights.

A protobuf cannot exceed 2 GB, which NLLB's smallest model (615 M parameters) does in fp32, so every
export keeps its weights outside the graph; onnxruntime finds them through the graph's references.
"""

from __future__ import annotations

from pathlib import Path

import onnx

EXTERNAL_MIN_BYTES = 1024  # smaller tensors (shapes, scalars) stay inside the graph


def save_graph(model: onnx.ModelProto, path: Path) -> None:
    """Save ``model`` to ``path``, its weights to ``external_data(path)``."""
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=external_data(path).name,
        size_threshold=EXTERNAL_MIN_BYTES,
    )


def external_data(graph: Path) -> Path:
    """The file holding ``graph``'s weights (onnxruntime finds it through the graph)."""
    return graph.with_name(graph.name + ".data")
