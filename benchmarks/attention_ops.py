"""Self-attention operators for a decoder step over ragged rows, side by side: ``python -m benchmarks.attention_ops``.

    python -m benchmarks.attention_ops [--shapes 4x32 8x64] [--rows 32 128] [--rounds 15] [--out FILE]

One layer's self-attention at one decoder step, as each operator onnxruntime offers would compute it
for N rows that each hold their own number of cached positions (the row pool's step, ``engine.pool``):
row n attends to its ``lengths[n]`` cached keys and values and to its new ones. Candidates:

- ``subgraph``: the exported step's attention (Concat of the cache and the new position, MatMul, Div,
  Softmax, MatMul), as the rectangle engine runs it: every row holds the longest row's T positions
  (a rectangle's rows started together), and the grown cache is a new tensor;
- ``MultiHeadAttention`` (contrib) with ``past_key``/``past_value``: the same rectangle, the present
  cache concatenated into a new tensor;
- ``GroupQueryAttention`` (contrib; the pool's): each row's own length (``seqlens_k``), the new
  keys and values written into the cache buffer (W positions) in place;
- ``DecoderMaskedMultiHeadAttention`` (contrib) with ``past_present_share_buffer``: in place, but at
  one write position shared by every row (``past_sequence_length``), rows told apart by a key mask;
  with ``--beam`` > 1 also its ``cache_indirection`` (beams read their ancestors' positions, so that
  reordering beams copies nothing);
- opset 24 ``Attention`` with ``nonpad_kv_seqlen`` over the buffer, after ``TensorScatter`` writes
  each row's new keys and values at its own length (in place, its output bound to the buffer).

Each candidate's output is checked against numpy's attention over each row's own positions (the
rectangle's: T each) before it is timed. Each round times ``--calls`` runs of each session in turn
(io binding prepared once, one thread); reported: the median over rounds of the microseconds per
run, and each against GroupQueryAttention's. The result file is ``--out`` (default
``benchmarks/results/attention_ops.json``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from benchmarks.common import RESULTS, markdown_table, settings_record, start_run, write_report

MS = "com.microsoft"
F32 = TensorProto.FLOAT


@dataclass(frozen=True)
class Case:
    """One step's shapes: N rows of H heads of Dh, each row's cached positions, buffers W wide."""

    heads: int
    d_head: int
    lengths: np.ndarray  # (N,) cached positions of each row
    width: int  # W: positions a cache buffer holds
    beam: int = 1  # rows per sentence, for cache_indirection

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @property
    def d_model(self) -> int:
        return self.heads * self.d_head

    @property
    def longest(self) -> int:
        return int(self.lengths.max())

    def rectangle(self) -> Case:
        """The rectangle engine's step for these rows: each as long as the longest."""
        return replace(self, lengths=np.full_like(self.lengths, self.longest))


@dataclass
class Tensors:
    """The step's values: the new position's q, k, v (N, 1, D) and the cached keys and values of
    each row at positions [0, its length) of (N, H, W, Dh) buffers (the rest is noise, which no
    candidate may read)."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    cache_k: np.ndarray
    cache_v: np.ndarray

    @classmethod
    def random(cls, case: Case, seed: int = 0) -> Tensors:
        rng = np.random.default_rng(seed)

        def normal(*shape: int) -> np.ndarray:
            return rng.standard_normal(shape).astype(np.float32)

        N, D, cache = case.rows, case.d_model, (case.rows, case.heads, case.width, case.d_head)
        return cls(normal(N, 1, D), normal(N, 1, D), normal(N, 1, D), normal(*cache), normal(*cache))


def reference(case: Case, t: Tensors) -> np.ndarray:
    """(N, 1, D): each row's attention over its own cached positions and its new one."""
    H, Dh = case.heads, case.d_head
    out = np.empty((case.rows, 1, case.d_model), dtype=np.float32)
    for n, length in enumerate(case.lengths.tolist()):
        q = t.q[n, 0].reshape(H, 1, Dh).astype(np.float64)
        k = np.concatenate([t.cache_k[n, :, :length], t.k[n, 0].reshape(H, 1, Dh)], axis=1).astype(np.float64)
        v = np.concatenate([t.cache_v[n, :, :length], t.v[n, 0].reshape(H, 1, Dh)], axis=1).astype(np.float64)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(Dh)  # (H, 1, length + 1)
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out[n, 0] = ((p / p.sum(axis=-1, keepdims=True)) @ v).reshape(-1)
    return out


# -- the candidates ------------------------------------------------------------------------------


class Candidate:
    """A session of one operator's graph, its io binding for ``case``, and its attention output."""

    name = ""
    opset = 17
    ragged = True  # it computes rows of their own lengths; False: the rectangle (``Case.rectangle``)

    def __init__(self, case: Case, t: Tensors) -> None:
        self.case = case
        model = helper.make_model(
            self.graph(case), opset_imports=[helper.make_opsetid("", self.opset), helper.make_opsetid(MS, 1)]
        )
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        self.binding = self.session.io_binding()
        self.keep: list[np.ndarray] = []  # what the binding points at
        self.buffers: dict[str, np.ndarray] = {}  # inputs bound as outputs too, by input name
        self.bind(t)

    def graph(self, case: Case) -> onnx.GraphProto:
        raise NotImplementedError

    def bind(self, t: Tensors) -> None:
        raise NotImplementedError

    def bind_inputs(self, feed: dict[str, np.ndarray]) -> None:
        for name, value in feed.items():
            value = np.ascontiguousarray(value)
            self.keep.append(value)
            self.binding.bind_cpu_input(name, value)

    def bind_cache_in_place(self, t: Tensors) -> None:
        """``out`` first (``output`` reads the first output bound), then copies of the cache
        buffers, each bound as ``past_*`` and as ``present_*``: the same memory."""
        self.binding.bind_output("out", "cpu")
        for name, output, cache in (("past_k", "present_k", t.cache_k), ("past_v", "present_v", t.cache_v)):
            buffer = self.buffers[name] = cache.copy()
            shape = list(buffer.shape)
            self.binding.bind_input(name, "cpu", 0, buffer.dtype, shape, buffer.ctypes.data)
            self.binding.bind_output(output, "cpu", 0, buffer.dtype, shape, buffer.ctypes.data)

    def run(self) -> None:
        self.session.run_with_iobinding(self.binding)

    def output(self) -> np.ndarray:
        self.run()
        return self.binding.get_outputs()[0].numpy()


def _inputs(*specs: tuple[str, int, list]) -> list[onnx.ValueInfoProto]:
    return [helper.make_tensor_value_info(name, dtype, shape) for name, dtype, shape in specs]


def _outputs(*names: str) -> list[onnx.ValueInfoProto]:
    return [helper.make_tensor_value_info(name, F32, None) for name in names]


def _qkv(case: Case) -> list[tuple[str, int, list]]:
    return [(name, F32, [case.rows, 1, case.d_model]) for name in ("q", "k", "v")]


def _key_mask(case: Case) -> np.ndarray:
    """(N, T + 1), T the longest row's length: 1 where a row has a key, its own positions and the
    new one at T."""
    T = case.longest
    mask = (np.arange(T + 1)[None, :] < case.lengths[:, None]).astype(np.int32)
    mask[:, T] = 1
    return mask


def _split_heads(case: Case) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Nodes taking each of q, k, v (N, 1, D) to its heads, ``qh``... (N, H, 1, Dh), and the
    constants they and ``_merged_heads`` read."""
    nodes = []
    for x in ("q", "k", "v"):
        nodes += [
            helper.make_node("Reshape", [x, "heads"], [f"{x}4"]),
            helper.make_node("Transpose", [f"{x}4"], [f"{x}h"], perm=[0, 2, 1, 3]),
        ]
    constants = [
        helper.make_tensor("heads", TensorProto.INT64, [4], [0, 1, case.heads, case.d_head]),
        helper.make_tensor("merged", TensorProto.INT64, [3], [0, 1, case.d_model]),
    ]
    return nodes, constants


def _merged_heads() -> list[onnx.NodeProto]:
    """Nodes taking ``oh`` (N, H, 1, Dh) to ``out`` (N, 1, D)."""
    return [
        helper.make_node("Transpose", ["oh"], ["o4"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["o4", "merged"], ["out"]),
    ]


class Rectangle(Candidate):
    """A rectangle engine's step: the cache (N, H, T, Dh) of the longest row's T positions in,
    the grown cache out, a new tensor."""

    ragged = False

    def bind(self, t: Tensors) -> None:
        T = self.case.longest
        self.bind_inputs({"q": t.q, "k": t.k, "v": t.v, "past_k": t.cache_k[:, :, :T], "past_v": t.cache_v[:, :, :T]})
        for name in ("out", "present_k", "present_v"):
            self.binding.bind_output(name, "cpu")


class Subgraph(Rectangle):
    name = "subgraph (rectangle)"

    def graph(self, case: Case) -> onnx.GraphProto:
        nodes, constants = _split_heads(case)
        nodes += [
            helper.make_node("Concat", ["past_k", "kh"], ["present_k"], axis=2),  # (N, H, T + 1, Dh)
            helper.make_node("Concat", ["past_v", "vh"], ["present_v"], axis=2),
            helper.make_node("Transpose", ["present_k"], ["kt"], perm=[0, 1, 3, 2]),
            helper.make_node("MatMul", ["qh", "kt"], ["scores"]),  # (N, H, 1, T + 1)
            helper.make_node("Div", ["scores", "scale"], ["scaled"]),
            helper.make_node("Softmax", ["scaled"], ["p"], axis=-1),
            helper.make_node("MatMul", ["p", "present_v"], ["oh"]),  # (N, H, 1, Dh)
            *_merged_heads(),
        ]
        constants.append(helper.make_tensor("scale", F32, [], [float(np.sqrt(case.d_head))]))
        cache = [case.rows, case.heads, case.longest, case.d_head]
        inputs = _inputs(*_qkv(case), ("past_k", F32, cache), ("past_v", F32, cache))
        return helper.make_graph(nodes, "subgraph", inputs, _outputs("out", "present_k", "present_v"), constants)


class MultiHeadAttention(Rectangle):
    name = "MultiHeadAttention (rectangle)"

    def graph(self, case: Case) -> onnx.GraphProto:
        T = case.longest
        cache = [case.rows, case.heads, T, case.d_head]
        node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "", "past_k", "past_v"],
                                ["out", "present_k", "present_v"], domain=MS, num_heads=case.heads)  # fmt: skip
        inputs = _inputs(*_qkv(case), ("past_k", F32, cache), ("past_v", F32, cache))
        return helper.make_graph([node], "mha", inputs, _outputs("out", "present_k", "present_v"))


class GroupQueryAttention(Candidate):
    name = "GroupQueryAttention (in place)"

    def graph(self, case: Case) -> onnx.GraphProto:
        cache = [case.rows, case.heads, case.width, case.d_head]
        node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total"],
                                ["out", "present_k", "present_v"], domain=MS, num_heads=case.heads,
                                kv_num_heads=case.heads)  # fmt: skip
        inputs = _inputs(*_qkv(case), ("past_k", F32, cache), ("past_v", F32, cache),
                         ("seqlens_k", TensorProto.INT32, [case.rows]), ("total", TensorProto.INT32, []))  # fmt: skip
        return helper.make_graph([node], "gqa", inputs, _outputs("out", "present_k", "present_v"))

    def bind(self, t: Tensors) -> None:
        case = self.case
        self.bind_inputs({"q": t.q, "k": t.k, "v": t.v, "seqlens_k": case.lengths.astype(np.int32),
                          "total": np.array(case.longest + 1, dtype=np.int32)})  # fmt: skip
        self.bind_cache_in_place(t)


class DecoderMaskedMultiHeadAttention(Candidate):
    name = "DecoderMaskedMultiHeadAttention (in place, one position)"

    def graph(self, case: Case) -> onnx.GraphProto:
        cache = [case.rows, case.heads, case.width, case.d_head]
        names = ["q", "k", "v", "mask", "", "past_k", "past_v", "past_length"]
        inputs = [*_qkv(case), ("mask", TensorProto.INT32, [case.rows, case.longest + 1]), ("past_k", F32, cache),
                  ("past_v", F32, cache), ("past_length", TensorProto.INT32, [1])]  # fmt: skip
        if case.beam > 1:
            names += ["beam_width", "cache_indirection"]
            grid = [case.rows // case.beam, case.beam, case.width]
            inputs += [("beam_width", TensorProto.INT32, [1]), ("cache_indirection", TensorProto.INT32, grid)]
        node = helper.make_node("DecoderMaskedMultiHeadAttention", names, ["out", "present_k", "present_v"],
                                domain=MS, num_heads=case.heads, past_present_share_buffer=1)  # fmt: skip
        return helper.make_graph([node], "dmmha", _inputs(*inputs), _outputs("out", "present_k", "present_v"))

    def bind(self, t: Tensors) -> None:
        case = self.case
        past_length = np.array([case.longest], dtype=np.int32)
        feed = {"q": t.q, "k": t.k, "v": t.v, "mask": _key_mask(case), "past_length": past_length}
        if case.beam > 1:  # every beam reads its own positions: the indirection's cost, not a reordering
            beams = np.arange(case.beam, dtype=np.int32)[None, :, None]
            own = np.broadcast_to(beams, (case.rows // case.beam, case.beam, case.width))
            feed |= {"beam_width": np.array([case.beam], dtype=np.int32), "cache_indirection": own}
        self.bind_inputs(feed)
        self.bind_cache_in_place(t)


class ScatteredAttention(Candidate):
    name = "Attention + TensorScatter (opset 24, in place)"
    opset = 24

    def graph(self, case: Case) -> onnx.GraphProto:
        cache = [case.rows, case.heads, case.width, case.d_head]
        nodes, constants = _split_heads(case)
        nodes += [
            helper.make_node("TensorScatter", ["past_k", "kh", "lengths"], ["present_k"], axis=2),
            helper.make_node("TensorScatter", ["past_v", "vh", "lengths"], ["present_v"], axis=2),
            helper.make_node("Add", ["lengths", "one"], ["nonpad"]),
            helper.make_node("Attention", ["qh", "present_k", "present_v", "", "", "", "nonpad"], ["oh"]),
            *_merged_heads(),
        ]
        constants.append(helper.make_tensor("one", TensorProto.INT64, [], [1]))
        inputs = _inputs(*_qkv(case), ("past_k", F32, cache), ("past_v", F32, cache),
                         ("lengths", TensorProto.INT64, [case.rows]))  # fmt: skip
        return helper.make_graph(nodes, "scattered", inputs, _outputs("out", "present_k", "present_v"), constants)

    def bind(self, t: Tensors) -> None:
        self.bind_inputs({"q": t.q, "k": t.k, "v": t.v, "lengths": self.case.lengths.astype(np.int64)})
        self.bind_cache_in_place(t)


CANDIDATES: list[type[Candidate]] = [
    Subgraph,
    MultiHeadAttention,
    GroupQueryAttention,
    DecoderMaskedMultiHeadAttention,
    ScatteredAttention,
]
BASELINE = GroupQueryAttention.name


# -- measuring -----------------------------------------------------------------------------------


def candidates_for(case: Case, t: Tensors) -> dict[str, Candidate | str]:
    """Each candidate's session for ``case``, checked against the reference; where one cannot
    compute it (onnxruntime refuses the graph or the shapes, or its output differs), why."""
    found: dict[str, Candidate | str] = {}
    for kind in CANDIDATES:
        computed = case if kind.ragged else case.rectangle()
        try:
            candidate = kind(computed, t)
            got = candidate.output()
        except Exception as e:  # an operator this onnxruntime build lacks is a finding, not a failure
            found[kind.name] = f"refused: {str(e).splitlines()[0][:200]}"
            continue
        error = float(np.abs(got - reference(computed, t)).max())
        found[kind.name] = candidate if error < 1e-4 else f"wrong: differs from the reference by up to {error:.3g}"
    return found


def time_runs(run: Callable[[], None], calls: int) -> float:
    """Microseconds per call, over ``calls`` calls after one untimed."""
    run()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls * 1e6


def measure(case: Case, args: argparse.Namespace) -> dict:
    found = candidates_for(case, Tensors.random(case))
    sessions = {name: c for name, c in found.items() if isinstance(c, Candidate)}
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for round_ in range(args.rounds):
        order = list(sessions) if round_ % 2 == 0 else list(sessions)[::-1]
        for name in order:
            times[name].append(time_runs(sessions[name].run, args.calls))
    us = {name: statistics.median(t) for name, t in times.items()}
    return {
        "heads": case.heads,
        "d_head": case.d_head,
        "rows": case.rows,
        "beam": case.beam,
        "mean_length": float(case.lengths.mean()),
        "longest": case.longest,
        "width": case.width,
        "us": us,
        "us_all": times,
        "not_measured": {name: why for name, why in found.items() if isinstance(why, str)},
    }


def row_lengths(kind: str, rows: int, longest: int, seed: int = 0) -> np.ndarray:
    """Cached positions of ``rows`` rows: ``equal``, each ``longest`` (a rectangle's rows, which
    started together), or ``ragged``, uniform in [1, longest] (a pool's), the longest among them."""
    if kind == "equal":
        return np.full(rows, longest)
    lengths = np.random.default_rng(seed).integers(1, longest + 1, rows)
    lengths[0] = longest
    return lengths


def results_table(results: list[dict]) -> str:
    names = [kind.name for kind in CANDIDATES]
    header = ["H × Dh", "rows", "beam", "lengths (mean, longest)", *(f"{n} µs" for n in names)]
    rows = []
    for r in results:
        baseline = r["us"].get(BASELINE)

        def cell(name: str, r: dict = r, baseline: float | None = baseline) -> str:
            if name not in r["us"]:
                return "n/a"
            ratio = f" ({r['us'][name] / baseline:.2f}×)" if baseline else ""
            return f"{r['us'][name]:.1f}{ratio}"

        lengths = f"{r['mean_length']:.1f}, {r['longest']}"
        rows.append([f"{r['heads']} × {r['d_head']}", r["rows"], r["beam"], lengths, *(cell(n) for n in names)])
    notes = sorted({f"- {name}: {why}" for r in results for name, why in r["not_measured"].items()})
    return markdown_table(header, rows) + ("\n\nNot measured:\n" + "\n".join(notes) if notes else "")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["4x32", "8x64"],
                        help="HEADSxD_HEAD: the shipped models' and OPUS-MT's")  # fmt: skip
    parser.add_argument("--rows", nargs="+", type=int, default=[32, 128])
    parser.add_argument("--beams", nargs="+", type=int, default=[1, 4], help="rows per sentence (cache_indirection)")
    parser.add_argument("--lengths", nargs="+", choices=["ragged", "equal"], default=["ragged", "equal"],
                        help="the rows' cached positions: uniform in [1, --longest], or all --longest")  # fmt: skip
    parser.add_argument("--longest", type=int, default=40, help="the longest row's cached positions")
    parser.add_argument("--width", type=int, default=256, help="W: positions a cache buffer holds")
    parser.add_argument("--calls", type=int, default=50, help="timed runs per session per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS / "attention_ops.json", help="the result file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.attention_ops", argv)
    args = parse_args(start.argv)
    results = []
    for shape in args.shapes:
        heads, d_head = (int(x) for x in shape.split("x"))
        for rows in args.rows:
            for lengths in args.lengths:
                for beam in args.beams:
                    case = Case(heads, d_head, row_lengths(lengths, rows, args.longest), args.width, beam)
                    results.append(measure(case, args))
                    print(f"{shape} {rows} rows, {lengths}, beam {beam}: {results[-1]['us']}", flush=True)
    write_report(
        start, args.out, {"settings": settings_record(args), "results": results, "markdown": results_table(results)}
    )


if __name__ == "__main__":
    main()
