"""Where our engine's time goes (on the CPU, or with ``--provider cuda`` the GPU): ``python -m benchmarks.profile``.

    python -m benchmarks.profile [--variants fp32 int8] [--threads 1] [--beam-size 4] [--out FILE]

One translator per variant (one stream of ``--threads`` threads, batches of 32 length-sorted
sentences, as the engine benchmark runs it) translates the test set twice:

1. timed by a runner that clocks its calls (after an untimed pass): the wall time splits into encoder runs, decoder-step
   graph runs, cache reordering between steps (the decoder state's ``select``), and the rest
   (beam search in numpy, tokenizing, segmenting, detokenizing);
2. with onnxruntime's profiler on the decoder-step session: each operator type's share of the
   graph's kernel time, and the costliest nodes.

The result file is ``--out`` (default ``benchmarks/results/profile.json``).
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from benchmarks.common import (
    BUNDLE,
    RESULTS,
    RUNS,
    TEST_SRC,
    markdown_table,
    read_lines,
    settings_record,
    start_run,
    write_report,
)
from benchmarks.metered import MeteredRunner
from engine import TranslationOptions, Translator, TranslatorConfig
from engine.bundle import load_bundle
from engine.runner import RunnerConfig, load_decoder

TOP_OPERATORS = 10
TOP_NODES = 5


def time_split(translator: Translator, texts: list[str], options: TranslationOptions) -> dict:
    """Sentences/s and the share of the wall time of each part, on a second pass: the first grows
    onnxruntime's memory arenas to the test set's shapes."""
    translator.translate_batch(texts, options)
    runner = translator.runner
    metered = translator.runner = MeteredRunner(runner, translator.manifest.special_tokens.pad)
    try:
        start = time.perf_counter()
        translator.translate_batch(texts, options)
        wall = time.perf_counter() - start
    finally:
        translator.runner = runner
    seconds = metered.meter.seconds
    parts = {**seconds, "search and text": wall - sum(seconds.values())}
    return {"sentences_per_s": len(texts) / wall, "seconds": wall, "share": {k: v / wall for k, v in parts.items()}}


def operator_profile(
    translator: Translator, texts: list[str], options: TranslationOptions, args: argparse.Namespace
) -> dict:
    """Each operator type's share of the decoder-step graph's kernel time, and the costliest nodes."""
    decoder_path = load_bundle(args.bundle, verify_checksums=False).graph_paths(translator.info.variant)[1]
    profiled = RunnerConfig(
        provider=args.provider,
        threads=args.threads,
        profile_prefix=str(args.workdir / f"decoder-{translator.info.variant}"),
    )
    # The graph as the engine runs it (edited at load), not as the file has it.
    session = load_decoder(
        decoder_path, translator.runner.provider, profiled, shortlist=translator.runner.takes_vocab_ids
    )
    plain, translator.runner.decoder = translator.runner.decoder, session
    try:
        translator.translate_batch(texts, options)
    finally:
        translator.runner.decoder = plain
    events = json.loads(Path(session.end_profiling()).read_text())
    by_operator: collections.Counter[str] = collections.Counter()
    by_node: collections.Counter[str] = collections.Counter()
    for event in events:
        # An If node's time is that of the branch it runs, whose nodes are profiled one by one too.
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and event["args"]["op_name"] != "If":
            by_operator[event["args"]["op_name"]] += event["dur"]
            by_node[event["name"].removesuffix("_kernel_time")] += event["dur"]
    total = sum(by_operator.values())
    return {
        "operators": {op: us / total for op, us in by_operator.most_common(TOP_OPERATORS)},
        "nodes": {node: us / total for node, us in by_node.most_common(TOP_NODES)},
    }


def profile_variant(variant: str, texts: list[str], args: argparse.Namespace) -> dict:
    config = TranslatorConfig(
        model_dir=args.bundle, provider=args.provider, threads=args.threads, variant=variant, max_batch_sentences=32
    )
    translator = Translator(config)
    options = TranslationOptions(beam_size=args.beam_size)
    try:
        return {
            "variant": variant,
            **time_split(translator, texts, options),
            **operator_profile(translator, texts, options, args),
        }
    finally:
        translator.close()


def tables(results: list[dict]) -> str:
    parts = ["encoder", "decoder graph", "cache reordering", "search and text"]
    split = markdown_table(
        ["variant", "sent/s", *parts],
        [[r["variant"], f"{r['sentences_per_s']:.1f}", *(f"{r['share'][p]:.0%}" for p in parts)] for r in results],
    )
    operators = sorted(
        {op for r in results for op in r["operators"]}, key=lambda op: -results[0]["operators"].get(op, 0)
    )
    graph = markdown_table(
        ["decoder graph: operator", *(r["variant"] for r in results)],
        [[op, *(f"{r['operators'].get(op, 0):.1%}" for r in results)] for op in operators],
    )
    nodes = "\n".join(
        f"- {r['variant']}: " + ", ".join(f"`{node}` {share:.1%}" for node, share in r["nodes"].items())
        for r in results
    )
    return f"{split}\n\n{graph}\n\nCostliest nodes of the decoder graph:\n{nodes}"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=BUNDLE)
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0 = all)")
    parser.add_argument("--variants", nargs="+", default=["fp32", "int8"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--provider",
        choices=("cpu", "cuda"),
        default="cpu",
        help="onnxruntime's provider; on cuda, a node's time is its launch on the host, not its kernel's on the GPU",
    )
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=RUNS / "profile", help="onnxruntime's profile files")
    parser.add_argument("--out", type=Path, default=RESULTS / "profile.json", help="the result file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.profile", argv)
    args = parse_args(start.argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    texts = read_lines(args.src, args.limit)
    results = [profile_variant(variant, texts, args) for variant in args.variants]
    report = {"settings": settings_record(args), "results": results, "markdown": tables(results)}
    write_report(start, args.out, report)


if __name__ == "__main__":
    main()
