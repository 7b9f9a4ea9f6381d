"""The row pool's storages (engine/pool_storage.py): the device's blocks, moved by graph runs on
the CPU's device here, hold what the host's numpy blocks hold after every operation."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from engine.pool_storage import DeviceBlock, DeviceStorage, HostStorage


def contents(block: np.ndarray | DeviceBlock) -> np.ndarray:
    return block.value.numpy() if isinstance(block, DeviceBlock) else np.asarray(block)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_device_blocks_hold_what_host_blocks_hold_through_every_operation(dtype: type[np.floating]) -> None:
    rng = np.random.default_rng(0)
    host, device = HostStorage(), DeviceStorage("cpu")
    blocks = [storage.empty((3, 0, 2, 8, 4), dtype) for storage in (host, device)]
    assert all(contents(b).shape == (3, 0, 2, 8, 4) for b in blocks)

    def each(operation) -> None:  # type: ignore[no-untyped-def]
        for i, storage in enumerate((host, device)):
            resized = operation(storage, blocks[i])
            blocks[i] = blocks[i] if resized is None else resized
        assert contents(blocks[1]).dtype == dtype
        np.testing.assert_array_equal(contents(blocks[0]), contents(blocks[1]))

    each(lambda storage, block: storage.resized(block, 6, 8, 0, 0))  # grown from nothing: zeros
    assert not contents(blocks[1]).any()
    values = [rng.standard_normal((4, 2, 5, 4)).astype(dtype) for _ in range(3)]
    each(lambda storage, block: storage.write(block, 1, values))  # places 1-4, 5 of 8 positions
    each(lambda storage, block: storage.move(block, [0, 5], [2, 3]))  # whole places
    each(lambda storage, block: storage.resized(block, 10, 12, 6, 8))  # more places, wider
    each(lambda storage, block: storage.resized(block, 4, 5, 3, 5))  # fewer, narrower


def test_a_device_block_is_zeros_from_the_start_and_moves_only_what_it_is_told() -> None:
    device = DeviceStorage("cpu")
    block = device.empty((2, 5, 1, 3, 2), np.float32)
    assert not contents(block).any()  # a slot's masked positions are read: never uninitialised memory
    device.write(block, 0, [np.ones((5, 1, 3, 2), np.float32) * np.arange(5)[:, None, None, None]] * 2)
    device.move(block, [4], [1])
    expected = np.broadcast_to(np.array([0, 1, 2, 3, 1], np.float32)[None, :, None, None, None], (2, 5, 1, 3, 2))
    np.testing.assert_array_equal(contents(block), expected)


def test_a_bound_block_is_read_and_written_in_place() -> None:
    """The step's binding: each layer's first ``count`` places, by address, as an input and as an
    output: a graph adding 1 to its input changes exactly layer 0's first two places, in the block."""
    from onnx import TensorProto, helper

    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 1, 3, 2]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "add", info[:1], info[1:], [one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = np.zeros((2, 4, 1, 3, 2), np.float32)
    expected[0, :2] = 1
    for storage in (HostStorage(), DeviceStorage("cpu")):
        block = storage.empty((2, 4, 1, 3, 2), np.float32)
        binding = session.io_binding()
        storage.bind(binding, ["x"], block, 2, ["y"])
        session.run_with_iobinding(binding)
        np.testing.assert_array_equal(contents(block), expected)
