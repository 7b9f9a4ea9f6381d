"""The translation systems the engine benchmark compares, each run in a worker process of its own.

    python -m benchmarks.systems SYSTEM --src FILE [--bundle DIR] [--ct2-dir DIR] [--checkpoint CKPT]

A worker loads one system (and imports only what that system needs, so its peak memory is the
system's own), translates a few sentences at beams 1 and 4 to warm up, prints ``{"ready": true}``
and then answers one JSON command per stdin line, ``{"beam_size": K, "limit": N}``, with one JSON
line: the wall time of translating the first N source sentences (text in, text out: tokenization
and detokenization included), the translations (and generated token ids where the system exposes
them), and the process's peak resident memory so far. Everything else a library prints goes to
stderr, so stdout carries only the protocol.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from engine.tokenizer import EOS_ID, Tokenizer, normalize_text

# name -> (family, precision); the family decides which loader runs
SYSTEMS: dict[str, tuple[str, str]] = {
    "ours-fp32": ("ours", "fp32"),
    "ours-int8": ("ours", "int8"),
    "ct2-float32": ("ct2", "float32"),
    "ct2-int8": ("ct2", "int8"),
    "torch-cache": ("torch", "float32"),
    "torch-nocache": ("torch", "float32"),
}
WARMUP_SENTENCES = 8

# texts, beam size -> translations and, where the system exposes them, the generated token ids
Translate = Callable[[list[str], int], tuple[list[str], list[list[int]] | None]]


def load_ours(args: argparse.Namespace, variant: str) -> Translate:
    from engine import TranslationOptions, Translator, TranslatorConfig

    translator = Translator(
        TranslatorConfig(
            model_dir=args.bundle,
            provider="cpu",
            threads=args.threads,
            streams=args.streams,
            variant=variant,
            max_batch_sentences=args.batch_size,
        )
    )

    def translate(texts: list[str], beam: int) -> tuple[list[str], None]:
        results = translator.translate_batch(texts, TranslationOptions(beam_size=beam, length_penalty=1.0)).results
        return [r.text for r in results], None

    return translate


def load_ct2(args: argparse.Namespace, model_dir: Path) -> Translate:
    """CTranslate2 as its users run it: sentencepiece pieces in, batches of ``batch_size``
    length-sorted sentences. ``streams`` is its ``inter_threads`` (translators working on batches
    in parallel, each with ``threads // streams`` threads); all batches are submitted at once,
    as CTranslate2's asynchronous API allows, so that every translator has work.

    Options are set to our decoding rules: length penalty 1 over the length *including* EOS
    (``return_end_token``), no minimum length (CTranslate2's default is 1). Our engine caps each
    sentence at 1.5 * source + 10 tokens; CTranslate2 has one cap per call, so each batch gets the
    cap of its longest source (batches are length-sorted, so that is close to every sentence's own).
    Without it, the few sentences on which the model loops run on to the 256-position limit.
    """
    import ctranslate2

    intra = max(1, args.threads // args.streams)
    translator = ctranslate2.Translator(str(model_dir), device="cpu", inter_threads=args.streams, intra_threads=intra)
    tokenizer = Tokenizer(model_dir / "spm.model")
    eos = tokenizer.sp.id_to_piece(EOS_ID)

    def translate(texts: list[str], beam: int) -> tuple[list[str], list[list[int]]]:
        pieces = [tokenizer.sp.encode(normalize_text(t), out_type=str) for t in texts]
        order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
        hypotheses: list[list[str]] = [[] for _ in texts]
        batches = [order[start : start + args.batch_size] for start in range(0, len(order), args.batch_size)]
        pending = []
        for batch in batches:
            longest = max(len(pieces[i]) + 1 for i in batch)  # + EOS, as our engine counts the source
            pending.append(
                translator.translate_batch(
                    [pieces[i] for i in batch],
                    beam_size=beam,
                    length_penalty=1.0,
                    min_decoding_length=0,
                    max_decoding_length=min(args.max_length, int(args.max_length_a * longest + args.max_length_b)),
                    return_end_token=True,
                    asynchronous=True,
                )
            )
        for batch, results in zip(batches, pending, strict=True):
            for i, result in zip(batch, results, strict=True):
                hypotheses[i] = result.result().hypotheses[0]
        ids = [[tokenizer.sp.piece_to_id(p) for p in h if p != eos] for h in hypotheses]
        return [tokenizer.decode(i) for i in ids], ids

    return translate


def load_torch(args: argparse.Namespace, *, cache: bool) -> Translate:
    import torch

    from benchmarks.nocache import PrefixRecomputingModel
    from model.checkpoint import load_checkpoint, model_from_checkpoint, write_spm
    from model.decoding import DecodingOptions
    from model.evaluate import translate_texts

    torch.set_num_threads(args.threads)
    state = load_checkpoint(args.checkpoint)
    model = model_from_checkpoint(state)
    tokenizer = Tokenizer(write_spm(state, Path(tempfile.mkdtemp()) / "spm.model"))
    decoder = model if cache else PrefixRecomputingModel(model)

    def translate(texts: list[str], beam: int) -> tuple[list[str], None]:
        options = DecodingOptions(beam_size=beam, length_penalty=1.0)
        return translate_texts(decoder, tokenizer, texts, options, batch_size=args.batch_size), None

    return translate


def load_system(name: str, args: argparse.Namespace) -> Translate:
    family, precision = SYSTEMS[name]
    if family == "ours":
        return load_ours(args, precision)
    if family == "ct2":
        return load_ct2(args, args.ct2_dir)
    return load_torch(args, cache=name == "torch-cache")


def peak_rss_mb() -> float:
    """This process's peak resident memory. Not ``getrusage``'s ru_maxrss: Linux carries that over
    from the forking parent across exec, and the benchmark's parent holds torch."""
    status = Path("/proc/self/status")
    lines = status.read_text().splitlines() if status.exists() else []
    return next((int(line.split()[1]) / 1024 for line in lines if line.startswith("VmHWM:")), float("nan"))


def serve(translate: Translate, texts: list[str]) -> None:
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints, from C too, go to stderr

    def reply(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    for beam_size in (1, 4):
        translate(texts[:WARMUP_SENTENCES], beam_size)
    reply({"ready": True})
    for line in sys.stdin:
        command = json.loads(line)
        batch = texts[: command["limit"]]
        start = time.perf_counter()
        outputs, ids = translate(batch, command["beam_size"])
        seconds = time.perf_counter() - start
        reply({"seconds": seconds, "translations": outputs, "token_ids": ids, "peak_rss_mb": peak_rss_mb()})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("system", choices=sorted(SYSTEMS))
    parser.add_argument("--src", required=True, type=Path)
    parser.add_argument("--bundle", type=Path)
    parser.add_argument("--ct2-dir", type=Path)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--streams", type=int, default=1, help="batches decoded in parallel (CTranslate2: inter_threads)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=256, help="CTranslate2's cap: the model's position limit")
    # The caps of model.decoding.max_decoding_length, passed in because importing model.decoding
    # would load torch into the CTranslate2 worker and inflate its measured memory.
    parser.add_argument("--max-length-a", type=float, default=1.5)
    parser.add_argument("--max-length-b", type=int, default=10)
    args = parser.parse_args(argv)
    serve(load_system(args.system, args), args.src.read_text(encoding="utf-8").splitlines())


if __name__ == "__main__":
    main()
