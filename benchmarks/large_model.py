"""An NLLB-200-sized checkpoint through conversion, loading and a first batch: ``python -m benchmarks.large_model``.

    python -m benchmarks.large_model [--sentences 32] [--new-tokens 16] [--workdir DIR] [--rebuild] [--out FILE]

1. The checkpoint: an M2M100 of NLLB-200-distilled-600M's shape (12 + 12 layers, d_model 1024, 16
   heads, FFN 4096, ReLU, 256,206 vocabulary entries, tied embeddings: 615 M parameters, 2.5 GB in
   fp32) with random weights (seed 0) and NLLB's tokenizer on a sentencepiece model trained on
   Multi30K (``export.tiny_hf.build_nllb``'s), English and German served.
2. Conversions of that one directory, each in a process of its own: ours by ``python -m export
   --hf-model --int8`` (fp32 and int8 in one bundle) and CTranslate2's ``ct2-transformers-converter``
   (float32, int8): wall time, peak RSS, size on disk.
3. Each conversion in a fresh process: load time and RSS once loaded, then the first ``--sentences``
   test sentences en -> de as one batch at beam 4, twice (the second is timed), every hypothesis
   ``--new-tokens`` tokens long (a random model's outputs have no natural end: the minimum and
   maximum length are set alike for both engines), on 2 threads: seconds, generated tokens, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
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
    write_report,
)
from benchmarks.systems import peak_rss_mb
from service.memory import resident_bytes

NLLB_600M = {
    "vocab_size": 256206,
    "d_model": 1024,
    "encoder_layers": 12,
    "decoder_layers": 12,
    "encoder_attention_heads": 16,
    "decoder_attention_heads": 16,
    "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096,
    "max_position_embeddings": 1024,
    "scale_embedding": True,
    "activation_function": "relu",
}
SYSTEMS = {"ours-fp32": ("ours", "fp32"), "ours-int8": ("ours", "int8"), "ct2-float32": ("ct2", "float32"),
           "ct2-int8": ("ct2", "int8")}  # fmt: skip
SOURCE, TARGET = "eng_Latn", "deu_Latn"


def build(corpus: Path, out: Path) -> None:
    """The checkpoint: the tokenizer of a tiny NLLB build, the model at NLLB-600M's size."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig, M2M100Config, M2M100ForConditionalGeneration

    from export.tiny_hf import build_nllb

    tokenizer_dir = build_nllb(out.with_name("tokenizer"), corpus, languages={SOURCE: "en", TARGET: "de"})
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = {"pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
           "eos_token_id": tokenizer.eos_token_id, "decoder_start_token_id": tokenizer.eos_token_id}  # fmt: skip
    torch.manual_seed(0)
    model = M2M100ForConditionalGeneration(M2M100Config(**NLLB_600M, **ids)).eval()
    model.generation_config = GenerationConfig(**ids, max_length=200)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    shutil.copy(tokenizer_dir / "sentencepiece.bpe.model", out)


def convert(system: str, hf_dir: Path, out: Path) -> dict:
    """Convert in this process (a child of the benchmark's, so that its peak RSS is the conversion's)."""
    family, precision = SYSTEMS[system]
    start = time.perf_counter()
    if family == "ours":
        from export.__main__ import main as export

        args = ["--hf-model", str(hf_dir), "--out", str(out), "--int8"]
        args += ["--source-lang", SOURCE, "--target-lang", TARGET]
        if export(args) != 0:
            raise SystemExit(f"python -m export {' '.join(args)} failed")
    else:
        import ctranslate2

        ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(out), quantization=precision, force=True)
    seconds = time.perf_counter() - start
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(peak_rss_mb())}


def disk_bytes(workdir: Path, system: str) -> int:
    """What serving ``system`` reads from disk: CTranslate2's whole directory; of our bundle, which
    holds both variants, the tokenizer and that variant's graphs and weights."""
    family, precision = SYSTEMS[system]
    if family == "ct2":
        return sum(f.stat().st_size for f in (workdir / system).iterdir())
    files = [f for f in (workdir / "bundle").iterdir() if f.is_file()]
    graphs = [f for f in files if ".onnx" in f.name]
    variant = [f for f in graphs if (".int8." in f.name) == (precision == "int8")]
    return sum(f.stat().st_size for f in files if f not in graphs or f in variant)


def worker(args: argparse.Namespace) -> None:
    """Load ``args.system``, translate the batch twice, print one JSON line (in a child process)."""
    family, precision = SYSTEMS[args.system]
    texts = read_lines(TEST_SRC, args.sentences)
    start = time.perf_counter()
    translate = load_ours(args, precision) if family == "ours" else load_ct2(args, precision)
    loaded = {"load_seconds": round(time.perf_counter() - start, 1), "rss_loaded_mb": round(resident_bytes() / 2**20)}
    translate(texts)
    start = time.perf_counter()
    tokens = translate(texts)
    seconds = time.perf_counter() - start
    print(json.dumps({**loaded, "seconds": round(seconds, 2), "tokens": tokens, "peak_rss_mb": round(peak_rss_mb())}))


def load_ours(args: argparse.Namespace, variant: str):
    from engine import TranslationOptions, Translator, TranslatorConfig

    bundle = args.workdir / "bundle"
    translator = Translator(
        TranslatorConfig(model_dir=bundle, provider="cpu", threads=2, variant=variant, warmup=False)
    )
    options = TranslationOptions(
        source_language="en",
        target_language="de",
        beam_size=4,
        length_penalty=1.0,
        min_length=args.new_tokens,
        max_length=args.new_tokens,
        max_consecutive_repeats=0,
    )

    def translate(texts: list[str]) -> int:
        return sum(r.output_tokens for r in translator.translate_batch(texts, options).results)

    return translate


def load_ct2(args: argparse.Namespace, precision: str):
    import ctranslate2

    from engine.bundle import load_bundle
    from engine.tokenizer import Tokenizer

    translator = ctranslate2.Translator(str(args.workdir / f"ct2-{precision}"), device="cpu", intra_threads=2)
    tokenizer = Tokenizer.from_bundle(load_bundle(args.workdir / "bundle", check_graphs=False))

    def translate(texts: list[str]) -> int:
        sources = [[SOURCE, *tokenizer.source_pieces(ids)] for ids in tokenizer.encode_batch(texts)]
        results = translator.translate_batch(
            sources,
            target_prefix=[[TARGET]] * len(texts),
            beam_size=4,
            length_penalty=1.0,
            # the prefix counts towards CTranslate2's lengths, as the forced language token does towards ours
            min_decoding_length=args.new_tokens,
            max_decoding_length=args.new_tokens,
            max_batch_size=len(texts),
        )
        return sum(len(r.hypotheses[0]) - 1 for r in results)

    return translate


def child(*args: str | Path) -> dict:
    """``python -m benchmarks.large_model ARGS``; the JSON line it printed last."""
    cmd = [sys.executable, "-m", "benchmarks.large_model", *map(str, args)]
    out = subprocess.run(cmd, check=True, env=child_env(), stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def table(workdir: Path, conversions: dict[str, dict], runs: dict[str, dict], sentences: int) -> str:
    header = ["system", "conversion s", "conversion peak RSS MB", "on disk GB", "load s", "RSS loaded MB"]
    header += ["sent/s", "tok/s", "peak RSS MB"]
    rows = []
    for system, r in runs.items():
        c = conversions["ours-fp32" if system == "ours-int8" else system]
        size = round(disk_bytes(workdir, system) / 1e9, 2)
        rows.append([system, c["seconds"], c["peak_rss_mb"], size, r["load_seconds"], r["rss_loaded_mb"]])
        rows[-1] += [round(sentences / r["seconds"], 2), round(r["tokens"] / r["seconds"]), r["peak_rss_mb"]]
    note = "ours-int8 comes from the same conversion as ours-fp32: one bundle holds both."
    return f"{markdown_table(header, rows)}\n\n{note}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DATA_DIR, help="train.en and train.de for the tokenizer")
    parser.add_argument("--sentences", type=int, default=32, help="the batch: the first N test sentences")
    parser.add_argument("--new-tokens", type=int, default=16, help="every hypothesis' length")
    parser.add_argument("--workdir", type=Path, default=RUNS / "large_model", help="checkpoint and conversions")
    parser.add_argument("--rebuild", action="store_true", help="build the checkpoint again (conversions always run)")
    parser.add_argument("--out", type=Path, default=RESULTS / "large_model.json", help="the result file")
    parser.add_argument("--step", choices=["build", "convert", "run"], help=argparse.SUPPRESS)  # in a child
    parser.add_argument("--system", choices=sorted(SYSTEMS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    require_paths(parser, [TEST_SRC, args.corpus / "train.en", args.corpus / "train.de"])
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.large_model", argv)
    args = parse_args(start.argv)
    hf_dir = args.workdir / "hf"
    if args.step == "build":
        build(args.corpus, hf_dir)
        return print(json.dumps({}))
    if args.step == "convert":
        out = args.workdir / ("bundle" if SYSTEMS[args.system][0] == "ours" else args.system)
        return print(json.dumps(convert(args.system, hf_dir, out)))
    if args.step == "run":
        return worker(args)
    if args.rebuild:
        shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    if not hf_dir.is_dir():
        child("--step", "build", "--workdir", args.workdir, "--corpus", args.corpus)
    conversions = {}
    for system in ("ours-fp32", "ct2-float32", "ct2-int8"):
        conversions[system] = child("--step", "convert", "--system", system, "--workdir", args.workdir)
        print(system, conversions[system], flush=True)
    runs = {}
    for system in SYSTEMS:
        runs[system] = child("--step", "run", "--system", system, "--workdir", args.workdir,
                             "--sentences", args.sentences, "--new-tokens", args.new_tokens)  # fmt: skip
        print(system, runs[system], flush=True)
    markdown = table(args.workdir, conversions, runs, args.sentences)
    write_report(start, args.out, {"settings": {"sentences": args.sentences, "new_tokens": args.new_tokens},
                                   "conversions": conversions, "runs": runs, "markdown": markdown})  # fmt: skip


if __name__ == "__main__":
    main()
