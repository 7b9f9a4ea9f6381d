"""Where a row pool (``engine.pool``) keeps its rows' caches and its slots' sources.

A pool holds two blocks, each (layers, places, H, width, Dh): the self-attention caches (a place
is a row, its width the positions it can cache) and the sentence slots' cross-attention keys and
values (a place is a slot, its width the source positions). The pool decides which places move
where; a storage holds the blocks and moves them:

- ``HostStorage``: numpy arrays in private anonymous memory, the CPU pool's. A row moves up to
  its length, one slice copy each.
- ``DeviceStorage``: onnxruntime OrtValues in a device's memory, for a step whose attention reads
  its cache there (CUDA; "cpu" runs the same path on any machine). Every move is one run of a
  small graph: a Gather of the places that move, then a ScatterND into the block bound as its own
  output, which onnxruntime scatters in place. Whole places move: on a GPU a row's positions past
  its length cost less to copy than a run per row would cost the host.

The step binds a block's layers by address (``bind``): the same memory as its cache inputs and as
the outputs its attention writes the new position into, and as its source inputs.

Shape legend: L layers of a block, P places allocated, H heads, W width, Dh head size, k places moved.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import onnxruntime as ort

from engine.runner import CUDA


@dataclass(frozen=True)
class DeviceBlock:
    """A block in a device's memory."""

    value: ort.OrtValue
    shape: tuple[int, ...]  # (L, P, H, W, Dh)
    dtype: type[np.floating]


Block = np.ndarray | DeviceBlock


def address(block: Block) -> int:
    """Where ``block``'s memory starts."""
    return block.value.data_ptr() if isinstance(block, DeviceBlock) else block.ctypes.data


class Storage(Protocol):
    device: str  # where its blocks are: "cpu", "cuda"
    device_id: int

    def empty(self, shape: tuple[int, ...], dtype: type[np.floating]) -> Block:
        """A block of ``shape``, all zeros."""
        ...

    def resized(self, block: Block, places: int, width: int, live: int, keep_width: int) -> Block:
        """A block of ``places`` places ``width`` wide holding ``block``'s first ``live`` places up
        to ``keep_width``; zeros elsewhere."""
        ...

    def move(self, block: Block, dst: Sequence[int], src: Sequence[int], widths: Sequence[int] | None = None) -> None:
        """Places ``src`` into places ``dst`` (none of them among ``src``), each up to its width in
        ``widths`` at least (None: whole)."""
        ...

    def write(self, block: Block, start: int, values: Sequence[np.ndarray]) -> None:
        """Each layer's (B, H, S, Dh) of ``values`` into places ``start`` .. ``start + B - 1``, S
        positions at most the block's width. The places' positions past S hold finite values
        (what they held, or zeros), which a slot's mask weighs 0."""
        ...

    def bind(
        self, binding: ort.IOBinding, names: Sequence[str], block: Block, count: int, outputs: Sequence[str] = ()
    ) -> None:
        """Bind the first ``count`` places of each layer of ``block`` as input ``names[i]``, and as
        output ``outputs[i]`` if given: the same memory."""
        ...


class HostStorage:
    """Blocks as numpy arrays in private anonymous memory (module docstring)."""

    device, device_id = "cpu", 0

    def empty(self, shape: tuple[int, ...], dtype: type[np.floating]) -> np.ndarray:
        return _untouched(shape, dtype)

    def resized(self, block: np.ndarray, places: int, width: int, live: int, keep_width: int) -> np.ndarray:
        layers, _, heads, _, d_head = block.shape
        resized = _untouched((layers, places, heads, width, d_head), block.dtype.type)
        resized[:, :live, :, :keep_width] = block[:, :live, :, :keep_width]
        return resized

    def move(
        self, block: np.ndarray, dst: Sequence[int], src: Sequence[int], widths: Sequence[int] | None = None
    ) -> None:
        if widths is None:
            block[:, list(dst)] = block[:, list(src)]
            return
        # A slice per place, each up to its width: no gathered copy in between (indexing five
        # dimensions by lists of rows cost more than the loop, benchmarks/RESULTS.md).
        for d, s, width in zip(dst, src, widths, strict=True):
            block[:, d, :, :width] = block[:, s, :, :width]

    def write(self, block: np.ndarray, start: int, values: Sequence[np.ndarray]) -> None:
        for i, value in enumerate(values):
            sentences, _, width, _ = value.shape
            block[i, start : start + sentences, :, :width] = value

    def bind(
        self, binding: ort.IOBinding, names: Sequence[str], block: np.ndarray, count: int, outputs: Sequence[str] = ()
    ) -> None:
        # Addresses are computed, not taken from a view of each layer: a view and its ``ctypes``
        # cost more than the binding.
        stride = block.strides[0]
        _bind_layers(binding, "cpu", 0, block.dtype.type, block.shape, address(block), stride, names, count, outputs)


@dataclass
class DeviceStorage:
    """Blocks as OrtValues on ``device`` (``"cuda"``, or ``"cpu"``), moved by graphs run there."""

    device: str = "cuda"
    device_id: int = 0
    _sessions: dict[tuple[str, type[np.floating]], ort.InferenceSession] = field(default_factory=dict, repr=False)

    def empty(self, shape: tuple[int, ...], dtype: type[np.floating]) -> DeviceBlock:
        block = self._allocated(shape, dtype)
        self._zero(block)
        return block

    def resized(self, block: DeviceBlock, places: int, width: int, live: int, keep_width: int) -> DeviceBlock:
        layers, _, heads, _, d_head = block.shape
        resized = self._allocated((layers, places, heads, width, d_head), block.dtype)
        if not (places and width and live and keep_width):  # nothing to keep (a size-0 value has no address)
            self._zero(resized)
            return resized
        binding = self._session("resize", block.dtype).io_binding()
        self._bind_whole(binding, "block", block)
        self._bind_whole(binding, "resized", resized, output=True)
        binding.bind_cpu_input("kept", np.array([live, keep_width], dtype=np.int64))
        pads = np.zeros(10, dtype=np.int64)  # each axis's start, then each axis's end
        pads[5 + 1], pads[5 + 3] = places - live, width - keep_width
        binding.bind_cpu_input("pads", pads)
        self._run("resize", block.dtype, binding)
        return resized

    def move(
        self, block: DeviceBlock, dst: Sequence[int], src: Sequence[int], widths: Sequence[int] | None = None
    ) -> None:
        binding = self._session("move", block.dtype).io_binding()
        self._bind_whole(binding, "block", block)
        self._bind_whole(binding, "moved", block, output=True)
        binding.bind_cpu_input("src", np.asarray(src, dtype=np.int64))
        binding.bind_cpu_input("places", _places(block.shape[0], np.asarray(dst, dtype=np.int64)))
        self._run("move", block.dtype, binding)

    def write(self, block: DeviceBlock, start: int, values: Sequence[np.ndarray]) -> None:
        written = np.stack(values).astype(block.dtype, copy=False)  # (L, B, H, S, Dh)
        binding = self._session("write", block.dtype).io_binding()
        self._bind_whole(binding, "block", block)
        self._bind_whole(binding, "written", block, output=True)
        binding.bind_cpu_input("values", written)
        pads = np.zeros(10, dtype=np.int64)
        pads[5 + 3] = block.shape[3] - written.shape[3]
        binding.bind_cpu_input("pads", pads)
        places = np.arange(start, start + written.shape[1], dtype=np.int64)
        binding.bind_cpu_input("places", _places(block.shape[0], places))
        self._run("write", block.dtype, binding)

    def bind(
        self, binding: ort.IOBinding, names: Sequence[str], block: DeviceBlock, count: int, outputs: Sequence[str] = ()
    ) -> None:
        stride = math.prod(block.shape[1:]) * np.dtype(block.dtype).itemsize
        _bind_layers(
            binding,
            self.device,
            self.device_id,
            block.dtype,
            block.shape,
            address(block),
            stride,
            names,
            count,
            outputs,
        )

    def _bind_whole(self, binding: ort.IOBinding, name: str, block: DeviceBlock, *, output: bool = False) -> None:
        bind = binding.bind_output if output else binding.bind_input
        bind(name, self.device, self.device_id, block.dtype, list(block.shape), address(block))

    def _zero(self, block: DeviceBlock) -> None:
        """Zeros into ``block``: a slot's masked positions are read, and 0 x NaN is not 0."""
        if 0 in block.shape:
            return
        binding = self._session("zeros", block.dtype).io_binding()
        binding.bind_cpu_input("shape", np.array(block.shape, dtype=np.int64))
        self._bind_whole(binding, "zeros", block, output=True)
        self._run("zeros", block.dtype, binding)

    def _allocated(self, shape: tuple[int, ...], dtype: type[np.floating]) -> DeviceBlock:
        value = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, self.device, self.device_id)
        return DeviceBlock(value, shape, dtype)

    def _run(self, graph: str, dtype: type[np.floating], binding: ort.IOBinding) -> None:
        self._session(graph, dtype).run_with_iobinding(binding)

    def _session(self, graph: str, dtype: type[np.floating]) -> ort.InferenceSession:
        key = (graph, dtype)
        if key not in self._sessions:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            if self.device == "cuda":
                providers: list = [(CUDA, {"device_id": self.device_id})]
            else:
                providers = ["CPUExecutionProvider"]
            model = _GRAPHS[graph](dtype)
            self._sessions[key] = ort.InferenceSession(model.SerializeToString(), options, providers=providers)
        return self._sessions[key]


def _places(layers: int, places: np.ndarray) -> np.ndarray:
    """(L, k, 2) ScatterND indices: [layer, place] of each of ``places`` in every layer."""
    grid = np.broadcast_arrays(np.arange(layers)[:, None], places[None, :])
    return np.stack(grid, axis=-1).astype(np.int64)


def _bind_layers(
    binding: ort.IOBinding,
    device: str,
    device_id: int,
    dtype: type[np.floating],
    shape: tuple[int, ...],
    address: int,
    stride: int,  # bytes from one layer to the next
    names: Sequence[str],
    count: int,
    outputs: Sequence[str],
) -> None:
    layer_shape = [count, *shape[2:]]
    for i, name in enumerate(names):
        binding.bind_input(name, device, device_id, dtype, layer_shape, address + i * stride)
    for i, name in enumerate(outputs):
        binding.bind_output(name, device, device_id, dtype, layer_shape, address + i * stride)


# -- the moving graphs -------------------------------------------------------------------------


def _model(nodes: list, inputs: list, outputs: list):  # type: ignore[no-untyped-def]
    from onnx import helper

    graph = helper.make_graph(nodes, "pool_storage", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _block_info(name: str, dtype: type[np.floating]):  # type: ignore[no-untyped-def]
    from onnx import helper

    element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return helper.make_tensor_value_info(name, element, ["L", "P", "H", "W", "Dh"])


def _ints(name: str, dims: list[str | int]):  # type: ignore[no-untyped-def]
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.INT64, dims)


def _move_graph(dtype: type[np.floating]):  # type: ignore[no-untyped-def]
    """moved = block with places[l, i] = block[l, src[i]]; bound to the block's own memory."""
    from onnx import helper

    nodes = [
        helper.make_node("Gather", ["block", "src"], ["rows"], axis=1),  # (L, k, H, W, Dh)
        helper.make_node("ScatterND", ["block", "places", "rows"], ["moved"]),
    ]
    inputs = [_block_info("block", dtype), _ints("src", ["k"]), _ints("places", ["L", "k", 2])]
    return _model(nodes, inputs, [_block_info("moved", dtype)])


def _write_graph(dtype: type[np.floating]):  # type: ignore[no-untyped-def]
    """written = block with places[l, b] = values[l, b] padded to W with zeros."""
    from onnx import helper

    nodes = [
        helper.make_node("Pad", ["values", "pads"], ["padded"], mode="constant"),  # (L, B, H, W, Dh)
        helper.make_node("ScatterND", ["block", "places", "padded"], ["written"]),
    ]
    inputs = [
        _block_info("block", dtype),
        _block_info("values", dtype),
        _ints("pads", [10]),
        _ints("places", ["L", "B", 2]),
    ]
    return _model(nodes, inputs, [_block_info("written", dtype)])


def _resize_graph(dtype: type[np.floating]):  # type: ignore[no-untyped-def]
    """resized = block's first kept[0] places, kept[1] wide, padded with zeros."""
    from onnx import helper, numpy_helper

    constants = {"zeros": np.zeros(2, dtype=np.int64), "axes": np.array([1, 3], dtype=np.int64)}
    nodes = [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))
             for name, value in constants.items()]  # fmt: skip
    nodes += [
        helper.make_node("Slice", ["block", "zeros", "kept", "axes"], ["kept_block"]),
        helper.make_node("Pad", ["kept_block", "pads"], ["resized"], mode="constant"),
    ]
    inputs = [_block_info("block", dtype), _ints("kept", [2]), _ints("pads", [10])]
    return _model(nodes, inputs, [_block_info("resized", dtype)])


def _zeros_graph(dtype: type[np.floating]):  # type: ignore[no-untyped-def]
    from onnx import helper

    zero = helper.make_tensor("zero", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [1], [0])
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["zeros"], value=zero)]
    return _model(nodes, [_ints("shape", [5])], [_block_info("zeros", dtype)])


_GRAPHS = {"move": _move_graph, "write": _write_graph, "resize": _resize_graph, "zeros": _zeros_graph}


def _untouched(shape: tuple[int, ...], dtype: type[np.floating]) -> np.ndarray:
    """Zeros in private anonymous memory without huge pages: the kernel commits a page when it is
    first written, so a buffer as wide as a row could ever need costs what the rows reach. (numpy
    asks for huge pages for large arrays, which would commit 2 MiB at a first write; ``mmap``'s
    default, a shared mapping, is shared memory, whose pages cost more to commit: the pool ran 2%
    slower offline on it, benchmarks/RESULTS.md section 31.)"""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if size == 0:
        return np.zeros(shape, dtype=dtype)
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    memory.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(memory, dtype=dtype).reshape(shape)
