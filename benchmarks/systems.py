"""The translation systems the benchmarks compare, each run in a worker process of its own.

    python -m benchmarks.systems SYSTEM --src FILE [--bundle DIR] [--ct2-dir DIR] [--checkpoint CKPT] [--hf-dir DIR]

A worker loads one system (and imports only what that system needs, so its peak memory is the
system's own), translates a few sentences at beams 1 and 4 to warm up, prints ``{"ready": true}``
and then answers one JSON command per stdin line, ``{"beam_size": K, "limit": N}``, with one JSON
line: the wall time of translating the first N source sentences (text in, text out: tokenization
and detokenization included), the translations, the target tokens generated per sentence (EOS
excluded), the generated token ids where the system exposes them, and the process's peak resident
memory so far. Everything else a library prints goes to stderr, so stdout carries only the protocol.
``Worker`` is the other end: it starts a worker and drives it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.tokenizer import Tokenizer

# name -> (family, precision); the family decides which loader runs
SYSTEMS: dict[str, tuple[str, str]] = {
    "ours-fp32": ("ours", "fp32"),
    "ours-int8": ("ours", "int8"),
    # another bundle of the same checkpoint (benchmarks.engine --baseline-bundle), e.g. an earlier export
    "baseline-fp32": ("ours", "fp32"),
    "baseline-int8": ("ours", "int8"),
    # ours decoding in the row pool (engine.pool), not each sub-batch as one rectangle of rows
    "pool-fp32": ("ours", "fp32"),
    "pool-int8": ("ours", "int8"),
    # the pool's step at fixed shapes, captured as CUDA graphs on CUDA (engine.captured_step)
    "graph-fp32": ("ours", "fp32"),
    # the fp32 variant computed in float16 (engine.half_precision): GPU only
    "ours-fp16": ("ours", "fp16"),
    "graph-fp16": ("ours", "fp16"),
    "ct2-float32": ("ct2", "float32"),
    "ct2-int8": ("ct2", "int8"),
    # the float32 model computed in float16 (CTranslate2's compute_type): GPU only
    "ct2-float16": ("ct2", "float16"),
    # the vocabulary shortlist on (ours: the bundle's; CTranslate2: its vocabulary map of the same pieces)
    "ours-fp32-shortlist": ("ours", "fp32"),
    "ours-int8-shortlist": ("ours", "int8"),
    "ct2-float32-vmap": ("ct2", "float32"),
    "ct2-int8-vmap": ("ct2", "int8"),
    "torch-cache": ("torch", "float32"),
    "torch-nocache": ("torch", "float32"),
    "transformers": ("transformers", "float32"),
}
MULTI_STREAM = ("ours", "ct2")  # the families that decode several batches at once
WARMUP_SENTENCES = 8


def ct2_baseline(name: str) -> str:
    """The CTranslate2 system a system is compared with: the one of its precision, with the
    vocabulary map for a system with the shortlist."""
    base = {"int8": "ct2-int8", "fp16": "ct2-float16", "float16": "ct2-float16"}.get(SYSTEMS[name][1], "ct2-float32")
    return f"{base}-vmap" if name.endswith(("-shortlist", "-vmap")) else base


def ct2_model(precision: str) -> str:
    """The converted CTranslate2 model a precision runs: float16 is computed from the float32 one."""
    return "float32" if precision == "float16" else precision


@dataclass
class Output:
    texts: list[str]
    token_counts: list[int]  # target tokens generated per sentence, EOS excluded
    token_ids: list[list[int]] | None = None  # the generated ids, where the system exposes them


Translate = Callable[[list[str], int], Output]  # texts, beam size -> output


def length_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices in batches of ``batch_size``, shortest first: the batches every system gets."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def load_ours(
    args: argparse.Namespace, variant: str, *, shortlist: bool = False, pool: bool = False, graphs: bool = False
) -> Translate:
    from engine import TranslationOptions, Translator, TranslatorConfig

    translator = Translator(
        TranslatorConfig(
            model_dir=args.bundle,
            provider=args.provider,
            threads=args.threads,
            streams=args.streams,
            variant=variant,
            max_batch_sentences=args.batch_size,
            pool=pool or graphs,
            cuda_graphs=graphs,
        )
    )
    max_length = args.max_new_tokens or None

    def translate(texts: list[str], beam: int) -> Output:
        # The same decoding rules as the other systems: no repetition guard, which they do not have.
        options = TranslationOptions(
            beam_size=beam, length_penalty=1.0, max_length=max_length, max_consecutive_repeats=0, shortlist=shortlist
        )
        results = translator.translate_batch(texts, options).results
        return Output([r.text for r in results], [r.output_tokens for r in results])

    return translate


def load_ct2(args: argparse.Namespace, model_dir: Path, precision: str, *, vmap: bool = False) -> Translate:
    """CTranslate2 as its users run it: pieces in, batches of ``batch_size`` length-sorted
    sentences. The pieces are those of the bundle's tokenizer (the same sentencepiece models and
    vocabulary), with EOS unless the converted model appends it itself. ``streams`` is its
    ``inter_threads`` (translators working on batches in parallel, each with ``threads // streams``
    threads); all batches are submitted at once, as CTranslate2's asynchronous API allows, so that
    every translator has work.

    Options are set to our decoding rules: length penalty 1 over the length *including* EOS
    (``return_end_token``), no minimum length (CTranslate2's default is 1). With ``max_new_tokens``
    every sentence has that cap. Otherwise our engine caps each sentence at a * source + b tokens;
    CTranslate2 has one cap per call, so each batch gets the cap of its longest source (batches are
    length-sorted, so that is close to every sentence's own). Without it, the few sentences on which
    a model loops run on to its position limit. ``vmap``: with the vocabulary map (``vmap.txt`` in
    ``model_dir``). ``precision`` float16: the model computed in float16, whatever it stores.
    """
    import ctranslate2

    from engine.bundle import load_bundle

    intra = max(1, args.threads // args.streams)
    translator = ctranslate2.Translator(
        str(model_dir),
        device=args.provider,
        compute_type="float16" if precision == "float16" else "default",
        inter_threads=args.streams,
        intra_threads=intra,
    )
    tokenizer = Tokenizer.from_bundle(load_bundle(args.bundle, check_graphs=False))
    eos = tokenizer.specials.eos
    adds_eos = json.loads((model_dir / "config.json").read_text(encoding="utf-8")).get("add_source_eos", False)

    def cap(source_tokens: int) -> int:
        if args.max_new_tokens:
            return args.max_new_tokens
        return min(args.max_length, int(args.max_length_a * source_tokens + args.max_length_b))

    def translate(texts: list[str], beam: int) -> Output:
        ids = tokenizer.encode_batch(texts)  # EOS included, as our engine counts the source
        pieces = [tokenizer.source_pieces(row[:-1] if adds_eos else row) for row in ids]
        batches = length_sorted_batches([len(row) for row in ids], args.batch_size)
        pending = [
            translator.translate_batch(
                [pieces[i] for i in batch],
                beam_size=beam,
                length_penalty=1.0,
                min_decoding_length=0,
                max_decoding_length=cap(max(len(ids[i]) for i in batch)),
                return_end_token=True,
                use_vmap=vmap,
                asynchronous=True,
            )
            for batch in batches
        ]
        generated: list[list[int]] = [[] for _ in texts]
        for batch, results in zip(batches, pending, strict=True):
            for i, result in zip(batch, results, strict=True):
                generated[i] = [t for t in tokenizer.target_ids(result.result().hypotheses[0]) if t != eos]
        return Output([tokenizer.decode(row) for row in generated], [len(row) for row in generated], generated)

    return translate


def load_torch(args: argparse.Namespace, *, cache: bool) -> Translate:
    import torch

    from benchmarks.nocache import PrefixRecomputingModel
    from engine.tokenizer import normalize_text
    from model.checkpoint import load_checkpoint, model_from_checkpoint, write_spm
    from model.decoding import DecodingOptions
    from model.evaluate import translate_texts

    torch.set_num_threads(args.threads)
    state = load_checkpoint(args.checkpoint)
    model = model_from_checkpoint(state)
    tokenizer = Tokenizer(write_spm(state, Path(tempfile.mkdtemp()) / "spm.model"))
    decoder = model if cache else PrefixRecomputingModel(model)

    def translate(texts: list[str], beam: int) -> Output:
        options = DecodingOptions(beam_size=beam, length_penalty=1.0)
        outputs = translate_texts(decoder, tokenizer, texts, options, batch_size=args.batch_size)
        # The reference returns text only: its tokens are counted by encoding that text again.
        return Output(outputs, [len(tokenizer.sp.encode(normalize_text(t))) for t in outputs])

    return translate


def load_transformers(args: argparse.Namespace) -> Translate:
    """A Hugging Face checkpoint with transformers' ``generate``: the same length-sorted batches,
    beam search ending a sentence once ``beam`` hypotheses have ended (``early_stopping=True``, as
    our engine), length penalty 1, the checkpoint's other generation settings."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.hf_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.hf_dir, dtype=torch.float32).eval()
    eos = model.generation_config.eos_token_id

    def generated(row: list[int]) -> list[int]:
        row = row[1:]  # the decoder start token
        return row[: row.index(eos)] if eos in row else row

    def translate(texts: list[str], beam: int) -> Output:
        ids = tokenizer(texts).input_ids
        outputs: list[list[int]] = [[] for _ in texts]
        for batch in length_sorted_batches([len(row) for row in ids], args.batch_size):
            inputs = tokenizer.pad({"input_ids": [ids[i] for i in batch]}, return_tensors="pt")
            with torch.inference_mode():
                sequences = model.generate(
                    **inputs,
                    num_beams=beam,
                    early_stopping=True,
                    length_penalty=1.0,
                    do_sample=False,
                    max_new_tokens=args.max_new_tokens or None,
                )
            for i, row in zip(batch, sequences.tolist(), strict=True):
                outputs[i] = generated(row)
        texts_out = tokenizer.batch_decode(outputs, skip_special_tokens=True)
        return Output(texts_out, [len(row) for row in outputs], outputs)

    return translate


def load_system(name: str, args: argparse.Namespace) -> Translate:
    family, precision = SYSTEMS[name]
    if family == "ours":
        return load_ours(
            args,
            precision,
            shortlist=name.endswith("-shortlist"),
            pool=name.startswith("pool-"),
            graphs=name.startswith("graph-"),
        )
    if family == "ct2":
        return load_ct2(args, args.ct2_dir, precision, vmap=name.endswith("-vmap"))
    if family == "transformers":
        return load_transformers(args)
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
        output = translate(batch, command["beam_size"])
        seconds = time.perf_counter() - start
        reply(
            {
                "seconds": seconds,
                "translations": output.texts,
                "token_counts": output.token_counts,
                "token_ids": output.token_ids,
                "peak_rss_mb": peak_rss_mb(),
            }
        )


class Worker:
    """The parent's end of one worker process: ``python -m benchmarks.systems NAME ARGS...``, its
    stderr in ``log``."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name, self.log = name, log
        cmd = [sys.executable, "-m", "benchmarks.systems", name, *args]
        with log.open("w") as stderr:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
            )

    def receive(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            tail = self.log.read_text()[-3000:]
            raise RuntimeError(f"worker {self.name} exited with {self.proc.returncode}; its log ends:\n{tail}")
        return json.loads(line)

    def run(self, beam_size: int, limit: int) -> dict:
        self.proc.stdin.write(json.dumps({"beam_size": beam_size, "limit": limit}) + "\n")
        self.proc.stdin.flush()
        return self.receive()

    def close(self) -> None:
        """End of stdin ends the worker; one that does not end in time is killed."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass(frozen=True)
class Schedule:
    """How often each system runs: every round runs every system at every beam, in a rotated
    order, so that slow drifts of the machine spread over all systems alike; the ``slow`` ones run
    only in the first ``slow_rounds`` rounds, on the first ``slow_limit`` sentences (0: all)."""

    beams: tuple[int, ...]
    rounds: int
    slow: tuple[str, ...] = ()
    slow_rounds: int = 1
    slow_limit: int = 0


def run_workers(workers: dict[str, Worker], schedule: Schedule, n: int) -> dict[tuple[str, int], list[dict]]:
    """Wait until every worker is warm, then time them by ``schedule`` on ``n`` sentences; closes them."""
    try:
        for worker in workers.values():
            worker.receive()  # ready: loaded and warmed up
        names = list(workers)
        runs: dict[tuple[str, int], list[dict]] = {(name, beam): [] for name in names for beam in schedule.beams}
        for round_ in range(schedule.rounds):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for beam in schedule.beams:
                for name in order:
                    slow = name in schedule.slow
                    if slow and round_ >= schedule.slow_rounds:
                        continue
                    limit = min(n, schedule.slow_limit or n) if slow else n
                    result = workers[name].run(beam, limit)
                    runs[name, beam].append(result)
                    print(f"round {round_ + 1} beam {beam} {name}: {result['seconds']:.2f} s", file=sys.stderr)
        return runs
    finally:
        for worker in workers.values():
            worker.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("system", choices=sorted(SYSTEMS))
    parser.add_argument("--src", required=True, type=Path)
    parser.add_argument("--bundle", type=Path, help="ours; CTranslate2 takes its tokenizer")
    parser.add_argument("--ct2-dir", type=Path)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--hf-dir", type=Path, help="a Hugging Face checkpoint directory, for transformers")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--provider", choices=("cpu", "cuda"), default="cpu", help="ours and CTranslate2's device")
    parser.add_argument(
        "--streams", type=int, default=1, help="batches decoded in parallel (CTranslate2: inter_threads)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--max-new-tokens", type=int, default=0, help="one cap on generated tokens for every sentence (0: none)"
    )
    parser.add_argument("--max-length", type=int, default=256, help="CTranslate2's cap: the model's position limit")
    # The caps of model.decoding.max_decoding_length, passed in because importing model.decoding
    # would load torch into the CTranslate2 worker and inflate its measured memory.
    parser.add_argument("--max-length-a", type=float, default=1.5)
    parser.add_argument("--max-length-b", type=int, default=10)
    args = parser.parse_args(argv)
    serve(load_system(args.system, args), args.src.read_text(encoding="utf-8").splitlines())


if __name__ == "__main__":
    main()
