"""The vocabulary shortlist: each batch scores only the target pieces its sources make likely.

A bundle may carry a shortlist file (``export.shortlist`` builds it from a parallel corpus): for
each source piece its ``k`` likeliest target pieces, and the ``frequent`` most frequent target
pieces. A batch's shortlist is the union of its source pieces' rows, the frequent pieces and the
pieces the batch must be able to write (EOS, the target language's tokens, glossary terms). The
decoder then computes the output projection, LogSoftmax and TopK over those M pieces only, the
largest part of a step on a large vocabulary (what Marian's lexical shortlist and CTranslate2's
vocabulary map do).

The decoder graph takes the shortlist as an input, ``vocab_ids`` (M,) int64: ``add_vocab_ids``
adds it to an exported graph when the engine loads it (``engine.runner.decoder_graph``), so that
bundles need no second graph.
With all V ids the graph runs its original projection (an If node), so one session serves both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.step_head import HEAD_OUTPUTS, branch, head_nodes, nodes_computing
from engine.top_k import SCORES, scored_vocabulary

if TYPE_CHECKING:  # onnx is needed only to edit a graph, at load time
    import onnx

VOCAB_IDS = "vocab_ids"


@dataclass(frozen=True)
class Shortlist:
    """``table`` (V_source, k): each source piece's likeliest target pieces, best first, -1 where it
    has fewer; ``frequent`` (F,): the most frequent target pieces."""

    table: np.ndarray
    frequent: np.ndarray

    @classmethod
    def load(cls, path: Path) -> Shortlist:
        # Kept in the file's integer type (int16 or int32): as int64, OPUS-MT's table (58,101 x 100)
        # would take 46 MB in every engine process, where its stored type takes 12.
        with np.load(path) as data:
            return cls(data["table"], data["frequent"])

    def save(self, path: Path) -> None:
        dtype = np.int32 if max(self.table.max(initial=0), self.frequent.max(initial=0)) >= 2**15 else np.int16
        with path.open("wb") as f:  # np.savez would add ".npz" to a name without it
            np.savez_compressed(f, table=self.table.astype(dtype), frequent=self.frequent.astype(dtype))

    @property
    def k(self) -> int:
        return self.table.shape[1]

    def cut(self, k: int, frequent: int) -> Shortlist:
        """The same shortlist with each source piece's ``k`` best and the ``frequent`` most frequent."""
        return Shortlist(self.table[:, :k], self.frequent[:frequent])

    def for_batch(self, sources: Sequence[Sequence[int]], extra: Iterable[int]) -> np.ndarray:
        """(M,) int64 sorted target ids: the shortlist of a batch of source id sequences, with ``extra``."""
        source_ids = np.fromiter((i for s in sources for i in s), dtype=np.int64)
        rows = self.table[source_ids[source_ids < len(self.table)]].ravel()
        ids = np.concatenate([rows[rows >= 0], self.frequent, np.fromiter(extra, dtype=np.int64)])
        return np.unique(ids)


# ---------------------------------------------------------------------------------------------
# The decoder graph with a ``vocab_ids`` input
# ---------------------------------------------------------------------------------------------

# The session option naming the directory of a graph's external weights when it is loaded from bytes.
EXTERNAL_FOLDER = "session.model_external_initializers_file_folder_path"


def add_vocab_ids(model: onnx.ModelProto, base_dir: str = "") -> None:
    """Add the input ``vocab_ids`` (M,) int64 to a decoder-step graph, in place; ``base_dir``: where
    its external weights are.

    Its outputs stay the same, over the M pieces: ``log_probs`` (N, M), ``top_log_probs`` and
    ``top_ids`` (N, C), the latter vocabulary ids. Given all V ids (``np.arange(V)``) it runs the
    original projection, LogSoftmax and TopK; given fewer, it gathers the projection's columns (and
    each V-sized constant after it: bias, banned tokens, int8 scales) for those ids first.

    The nodes computing only the head outputs (the output projection, with int8 its activation's
    quantization, LogSoftmax, TopK) move into an If node, whose full branch is them as they are and
    whose shortlist branch scores ``vocab_ids`` only."""
    import onnx
    from onnx import TensorProto, helper

    graph = model.graph
    vocab = scored_vocabulary(graph)
    nodes = list(graph.node)
    in_head = head_nodes(nodes, [o.name for o in graph.output])
    head = [n for i, n in enumerate(nodes) if i in in_head]
    projection = [n for i, n in enumerate(nodes) if i in in_head & nodes_computing(nodes, [SCORES])]
    kept = [n for i, n in enumerate(nodes) if i not in in_head]
    size, is_full, all_ids = "/vocab_ids/size", "/vocab_ids/is_full", "/vocab_ids/V"
    graph.initializer.append(onnx.numpy_helper.from_array(np.array(vocab, dtype=np.int64), all_ids))
    branches = {
        "then_branch": branch("full", head, HEAD_OUTPUTS),
        "else_branch": _shortlist_branch(graph, projection, vocab, base_dir),
    }
    switch = [
        helper.make_node("Size", [VOCAB_IDS], [size]),
        helper.make_node("Equal", [size, all_ids], [is_full]),
        helper.make_node("If", [is_full], list(HEAD_OUTPUTS), name="/vocab_ids/If", **branches),
    ]
    del graph.node[:]
    graph.node.extend(kept + switch)
    # After candidates, as engine.bundle's signature lists it, whichever inputs other edits added
    after = next(i for i, value in enumerate(graph.input) if value.name == "candidates") + 1
    graph.input.insert(after, helper.make_tensor_value_info(VOCAB_IDS, TensorProto.INT64, ["M"]))
    log_probs = next(o for o in graph.output if o.name == "log_probs")
    log_probs.type.tensor_type.shape.dim[1].dim_param = "M"  # (N, M): V when the ids are all of them


def _shortlist_branch(
    graph: onnx.GraphProto, projection: list[onnx.NodeProto], vocab: int, base_dir: str
) -> onnx.GraphProto:
    """The projection and LogSoftmax with each V-sized constant gathered at ``vocab_ids``, then
    TopK over the M columns and the positions it picks mapped back to vocabulary ids."""
    from onnx import helper

    initializers = {i.name: i for i in graph.initializer}
    gathered: dict[str, str] = {}
    gathers: list[onnx.NodeProto] = []
    for node in projection:
        for name in node.input:
            if name in initializers and name not in gathered and initializers[name].dims[-1:] == [vocab]:
                gathered[name] = f"{name}/gathered"
                gathers += _gather_columns(graph, initializers[name], gathered[name], base_dir)
    edited = []
    for node in projection:
        copy = type(node)()
        copy.CopyFrom(node)
        copy.input[:] = [gathered.get(i, i) for i in node.input]
        edited.append(copy)
    top = [
        helper.make_node("TopK", ["log_probs", "candidates"], ["top_log_probs", "position"], axis=-1),
        helper.make_node("Gather", [VOCAB_IDS, "position"], ["top_ids"], axis=0),
    ]
    return branch("short", gathers + edited + top, HEAD_OUTPUTS)


def _gather_columns(graph: onnx.GraphProto, weight: onnx.TensorProto, out: str, base_dir: str) -> list[onnx.NodeProto]:
    """Nodes computing ``weight[..., vocab_ids]`` into ``out``. A (D, V) matrix is gathered by rows
    from its (V, D) transpose, which is contiguous: the target embedding when the model ties it to
    the projection, else a copy added to the graph."""
    from onnx import helper

    if len(weight.dims) == 1:
        return [helper.make_node("Gather", [weight.name, VOCAB_IDS], [out], axis=0)]
    rows = _transpose_initializer(graph, weight, base_dir)
    return [
        helper.make_node("Gather", [rows, VOCAB_IDS], [f"{out}/rows"], axis=0),  # (M, D)
        helper.make_node("Transpose", [f"{out}/rows"], [out], perm=[1, 0]),  # (D, M)
    ]


def _transpose_initializer(graph: onnx.GraphProto, weight: onnx.TensorProto, base_dir: str) -> str:
    """The name of an initializer holding ``weight``'s transpose: an existing one (a tied
    embedding) or a new one. ``base_dir``: where external weights are."""
    from onnx import numpy_helper

    transposed = np.ascontiguousarray(numpy_helper.to_array(weight, base_dir).T)
    for init in graph.initializer:
        if tuple(init.dims) == transposed.shape:
            array = numpy_helper.to_array(init, base_dir)
            if array.dtype == transposed.dtype and np.array_equal(array, transposed):
                return init.name
    name = f"{weight.name}/rows"
    graph.initializer.append(numpy_helper.from_array(transposed, name))
    return name
