"""Our engine against CTranslate2 and the PyTorch reference, same weights: ``python -m benchmarks.engine``.

    python -m benchmarks.engine [--streams 1 2] [--systems ...] [--beams 1 4] [--rounds 3] [--out FILE]
        [--baseline-bundle DIR --systems ours-int8 baseline-int8 ...]
    python -m benchmarks.engine --shortlist   # with and without the vocabulary shortlist
    python -m benchmarks.engine --batch-size 16 32 64 128 --streams 2   # each engine at its fastest batch size

1. The checkpoint is converted to CTranslate2 (float32 and int8, ``benchmarks/ct2_convert.py``);
   the bundle must be the export of that same checkpoint.
2. Every system runs in a worker process of its own (``benchmarks/systems.py``): our engine fp32
   and int8, CTranslate2 float32 and int8, the PyTorch reference with and without the KV cache.
   All start and warm up before any timing, then the systems alternate: each round runs every
   system on the whole test set at beam 1 and then beam 4, in a rotated order, so slow drifts of
   the machine (thermal, background load) spread over all systems alike.
3. All systems get the same batch size (sentences, length-sorted; with several ``--batch-size``
   values, every system runs at each, as a worker of its own), the same threads, split the same
   way into S batches decoded in parallel for each S of ``--streams`` (ours: ``streams``;
   CTranslate2: ``inter_threads``; the PyTorch reference runs one stream only), the same decoding
   rules (length penalty 1, no minimum length) and plain text in, plain text out.
4. Reported per system and beam: the median time over rounds as sentences/s and target tokens/s
   (target tokens generated, EOS excluded; the PyTorch reference's output encoded again), each
   as a ratio to CTranslate2 at the same precision; the worker's peak RSS; cased sacreBLEU; and
   the share of translations identical to the PyTorch reference, plus, for float32 systems, the
   share identical up to numerical ties (``benchmarks/agreement.py``). One table per stream count;
   the result file is ``--out`` (default ``benchmarks/results/engine.json``). With several batch
   sizes, a last table pairs our fastest system at its fastest batch size with CTranslate2's: each
   engine as its user would tune it.
5. ``--shortlist``: our engine with and without the bundle's vocabulary shortlist, against
   CTranslate2 with and without its vocabulary map (``vmap.txt``, written from the same shortlist:
   each source piece's target pieces, and the frequent ones as its always-included entry); the
   ``*-shortlist`` systems are compared with the ``*-vmap`` ones. Result file
   ``benchmarks/results/engine-shortlist.json``.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.common import (
    BUNDLE,
    CHECKPOINT,
    RESULTS,
    RUNS,
    TEST_REF,
    TEST_SRC,
    child_env,
    markdown_table,
    read_lines,
    require_paths,
    start_run,
    streams_markdown,
    write_report,
)
from benchmarks.ct2_convert import convert
from benchmarks.systems import MULTI_STREAM, SYSTEMS, Schedule, Worker, ct2_baseline, ct2_model, run_workers
from engine.bundle import load_bundle
from engine.shortlist import Shortlist
from engine.tokenizer import Tokenizer
from model.checkpoint import load_checkpoint, model_from_checkpoint
from model.decoding import DecodingOptions
from model.evaluate import score_translations

REFERENCE = "torch-cache"
SLOW = ("torch-nocache",)
ENGINE_SYSTEMS = [name for name, (family, _) in SYSTEMS.items() if family != "transformers"]
WITH_SHORTLIST = ("-shortlist", "-vmap")
GPU_ONLY = ("ct2-float16", "ours-fp16", "graph-fp16")
DEFAULT_SYSTEMS = [
    n for n in ENGINE_SYSTEMS if not n.startswith("baseline-") and not n.endswith(WITH_SHORTLIST) and n not in GPU_ONLY
]
SHORTLIST_SYSTEMS = [n for n in ENGINE_SYSTEMS if n.startswith(("ours-", "ct2-")) and n not in GPU_ONLY]


@dataclass(frozen=True)
class Entry:
    """A system at one batch size: a worker of its own."""

    name: str
    batch: int
    labelled: bool  # several batch sizes are measured: the label names the batch

    @property
    def label(self) -> str:
        return f"{self.name} b{self.batch}" if self.labelled else self.name


def entries(names: list[str], batch_sizes: list[int]) -> list[Entry]:
    """Every system at every batch size; the PyTorch reference (one batch size suffices for its
    agreement) at the first."""
    labelled = len(batch_sizes) > 1
    return [
        Entry(name, batch, labelled)
        for name in names
        for batch in (batch_sizes if SYSTEMS[name][0] in MULTI_STREAM else batch_sizes[:1])
    ]


def worker(entry: Entry, streams: int, args: argparse.Namespace) -> Worker:
    name = entry.name
    cmd = ["--src", str(args.src), "--threads", str(args.threads), "--streams", str(streams)]
    cmd += ["--provider", args.provider]
    caps = DecodingOptions()
    cmd += ["--batch-size", str(entry.batch), "--max-length", str(args.max_length)]
    cmd += ["--max-length-a", str(caps.max_length_a), "--max-length-b", str(caps.max_length_b)]
    family, precision = SYSTEMS[name]
    if name.startswith("baseline-"):
        cmd += ["--bundle", str(args.baseline_bundle)]
    elif family == "ours":
        cmd += ["--bundle", str(args.bundle)]
    elif family == "ct2":
        cmd += ["--ct2-dir", str(args.workdir / f"ct2-{ct2_model(precision)}"), "--bundle", str(args.bundle)]
    else:
        cmd += ["--checkpoint", str(args.checkpoint)]
    return Worker(name, cmd, args.workdir / f"{name}-streams{streams}-b{entry.batch}.log", child_env())


def summarize(runs: list[dict], refs: list[str]) -> dict:
    first = runs[0]
    translations = first["translations"]
    seconds = statistics.median(r["seconds"] for r in runs)
    tokens = sum(first["token_counts"])
    scores = score_translations(translations, refs[: len(translations)])
    return {
        "sentences": len(translations),
        "rounds": len(runs),
        "seconds": seconds,
        "seconds_all": [r["seconds"] for r in runs],
        "sentences_per_s": len(translations) / seconds,
        "tokens_per_s": tokens / seconds,
        "target_tokens": tokens,
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "bleu": scores.bleu,
        "bleu_signature": scores.bleu_signature,
        "deterministic": all(r["translations"] == translations for r in runs),
    }


def add_agreement(
    results: dict,
    runs: dict,
    by_label: dict[str, Entry],
    texts: list[str],
    args: argparse.Namespace,
    tokenizer: Tokenizer,
) -> None:
    """Identical-output rate against the PyTorch reference; tie analysis for float32 systems."""
    from benchmarks.agreement import compare

    model = model_from_checkpoint(load_checkpoint(args.checkpoint))
    reference_label = next(label for label, entry in by_label.items() if entry.name == REFERENCE)
    for (label, beam), system_runs in runs.items():
        if label == reference_label or (reference_label, beam) not in runs:
            continue
        reference = runs[reference_label, beam][0]["translations"]
        other = system_runs[0]
        if SYSTEMS[by_label[label].name][1] in ("fp32", "float32"):
            agreement = compare(
                model, tokenizer, texts, reference, other["translations"], other["token_ids"], beam_size=beam
            )
            results[label, beam]["agreement"] = agreement.to_dict()
        else:
            same = sum(a == b for a, b in zip(reference, other["translations"], strict=False))
            results[label, beam]["agreement"] = {"identical_rate": same / len(other["translations"])}


def table(results: dict, by_label: dict[str, Entry]) -> str:
    labelled = any(entry.labelled for entry in by_label.values())
    header = ["system", *(["batch"] if labelled else []), "beam", "sent/s", "tok/s", "× CT2 sent/s", "× CT2 tok/s",
              "peak RSS MB", "BLEU", "= PyTorch ref"]  # fmt: skip
    rows = []

    def order(item: tuple[tuple[str, int], dict]) -> tuple[int, int, int]:
        (label, beam), _ = item
        return beam, list(SYSTEMS).index(by_label[label].name), by_label[label].batch

    for (label, beam), r in sorted(results.items(), key=order):
        entry = by_label[label]
        base = results.get((replace(entry, name=ct2_baseline(entry.name)).label, beam))
        ratios = [f"{r[k] / base[k]:.2f}" if base else "n/a" for k in ("sentences_per_s", "tokens_per_s")]
        agreement = r.get("agreement")
        if agreement is None:
            same = "reference" if entry.name == REFERENCE else "n/a"
        elif "agreement_rate" in agreement:
            same = f"{agreement['identical_rate']:.1%} ({agreement['agreement_rate']:.1%} incl. ties)"
        else:
            same = f"{agreement['identical_rate']:.1%}"
        full = max(other["sentences"] for (_, b), other in results.items() if b == beam)
        subset = f" (first {r['sentences']})" if r["sentences"] != full else ""
        batch = [entry.batch] if labelled else []
        rows.append([entry.name + subset, *batch, beam, f"{r['sentences_per_s']:.1f}", f"{r['tokens_per_s']:.0f}",
                     *ratios, f"{r['peak_rss_mb']:.0f}", f"{r['bleu']:.2f}", same])  # fmt: skip
    return markdown_table(header, rows)


def best_against_best(results: dict, by_label: dict[str, Entry]) -> list[dict]:
    """Per beam (and with maps or without): our fastest system at its fastest batch size against
    CTranslate2's, each at whatever precision and batch size serve it best."""
    best: dict[tuple[int, bool, str], tuple[float, Entry]] = {}
    for (label, beam), r in results.items():
        entry = by_label[label]
        family = SYSTEMS[entry.name][0]
        if family not in MULTI_STREAM or entry.name.startswith("baseline-"):
            continue
        key = (beam, entry.name.endswith(WITH_SHORTLIST), family)
        if key not in best or r["sentences_per_s"] > best[key][0]:
            best[key] = (r["sentences_per_s"], entry)
    pairs = []
    for (beam, maps, family), (speed, entry) in sorted(best.items()):
        if family != "ours" or (beam, maps, "ct2") not in best:
            continue
        ct2_speed, ct2 = best[beam, maps, "ct2"]
        pairs.append({"beam_size": beam, "maps": maps, "ours": entry.name, "ours_batch": entry.batch,
                      "ours_sentences_per_s": speed, "ct2": ct2.name, "ct2_batch": ct2.batch,
                      "ct2_sentences_per_s": ct2_speed, "ratio": speed / ct2_speed})  # fmt: skip
    return pairs


def best_table(pairs: list[dict]) -> str:
    header = ["beam", "maps", "ours: fastest", "sent/s", "CTranslate2: fastest", "sent/s", "ours × CT2"]
    rows = [[p["beam_size"], "yes" if p["maps"] else "no", f"{p['ours']} b{p['ours_batch']}",
             f"{p['ours_sentences_per_s']:.1f}", f"{p['ct2']} b{p['ct2_batch']}", f"{p['ct2_sentences_per_s']:.1f}",
             f"{p['ratio']:.2f}"] for p in pairs]  # fmt: skip
    return markdown_table(header, rows)


def prepare(args: argparse.Namespace, texts: list[str]) -> None:
    """The CTranslate2 conversions and, for ``--limit``, the source file the workers read."""
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.max_length = load_checkpoint(args.checkpoint)["model_config"]["max_positions"]
    for quantization in ("float32", "int8"):
        converted = convert(
            args.checkpoint, args.workdir / f"ct2-{quantization}", quantization=quantization, force=True
        )
        if any(name.endswith("-vmap") for name in args.systems):
            write_vmap(args.bundle, converted / "vmap.txt")
    if args.limit:  # workers read the source file themselves: give them exactly these sentences
        args.src = args.workdir / "source.txt"
        args.src.write_text("".join(t + "\n" for t in texts), encoding="utf-8")


def write_vmap(bundle_dir: Path, path: Path) -> None:
    """CTranslate2's vocabulary map of the bundle's shortlist: a line per source piece, tab, its
    target pieces; the line of the empty source key holds the pieces every batch gets."""
    bundle = load_bundle(bundle_dir, check_graphs=False)
    if bundle.manifest.shortlist is None:
        raise SystemExit(f"{bundle_dir}: no shortlist (python -m export.shortlist)")
    shortlist = Shortlist.load(bundle.path / bundle.manifest.shortlist.file)
    tokenizer = Tokenizer.from_bundle(bundle)
    lines = ["\t" + " ".join(tokenizer.target_pieces(shortlist.frequent.tolist()))]
    for source, row in enumerate(shortlist.table):
        targets = tokenizer.target_pieces(row[row >= 0].tolist())
        (piece,) = tokenizer.source_pieces([source])
        if targets and piece:
            lines.append(f"{piece}\t{' '.join(targets)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def measure_streams(streams: int, texts: list[str], refs: list[str], args: argparse.Namespace) -> dict:
    """All systems that can decode ``streams`` batches at once, at every batch size, compared at that setting."""
    names = [name for name in args.systems if streams == 1 or SYSTEMS[name][0] in MULTI_STREAM]
    by_label = {entry.label: entry for entry in entries(names, args.batch_size)}
    workers = {label: worker(entry, streams, args) for label, entry in by_label.items()}
    slow = tuple(label for label, entry in by_label.items() if entry.name in SLOW)
    schedule = Schedule(tuple(args.beams), args.rounds, slow, args.slow_rounds, args.slow_limit)
    runs = run_workers(workers, schedule, len(texts))
    results = {key: summarize(value, refs) for key, value in runs.items() if value}
    if REFERENCE in names:
        tokenizer = Tokenizer.from_bundle(load_bundle(args.bundle, check_graphs=False))
        add_agreement(results, runs, by_label, texts, args, tokenizer)
    pairs = best_against_best(results, by_label)
    markdown = table(results, by_label)
    if len(args.batch_size) > 1 and pairs:
        markdown += "\n\nFastest against fastest, over precisions and batch sizes:\n\n" + best_table(pairs)
    return {
        "streams": streams,
        "results": [
            {"system": by_label[label].name, "batch_size": by_label[label].batch, "beam_size": beam, **r}
            for (label, beam), r in results.items()
        ],
        "best_against_best": pairs,
        "table": markdown,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=CHECKPOINT)
    parser.add_argument("--bundle", type=Path, default=BUNDLE, help="the export of --checkpoint")
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--ref", type=Path, default=TEST_REF)
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences (0 = all)")
    parser.add_argument("--systems", nargs="+", choices=ENGINE_SYSTEMS, default=DEFAULT_SYSTEMS)
    parser.add_argument(
        "--baseline-bundle", type=Path, help="another export of --checkpoint, run as baseline-fp32/baseline-int8"
    )
    parser.add_argument("--beams", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--provider",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where ours (onnxruntime's provider) and CTranslate2 (its device) run; ct2-float16 needs cuda",
    )
    parser.add_argument(
        "--streams",
        nargs="+",
        type=int,
        default=[1, 2],
        help="batches decoded in parallel, sharing the threads (ours: streams; CTranslate2: inter_threads);"
        " one table each",
    )
    parser.add_argument(
        "--batch-size",
        nargs="+",
        type=int,
        default=[32],
        help="sentences per batch; with several, every system runs at each, and each system's fastest is compared",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow-rounds", type=int, default=1, help=f"rounds for {', '.join(SLOW)}")
    parser.add_argument("--slow-limit", type=int, default=0, help=f"sentences for {', '.join(SLOW)} (0 = all)")
    parser.add_argument("--workdir", type=Path, default=RUNS / "engine", help="converted models and worker logs")
    parser.add_argument(
        "--out",
        type=Path,
        help="the result file (default: results/engine.json, with --shortlist engine-shortlist.json)",
    )
    parser.add_argument(
        "--shortlist", action="store_true", help=f"the systems {' '.join(SHORTLIST_SYSTEMS)} (section 5)"
    )
    args = parser.parse_args(argv)
    if args.shortlist:
        args.systems = SHORTLIST_SYSTEMS
    args.out = args.out or RESULTS / ("engine-shortlist.json" if args.shortlist else "engine.json")
    needed = [args.checkpoint, args.src, args.ref]
    if any(SYSTEMS[name][0] in ("ours", "ct2") for name in args.systems):
        needed.append(args.bundle)
    if any(name.startswith("baseline-") for name in args.systems):
        if args.baseline_bundle is None:
            parser.error("the baseline-* systems need --baseline-bundle")
        needed.append(args.baseline_bundle)
    require_paths(parser, needed)
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.engine", argv)
    args = parse_args(start.argv)
    texts, refs = read_lines(args.src, args.limit), read_lines(args.ref, args.limit)
    prepare(args, texts)
    settings = [measure_streams(streams, texts, refs, args) for streams in args.streams]
    markdown = streams_markdown(settings, args.threads)
    options = {"provider": args.provider, "threads": args.threads, "batch_size": args.batch_size, "rounds": args.rounds,
               "slow_rounds": args.slow_rounds, "slow_limit": args.slow_limit, "sentences": len(texts)}  # fmt: skip
    write_report(start, args.out, {"settings": options, "streams": settings, "markdown": markdown})


if __name__ == "__main__":
    main()
