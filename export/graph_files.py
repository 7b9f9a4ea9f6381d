"""How a bundle's graphs are stored: ``name.onnx`` holds the graph, ``name.onnx.data`` its weights.

A protobuf cannot exceed 2 GB, which NLLB's smallest model (615 M parameters) does in fp32, so every
export keeps its weights outside the graph; onnxruntime finds them through the graph's references.
A reference may name another graph's file: the decoder reads a tied embedding table from the
encoder's (``share_weights``), so the bundle stores it once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
from onnx.external_data_helper import ExternalDataInfo, uses_external_data

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
    # onnx creates the data file readable by its owner only; a service running as another user
    # (a container's) must read it as it reads the graph.
    external_data(path).chmod(path.stat().st_mode & 0o777)


def external_data(graph: Path) -> Path:
    """The file holding ``graph``'s weights (onnxruntime finds it through the graph)."""
    return graph.with_name(graph.name + ".data")


def share_weights(first: Path, second: Path) -> int:
    """Point every weight of graph ``second`` that graph ``first`` stores byte for byte at
    ``first``'s copy, and rewrite ``second``'s data file without them; returns how many.

    The two graphs must lie in one directory. Only tables that both use alike are worth sharing:
    an embedding table looked up by the encoder and the decoder (onnxruntime maps it from the
    file and reads the rows it needs). The decoder's output projection is stored transposed for
    its MatMul, whose packed copy onnxruntime makes at load; it shares nothing.
    """
    stored = {_key(t, _external_bytes(first.parent, t)): list(t.external_data) for t in _external(first)}
    model = onnx.load(str(second))
    shared = 0
    for tensor in model.graph.initializer:
        reference = stored.get(_key(tensor, tensor.raw_data)) if tensor.HasField("raw_data") else None
        if reference is not None:
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
            tensor.ClearField("external_data")
            tensor.external_data.extend(reference)
            shared += 1
    if shared:
        external_data(second).unlink()
        save_graph(model, second)
    return shared


def _external(graph: Path) -> list[onnx.TensorProto]:
    model = onnx.load(str(graph), load_external_data=False)
    return [t for t in model.graph.initializer if uses_external_data(t)]


def _external_bytes(directory: Path, tensor: onnx.TensorProto) -> bytes:
    info = ExternalDataInfo(tensor)
    with open(directory / info.location, "rb") as f:
        f.seek(info.offset or 0)
        return f.read(info.length) if info.length else f.read()


def _key(tensor: onnx.TensorProto, data: bytes) -> tuple[int, tuple[int, ...], str]:
    return tensor.data_type, tuple(tensor.dims), hashlib.sha256(data).hexdigest()
