"""An OPUS-MT-sized MarianMT: our engine against CTranslate2 and transformers: ``python -m benchmarks.marian``.

    python -m benchmarks.marian [--size opus-mt|tiny] [--limit 256] [--streams 1 2] [--rounds 3] [--out FILE]

1. The model: a MarianMT checkpoint of OPUS-MT en-de's shape (6 + 6 layers, d_model 512, 8 heads,
   FFN 2048, SiLU, 58,101 vocabulary entries, tied embeddings) with random weights (fixed seed),
   sentencepiece models trained on Multi30K and the vocabulary filled up with pieces they never
   produce (``export.tiny_hf.build_marian``). A few weights are set so that outputs end by
   themselves, after about as many tokens as the source has (``end_by_source_length``); their text
   is meaningless, their cost that of real translations. ``--size tiny`` builds a tiny one instead.
2. Conversions of that one directory: ours by ``python -m export --hf-model`` (fp32, int8),
   CTranslate2's by its own ``TransformersConverter`` (float32, int8). Built once into
   ``--workdir``; ``--rebuild`` builds them again.
3. Every system in a worker process of its own (``benchmarks/systems.py``): our engine fp32 and
   int8, CTranslate2 float32 and int8, and transformers' ``generate``. All warm up before any
   timing; each round runs every system on the first ``--limit`` test sentences, in a rotated
   order; transformers, the slowest, runs in the first round only.
4. Same batches (``--batch-size`` length-sorted sentences), same threads (``--threads``, split
   into S streams for each S of ``--streams``; transformers runs one stream only), beam 4, length
   penalty 1, a sentence done once beam-size hypotheses have ended (transformers'
   ``early_stopping=True``), one cap on generated tokens for every system (``--max-new-tokens``).
5. Reported per system: the median time as sentences/s and generated tokens/s (EOS excluded), as
   ratios to CTranslate2 at the same precision and to transformers; the worker's peak RSS; the
   share of sentences that ended before the cap; the share of translations identical to
   transformers'. The result file is ``--out`` (default ``benchmarks/results/marian.json``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path

from benchmarks.common import (
    DATA_DIR,
    RESULTS,
    RUNS,
    TEST_SRC,
    child_env,
    markdown_table,
    read_lines,
    require_paths,
    start_run,
    streams_markdown,
    write_report,
)
from benchmarks.systems import MULTI_STREAM, SYSTEMS, Schedule, Worker, ct2_baseline, run_workers

MARIAN_SYSTEMS = ["ours-fp32", "ours-int8", "ct2-float32", "ct2-int8", "transformers"]
REFERENCE = "transformers"
OPUS_MT_VOCAB = 58100  # OPUS-MT en-de's vocabulary without <pad>


def build(size: str, corpus: Path, out: Path) -> None:
    """The Hugging Face checkpoint of ``size``, written to a temporary directory first so that an
    interrupted build leaves nothing behind."""
    from export.parity import one_torch_thread
    from export.tiny_hf import TinyDims, build_marian

    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    if size == "opus-mt":
        dims = TinyDims(d_model=512, layers=6, heads=8, ffn=2048, vocab_size=32000, max_positions=512)
        with one_torch_thread():
            build_marian(staging, corpus, lines=29000, dims=dims, vocab_entries=OPUS_MT_VOCAB, length_ratio=1.0)
    else:
        with one_torch_thread():
            build_marian(staging, corpus, length_ratio=1.0)
    staging.rename(out)


def convert_all(hf_dir: Path, workdir: Path) -> None:
    """Our bundle (fp32 and int8) and CTranslate2's float32 and int8 models of ``hf_dir``."""
    import ctranslate2

    from export.pipeline import ExportConfig, export_bundle

    config = ExportConfig(
        checkpoint=None, hf_model=hf_dir, out=workdir / "bundle", int8=True, source_language="en", target_language="de"
    )
    export_bundle(config)
    for quantization in ("float32", "int8"):
        converter = ctranslate2.converters.TransformersConverter(str(hf_dir))
        converter.convert(str(workdir / f"ct2-{quantization}"), quantization=quantization, force=True)


def prepare(args: argparse.Namespace, texts: list[str]) -> None:
    """The checkpoint and its conversions (unless already built), and the source file the workers read."""
    args.workdir.mkdir(parents=True, exist_ok=True)
    hf_dir = args.workdir / "hf"
    if args.rebuild:
        for path in (hf_dir, args.workdir / "bundle", args.workdir / "ct2-float32", args.workdir / "ct2-int8"):
            shutil.rmtree(path, ignore_errors=True)
    if not hf_dir.is_dir():
        build(args.size, args.corpus, hf_dir)
    if not all((args.workdir / name).is_dir() for name in ("bundle", "ct2-float32", "ct2-int8")):
        convert_all(hf_dir, args.workdir)
    args.src = args.workdir / "source.txt"
    args.src.write_text("".join(t + "\n" for t in texts), encoding="utf-8")


def worker(name: str, streams: int, args: argparse.Namespace) -> Worker:
    cmd = ["--src", str(args.src), "--threads", str(args.threads), "--streams", str(streams)]
    cmd += ["--batch-size", str(args.batch_size), "--max-new-tokens", str(args.max_new_tokens)]
    family, precision = SYSTEMS[name]
    cmd += ["--bundle", str(args.workdir / "bundle"), "--hf-dir", str(args.workdir / "hf")]
    if family == "ct2":
        cmd += ["--ct2-dir", str(args.workdir / f"ct2-{precision}")]
    return Worker(name, cmd, args.workdir / f"{name}-streams{streams}.log", child_env())


def summarize(runs: list[dict], reference: list[str] | None, cap: int) -> dict:
    first = runs[0]
    translations, counts = first["translations"], first["token_counts"]
    seconds = statistics.median(r["seconds"] for r in runs)
    result = {
        "sentences": len(translations),
        "rounds": len(runs),
        "seconds": seconds,
        "seconds_all": [r["seconds"] for r in runs],
        "sentences_per_s": len(translations) / seconds,
        "tokens_per_s": sum(counts) / seconds,
        "target_tokens": sum(counts),
        "ended_rate": sum(n < cap - 1 for n in counts) / len(counts),  # EOS before the last step
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "deterministic": all(r["translations"] == translations for r in runs),
    }
    if reference is not None:
        result["identical_rate"] = sum(a == b for a, b in zip(reference, translations, strict=True)) / len(reference)
    return result


def table(results: dict[str, dict]) -> str:
    header = ["system", "sent/s", "tok/s", "× CT2", "× transformers", "peak RSS MB", "ended by EOS",
              "= transformers"]  # fmt: skip
    rows = []
    reference = results.get(REFERENCE)
    for name in MARIAN_SYSTEMS:
        if (r := results.get(name)) is None:
            continue
        base = results.get(ct2_baseline(name)) if SYSTEMS[name][0] != "transformers" else None
        ratio = f"{r['sentences_per_s'] / base['sentences_per_s']:.2f}" if base else "n/a"
        versus = f"{r['sentences_per_s'] / reference['sentences_per_s']:.1f}" if reference else "n/a"
        same = "reference" if name == REFERENCE else f"{r['identical_rate']:.1%}" if "identical_rate" in r else "n/a"
        rows.append([name, f"{r['sentences_per_s']:.2f}", f"{r['tokens_per_s']:.0f}", ratio, versus,
                     f"{r['peak_rss_mb']:.0f}", f"{r['ended_rate']:.0%}", same])  # fmt: skip
    return markdown_table(header, rows)


def measure_streams(streams: int, n: int, args: argparse.Namespace, reference: dict | None) -> tuple[dict, dict]:
    """The systems that can decode ``streams`` batches at once, compared at that setting; also the
    reference's run (measured at one stream, reused for the others)."""
    names = [name for name in args.systems if streams == 1 or SYSTEMS[name][0] in MULTI_STREAM]
    workers = {name: worker(name, streams, args) for name in names if not (name == REFERENCE and reference)}
    runs = run_workers(workers, Schedule((args.beam,), args.rounds, (REFERENCE,), args.slow_rounds), n)
    runs = {name: value for (name, _), value in runs.items() if value}
    if reference is None and REFERENCE in runs:
        reference = {"runs": runs[REFERENCE]}
    if reference is not None:
        runs[REFERENCE] = reference["runs"]
    texts = reference["runs"][0]["translations"] if reference else None
    results = {name: summarize(value, None if name == REFERENCE else texts, args.max_new_tokens)
               for name, value in runs.items()}  # fmt: skip
    setting = {
        "streams": streams,
        "results": [{"system": name, "beam_size": args.beam, **r} for name, r in results.items()],
        "table": table(results),
    }
    return setting, reference


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=["opus-mt", "tiny"], default="opus-mt")
    parser.add_argument("--corpus", type=Path, default=DATA_DIR, help="train.en and train.de for the tokenizers")
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--limit", type=int, default=256, help="the first N test sentences")
    parser.add_argument("--systems", nargs="+", choices=MARIAN_SYSTEMS, default=MARIAN_SYSTEMS)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--streams", nargs="+", type=int, default=[1, 2], help="one table each")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="cap on generated tokens, EOS included")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow-rounds", type=int, default=1, help=f"rounds for {REFERENCE}")
    parser.add_argument("--workdir", type=Path, default=RUNS / "marian", help="checkpoint, conversions, logs")
    parser.add_argument("--rebuild", action="store_true", help="build the checkpoint and conversions again")
    parser.add_argument("--out", type=Path, default=RESULTS / "marian.json", help="the result file")
    args = parser.parse_args(argv)
    require_paths(parser, [args.src, args.corpus / "train.en", args.corpus / "train.de"])
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.marian", argv)
    args = parse_args(start.argv)
    texts = read_lines(args.src, args.limit)
    prepare(args, texts)
    settings, reference = [], None
    for streams in args.streams:
        setting, reference = measure_streams(streams, len(texts), args, reference)
        settings.append(setting)
    markdown = streams_markdown(settings, args.threads)
    options = {"size": args.size, "threads": args.threads, "batch_size": args.batch_size, "beam_size": args.beam,
               "max_new_tokens": args.max_new_tokens, "rounds": args.rounds, "sentences": len(texts)}  # fmt: skip
    write_report(start, args.out, {"settings": options, "streams": settings, "markdown": markdown})


if __name__ == "__main__":
    main()
