"""The row pool's step at a few fixed shapes, each captured once as a CUDA graph and replayed.

On a GPU a decoder step of a small model is mostly kernel launches: hundreds of small kernels,
each launched from the host. A CUDA graph replays a recorded run's kernels in one launch, at the
shapes and addresses they were recorded with. onnxruntime records a session's run
(``enable_cuda_graph``) once for each ``gpu_graph_id`` a run names, and replays it at later runs
with that id, provided every input and output is bound where it was. So the pool's step
(``engine.pool``, with ``PoolConfig.fixed_shapes``) runs at one of a few shapes:

- its rows rounded up to a power of two (at least ``MIN_PLACES``), its slots too, and each slot's
  queries too; its candidates as asked;
- each shape has its inputs and outputs in device memory, bound once; a step writes its inputs
  into them (``OrtValue.update_inplace``) and reads back its own rows' outputs;
- the caches and slots are the pool's blocks, bound by address: with fixed shapes the pool's
  blocks only grow, and blocks that moved make a new shape, captured under a new id;
- the inputs the step reads on the host (the candidates' count, the attention's total length, the
  buffer's width with fixed shapes) are part of the shape: a graph replays what it recorded.

Padding rows read position 0 of free rows (and write their keys there, which a row that takes it
later overwrites before it reads it), padding queries are row 0's, and a padding slot attends to
its first position: every padded value is finite, and nobody reads what padding returns. Each row's
outputs do not depend on the rows beside it, so a step gives its rows what the plain step gives
them (tests/engine/test_captured_step.py).

On the CPU, or on CUDA without ``enable_cuda_graph``, the same shapes run without capture: what the
tests check on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from engine.pool_graph import QUERY_SLOTS, ROW_SLOTS, TOTAL_LENGTH
from engine.pool_storage import Block, Storage, address
from engine.runner import CUDA
from engine.step_head import ALL_LOG_PROBS

MIN_PLACES = 8  # the fewest rows (slots) a shape has: fewer shapes, each captured once
# onnxruntime keeps a captured graph, and the memory its run held, for the session's life: at most
# this many shapes are kept, and a step of any other shape runs uncaptured, its buffers made for it.
MAX_SHAPES = 64
# What the step reads in host memory (TopK's count, the attention's total length, whether the head
# returns every log-probability): bound there, so that nothing is copied out of the device mid-step.
HOST_INPUTS = frozenset({"candidates", TOTAL_LENGTH, ALL_LOG_PROBS})
# Graph ids are a session's; several pools may share one, so ids come from one count per process
# (from 1: onnxruntime keeps 0 for itself, -1 runs without a graph), and runs that may capture take
# turns (a capture records the device's whole stream).
_GRAPH_IDS = itertools.count(1)
_CAPTURING = threading.Lock()


def bucket(count: int, most: int) -> int:
    """``count`` places rounded up to a power of two, at least ``MIN_PLACES``, at most ``most``."""
    return min(most, max(MIN_PLACES, power_of_two(count)))


def power_of_two(n: int) -> int:
    """The least power of two at least ``n``."""
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class Blocks:
    """The pool's blocks as a step reads them: the caches, the slots, and how many of each are live
    and allocated."""

    cache: Block
    cross: Block
    rows: int
    slots: int
    rows_allocated: int
    slots_allocated: int


@dataclass
class _Shape:
    """One fixed shape's binding, its inputs and outputs, and the options its runs name its graph by."""

    binding: ort.IOBinding
    inputs: dict[str, tuple[ort.OrtValue, np.ndarray]]  # each device input and its host staging array
    host: list[np.ndarray]  # the host inputs' arrays, which their OrtValues may share
    replay: ort.RunOptions | None  # its runs' options: its graph id where capture is on
    outputs: dict[str, ort.OrtValue] | None = None  # bound once the first run has given their shapes


class CapturedStep:
    """Runs a pool's step (``session``, the step ``engine.pool_graph`` makes) at fixed shapes
    (module docstring); captured as CUDA graphs when ``session`` has ``enable_cuda_graph`` on."""

    def __init__(
        self,
        session: ort.InferenceSession,
        storage: Storage,
        cache_names: Sequence[str],
        present_names: Sequence[str],
        cross_names: Sequence[str],
    ) -> None:
        """``storage``: the pool's, whose device the step's inputs and outputs are kept on."""
        self.session, self.storage = session, storage
        self.device, self.device_id = storage.device, storage.device_id
        self.cache_names, self.present_names, self.cross_names = cache_names, present_names, cross_names
        self.capture = session.get_provider_options().get(CUDA, {}).get("enable_cuda_graph") == "1"
        self.output_names = [o.name for o in session.get_outputs() if o.name not in present_names]
        self._uncaptured = self._options(-1)
        self._shapes: dict[tuple, _Shape] = {}

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        """The rows, slots and queries a slot of each shape run so far (a graph each, with
        capture on)."""
        return [key[:3] for key in self._shapes]

    def run(self, feed: dict[str, np.ndarray], outputs: dict[str, np.ndarray], blocks: Blocks) -> None:
        """The step over ``feed`` (as the plain step takes it: ``blocks.rows`` rows, ``blocks.slots``
        slots), its outputs written into ``outputs``' arrays (their first rows, as the plain step
        returns them)."""
        rows = bucket(blocks.rows, blocks.rows_allocated)
        slots = bucket(blocks.slots, blocks.slots_allocated)
        queries = max(2, power_of_two(len(feed[QUERY_SLOTS]) // max(blocks.slots, 1)))
        host = tuple((name, feed[name].tobytes()) for name in sorted(HOST_INPUTS & feed.keys()))
        where = [(address(block), block.shape) for block in (blocks.cache, blocks.cross)]
        key = (rows, slots, queries, host, *where)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._new_shape(feed, rows, slots, queries, blocks)
            if len(self._shapes) < MAX_SHAPES:
                self._shapes[key] = shape
        _pad(feed, shape.inputs, blocks.rows, blocks.slots, queries)
        for value, staged in shape.inputs.values():
            value.update_inplace(staged)
        with _CAPTURING if self.capture else contextlib.nullcontext():
            self._run(shape)
        assert shape.outputs is not None
        for name, array in outputs.items():
            array[...] = shape.outputs[name].numpy()[: len(array)]

    def _run(self, shape: _Shape) -> None:
        if shape.outputs is not None:
            self.session.run_with_iobinding(shape.binding, shape.replay)
            return
        # The first run at a shape, not captured, allocates the outputs (bound first, before the
        # caches); bound where they are, later runs write into them, and capture records them there.
        self.session.run_with_iobinding(shape.binding, self._uncaptured)
        made = shape.binding.get_outputs()[: len(self.output_names)]
        shape.outputs = dict(zip(self.output_names, made, strict=True))
        for name, value in shape.outputs.items():
            shape.binding.bind_ortvalue_output(name, value)

    def _options(self, graph_id: int) -> ort.RunOptions | None:
        if not self.capture:
            return None
        options = ort.RunOptions()
        options.add_run_config_entry("gpu_graph_id", str(graph_id))  # -1: run without a graph
        return options

    def _new_shape(self, feed: dict[str, np.ndarray], rows: int, slots: int, queries: int, blocks: Blocks) -> _Shape:
        binding = self.session.io_binding()
        inputs, host = {}, []
        for name, value in feed.items():
            if name in HOST_INPUTS:
                host.append(np.array(value))
                binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(host[-1]))
                continue
            staged = np.zeros((_padded_length(name, rows, slots, queries), *value.shape[1:]), dtype=value.dtype)
            device_value = ort.OrtValue.ortvalue_from_numpy(staged, self.device, self.device_id)
            binding.bind_ortvalue_input(name, device_value)
            inputs[name] = (device_value, staged)
        for name in self.output_names:
            binding.bind_output(name, self.device, self.device_id)
        self.storage.bind(binding, self.cache_names, blocks.cache, rows, self.present_names)
        self.storage.bind(binding, self.cross_names, blocks.cross, slots)
        return _Shape(binding, inputs, host, self._options(next(_GRAPH_IDS)))


def _padded_length(name: str, rows: int, slots: int, queries: int) -> int:
    """The first dimension of device input ``name`` at a shape."""
    if name == QUERY_SLOTS:
        return slots * queries
    if name == "src_mask":
        return slots
    return rows  # tokens, positions, row_slots


def _pad(
    feed: dict[str, np.ndarray],
    inputs: dict[str, tuple[ort.OrtValue, np.ndarray]],
    live_rows: int,
    live_slots: int,
    queries: int,
) -> None:
    """``feed`` into the shape's staging arrays, padded (module docstring)."""
    given = len(feed[QUERY_SLOTS]) // max(live_slots, 1)  # each slot's queries in the plain step
    for name, (_, staged) in inputs.items():
        value = feed[name]
        if name == QUERY_SLOTS:
            staged[:] = 0
            staged.reshape(-1, queries)[:live_slots, :given] = value.reshape(live_slots, given)
        elif name == ROW_SLOTS:
            staged[:] = 0
            staged[:live_rows] = value // given * queries + value % given
        elif name == "src_mask":
            staged[:] = False
            staged[:, 0] = True
            staged[:live_slots] = value
        else:
            staged[:] = 0
            staged[: len(value)] = value
