"""One decoder step, graph against graph: ``python -m benchmarks.step --bundle NEW --baseline-bundle OLD``.

    python -m benchmarks.step --bundle DIR --baseline-bundle DIR [--rows 8 32 128] [--rounds 15] [--out FILE]

For a change to the exported decoder-step graph (two exports of one checkpoint, or of two
checkpoints of one shape): each variant's step graph of both bundles in onnxruntime sessions of
one thread, run on the same inputs (N rows of beam-4 decoding, ``--cached`` positions in the
self-attention cache, ``--source`` source positions, random values of a fixed seed), fetching what
the engine fetches between steps (the top candidates and the grown cache, not all V
log-probabilities). Each round times ``--calls`` calls of each session in turn; reported: the
median over rounds of the milliseconds per call, and baseline / bundle (above 1: the bundle's
graph is faster). The result file is ``--out`` (default ``benchmarks/results/step.json``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, markdown_table, require_paths, settings_record, start_run, write_report
from engine.bundle import Bundle, load_bundle
from engine.runner import RunnerConfig, load_session

BEAMS = 4
CANDIDATES = 2 * BEAMS + 1  # what the beam search asks for at beam 4 with the repetition guard


def step_inputs(bundle: Bundle, rows: int, cached: int, source: int) -> dict[str, np.ndarray]:
    """A decoder step's inputs for ``rows`` rows (``rows // BEAMS`` sentences)."""
    dims = bundle.manifest.dimensions
    rng = np.random.default_rng(0)
    sentences = max(1, rows // BEAMS)
    cache = (rows, dims.heads, cached, dims.d_head)
    cross = (sentences, dims.heads, source, dims.d_head)
    feed = {"tokens": rng.integers(4, min(dims.vocab_size, 100), (rows, 1)), "candidates": np.array([CANDIDATES])}
    for i in range(dims.decoder_layers):
        for name in ("self_k", "self_v"):
            feed[f"{name}_{i}"] = rng.standard_normal(cache).astype(np.float32)
        for name in ("cross_k", "cross_v"):
            feed[f"{name}_{i}"] = rng.standard_normal(cross).astype(np.float32)
    feed["src_mask"] = np.ones((sentences, source), dtype=bool)
    return feed


class Step:
    """One bundle's decoder-step session for one variant, and the outputs the engine fetches."""

    def __init__(self, bundle: Bundle, variant: str) -> None:
        _, decoder = bundle.graph_paths(variant)
        self.session = load_session(decoder, "cpu", RunnerConfig(provider="cpu", threads=1))
        self.outputs = [o.name for o in self.session.get_outputs() if o.name not in ("log_probs", "alignment")]

    def time(self, feed: dict[str, np.ndarray], calls: int) -> float:
        """Milliseconds per call, over ``calls`` calls after one untimed."""
        self.session.run(self.outputs, feed)
        start = time.perf_counter()
        for _ in range(calls):
            self.session.run(self.outputs, feed)
        return (time.perf_counter() - start) / calls * 1000


def measure(bundles: dict[str, Bundle], variant: str, args: argparse.Namespace) -> list[dict]:
    steps = {name: Step(bundle, variant) for name, bundle in bundles.items()}
    results = []
    for rows in args.rows:
        feed = step_inputs(bundles["bundle"], rows, args.cached, args.source)
        times: dict[str, list[float]] = {name: [] for name in steps}
        for round_ in range(args.rounds):
            order = list(steps) if round_ % 2 == 0 else list(steps)[::-1]
            for name in order:
                times[name].append(steps[name].time(feed, args.calls))
        ms = {name: statistics.median(t) for name, t in times.items()}
        print(f"{variant} {rows} rows: {ms['baseline']:.3f} -> {ms['bundle']:.3f} ms", flush=True)
        results.append(
            {"variant": variant, "rows": rows, "ms": ms, "ms_all": times, "speedup": ms["baseline"] / ms["bundle"]}
        )
    return results


def results_table(results: list[dict]) -> str:
    header = ["variant", "rows", "baseline ms", "bundle ms", "baseline / bundle"]
    rows = [
        [r["variant"], r["rows"], f"{r['ms']['baseline']:.3f}", f"{r['ms']['bundle']:.3f}", f"{r['speedup']:.2f}"]
        for r in results
    ]
    return markdown_table(header, rows)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True, help="the bundle measured")
    parser.add_argument("--baseline-bundle", type=Path, required=True, help="the bundle it is compared with")
    parser.add_argument("--variants", nargs="+", default=["fp32", "int8"])
    parser.add_argument("--rows", nargs="+", type=int, default=[8, 32, 128], help="decoder rows (beams of sentences)")
    parser.add_argument("--cached", type=int, default=12, help="positions in the self-attention cache")
    parser.add_argument("--source", type=int, default=16, help="source positions")
    parser.add_argument("--calls", type=int, default=40, help="timed calls per session per round")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS / "step.json", help="the result file")
    args = parser.parse_args(argv)
    require_paths(parser, [args.bundle, args.baseline_bundle])
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.step", argv)
    args = parse_args(start.argv)
    bundles = {"bundle": load_bundle(args.bundle), "baseline": load_bundle(args.baseline_bundle)}
    shapes = {name: bundle.manifest.dimensions for name, bundle in bundles.items()}
    if shapes["bundle"] != shapes["baseline"]:
        raise SystemExit(f"the bundles differ in shape: {shapes['bundle']} against {shapes['baseline']}")
    results = [r for variant in args.variants for r in measure(bundles, variant, args)]
    write_report(
        start, args.out, {"settings": settings_record(args), "results": results, "markdown": results_table(results)}
    )


if __name__ == "__main__":
    main()
