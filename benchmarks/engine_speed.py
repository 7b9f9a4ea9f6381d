"""Speed of the translation engine (part 3) on test_2016_flickr, and what its KV cache buys.

    python -m benchmarks.engine_speed [--bundle DIR] [--checkpoint CKPT] [--limit N] [--profile]

1. Our engine (``engine.translator``), in this process, fp32 and int8, greedy and beam 4: one
   call of ``translate_batch`` over the whole test set (length-sorted sub-batches of
   ``--batch-sentences``), after a warm-up. Reported: sentences/s, target tokens/s (generated
   subwords, EOS excluded) and cased sacreBLEU.
2. The KV cache's speedup, measured on the PyTorch model of ``--checkpoint`` (the same weights):
   the reference beam search of ``model/decoding.py`` with the self-attention cache, against the
   same search recomputing the whole target prefix at every step (``benchmarks/nocache.py``).
   Same sentences (``--cache-limit``), batches, threads and outputs; only the cache differs.
3. ``--profile``: cProfile of the engine's fp32 beam-4 run, the functions with the most own time.
   (onnxruntime's work shows as one ``run`` entry; everything else is the search in Python.)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from pathlib import Path

import sacrebleu

from benchmarks.common import REPO, TEST_REF, TEST_SRC, machine, markdown_table, read_lines, write_json
from engine import TranslationOptions, Translator, TranslatorConfig


def engine_runs(args: argparse.Namespace, texts: list[str], refs: list[str]) -> list[dict]:
    rows = []
    for variant in args.variants:
        config = TranslatorConfig(
            model_dir=args.bundle, provider="cpu", threads=args.threads, variant=variant,
            max_batch_sentences=args.batch_sentences, max_batch_tokens=args.batch_tokens,
        )  # fmt: skip
        translator = Translator(config)
        for beam in args.beams:
            options = TranslationOptions(beam_size=beam)
            translator.translate_batch(texts[:16], options)  # warm-up at this beam size
            start = time.perf_counter()
            results = translator.translate_batch(texts, options)
            seconds = time.perf_counter() - start
            hyps = [r.text for r in results]
            rows.append(
                {
                    "system": f"engine {variant}",
                    "beam": beam,
                    "seconds": round(seconds, 2),
                    "sentences_per_s": round(len(texts) / seconds, 1),
                    "tokens_per_s": round(sum(r.output_tokens for r in results) / seconds, 1),
                    "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) if refs else None,
                }
            )
            print(rows[-1], flush=True)
        translator.close()
    return rows


def cache_speedup(args: argparse.Namespace, texts: list[str]) -> list[dict]:
    """PyTorch reference decoding with and without the self-attention cache (same search, same outputs)."""
    import torch

    from benchmarks.nocache import PrefixRecomputingModel
    from engine.tokenizer import Tokenizer
    from model.checkpoint import load_checkpoint, model_from_checkpoint, write_spm
    from model.decoding import DecodingOptions
    from model.evaluate import translate_texts

    torch.set_num_threads(args.threads)
    state = load_checkpoint(args.checkpoint)
    model = model_from_checkpoint(state)
    tokenizer = Tokenizer(write_spm(state, args.workdir / "spm.model"))
    rows = []
    for beam in args.beams:
        options = DecodingOptions(beam_size=beam)
        seconds, outputs = {}, {}
        for name, system in (("with cache", model), ("without cache", PrefixRecomputingModel(model))):
            start = time.perf_counter()
            outputs[name] = translate_texts(system, tokenizer, texts, options, batch_size=args.batch_sentences)
            seconds[name] = time.perf_counter() - start
        rows.append(
            {
                "beam": beam,
                "sentences": len(texts),
                "with_cache_s": round(seconds["with cache"], 2),
                "without_cache_s": round(seconds["without cache"], 2),
                "speedup": round(seconds["without cache"] / seconds["with cache"], 2),
                "same_outputs": outputs["with cache"] == outputs["without cache"],
            }
        )
        print(rows[-1], flush=True)
    return rows


def profile(args: argparse.Namespace, texts: list[str]) -> str:
    translator = Translator(TranslatorConfig(model_dir=args.bundle, provider="cpu", threads=args.threads))
    options = TranslationOptions(beam_size=4)
    profiler = cProfile.Profile()
    profiler.runcall(translator.translate_batch, texts, options)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
    return out.getvalue()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=REPO / "models" / "en-de" / "bundle")
    parser.add_argument("--checkpoint", type=Path, default=REPO / "models" / "en-de" / "checkpoint.pt")
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--ref", type=Path, default=TEST_REF)
    parser.add_argument("--limit", type=int, default=0, help="only the first N test sentences")
    parser.add_argument("--cache-limit", type=int, default=200, help="sentences for the (slow) cache comparison")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-sentences", type=int, default=64)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--variants", nargs="+", default=["fp32", "int8"])
    parser.add_argument("--skip-cache", action="store_true", help="skip the PyTorch cache comparison")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/engine_speed"))
    parser.add_argument("--json", type=Path, help="write the results here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    texts = read_lines(args.src, args.limit)
    refs = read_lines(args.ref, args.limit) if args.ref and args.ref.is_file() else []
    results: dict = {"machine": machine(), "args": {k: str(v) for k, v in vars(args).items()}}
    results["engine"] = engine_runs(args, texts, refs)
    header = ["system", "beam", "sentences/s", "target tokens/s", "BLEU", "seconds"]
    rows = [
        [r["system"], r["beam"], r["sentences_per_s"], r["tokens_per_s"], r["bleu"], r["seconds"]]
        for r in results["engine"]
    ]
    report = [markdown_table(header, rows)]
    if not args.skip_cache:
        results["kv_cache"] = cache_speedup(args, texts[: args.cache_limit])
        header = ["beam", "sentences", "with cache (s)", "without cache (s)", "speedup", "same outputs"]
        keys = ["beam", "sentences", "with_cache_s", "without_cache_s", "speedup", "same_outputs"]
        report.append(
            "KV cache, PyTorch reference decoding:\n"
            + markdown_table(header, [[r[k] for k in keys] for r in results["kv_cache"]])
        )
    if args.profile:
        results["profile"] = profile(args, texts)
        report.append(results["profile"])
    print("\n\n".join(report))
    write_json(args.json, results)


if __name__ == "__main__":
    main()
