"""Export a checkpoint to a model bundle.

    python -m export --checkpoint models/en-de/checkpoint.pt --out models/en-de/bundle --int8 \\
        [--eval-data ../shared/data/multi30k] [--force]
    python -m export --hf-model opus-mt-en-de --out models/opus-mt-en-de --int8 --source-lang en --target-lang de

--hf-model converts a Hugging Face MarianMT (OPUS-MT) or M2M100/NLLB checkpoint directory (the
save_pretrained layout); it needs transformers (pip install '.[import]'). A multilingual checkpoint
records its languages; --source-lang/--target-lang then choose which to serve (comma-separated).

Runs load -> validate -> export -> optimize -> quantize (--int8) -> parity check -> write bundle, and
with --eval-data also measures BLEU/chrF of every variant on test_2016_flickr (recorded in the
manifest; int8 becomes the default CPU variant only if it loses at most 0.3 BLEU and is 1.1x as
fast, timed as the service runs it: export.quality). Exits with status 1 and a message naming the
problem when any step fails.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from engine.bundle import BundleError
from engine.cli import HelpFormatter, int_at_least
from export import ExportError
from export.pipeline import MIN_PARITY_SENTENCES, ExportConfig, ExportResult, export_bundle


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m export", description=__doc__, formatter_class=HelpFormatter)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", type=Path, help="training checkpoint (.pt); this or --hf-model is required")
    source.add_argument(
        "--hf-model",
        type=Path,
        help="Hugging Face checkpoint directory (MarianMT, M2M100/NLLB); this or --checkpoint is required",
    )
    p.add_argument("--out", required=True, type=Path, help="bundle directory to write")
    p.add_argument("--int8", action="store_true", help="add the int8 (dynamic quantisation) variant")
    p.add_argument("--force", action="store_true", help="replace an existing bundle at --out")
    p.add_argument(
        "--eval-data",
        type=Path,
        help="directory with test_2016_flickr.{src,tgt} (and val.src) to measure quality on (default: none)",
    )
    p.add_argument(
        "--parity-data",
        type=Path,
        help="source sentences for the parity check, one per line (default: --eval-data's val.src, else built-ins)",
    )
    p.add_argument("--name", help="model name (default: mt-SRC-TGT)")
    p.add_argument("--version", default="1.0.0", help="model version")
    p.add_argument("--source-lang", help="source language(s), comma-separated (default: from the checkpoint)")
    p.add_argument("--target-lang", help="target language(s), comma-separated (default: from the checkpoint)")
    p.add_argument(
        "--alignment-layer", type=int_at_least(0), help="decoder layer for alignments (default: second-to-last)"
    )
    p.add_argument("--alignment-heads", type=int_at_least(0), default=0, help="average the first N heads; 0 = all")
    p.add_argument(
        "--parity-sentences",
        type=int_at_least(MIN_PARITY_SENTENCES),
        default=64,
        help=f"sentences in the parity check (>= {MIN_PARITY_SENTENCES})",
    )
    p.add_argument("--parity-tolerance", type=float, default=1e-4, help="max |log-prob difference|")
    p.add_argument("--eval-beam-size", type=int_at_least(1), default=5, help="beam size for --eval-data")
    return p


def parse_args(argv: list[str] | None) -> ExportConfig:
    a = build_parser().parse_args(argv)
    return ExportConfig(
        checkpoint=a.checkpoint,
        hf_model=a.hf_model,
        out=a.out,
        int8=a.int8,
        force=a.force,
        eval_data=a.eval_data,
        parity_data=a.parity_data,
        name=a.name,
        version=a.version,
        source_language=a.source_lang,
        target_language=a.target_lang,
        alignment_layer=a.alignment_layer,
        alignment_heads=a.alignment_heads,
        parity_sentences=a.parity_sentences,
        parity_tolerance=a.parity_tolerance,
        eval_beam_size=a.eval_beam_size,
    )


def summary(result: ExportResult) -> str:
    m = result.manifest
    sources, targets = ([lang.code for lang in side] for side in (m.languages.source, m.languages.target))
    languages = f"{','.join(sources[:5])}{'...' if len(sources) > 5 else ''} -> {','.join(targets[:5])}"
    lines = [f"bundle {result.out}: {m.name} {m.version} ({languages}{'...' if len(targets) > 5 else ''})"]
    lines += [f"  {name:<20} {size / 1e6:8.2f} MB" for name, size in sorted(result.sizes.items())]
    p = m.parity
    lines.append(
        f"  parity fp32: {p.sentences} sentences, {p.positions} positions, max |dlogp| {p.max_abs_logprob_diff:.2e}"
        f" (cached vs full recomputation {p.max_abs_cache_vs_full_diff:.2e}, tolerance {p.tolerance:g})"
    )
    if p.int8_max_abs_logprob_diff is not None:
        lines.append(
            f"  parity int8: max |dlogp| {p.int8_max_abs_logprob_diff:.3f}, "
            f"greedy outputs equal to fp32 for {p.int8_greedy_token_agreement:.1%} of sentences"
        )
    for name, variant in m.variants.items():
        for test, q in variant.quality.items():
            lines.append(f"  {name} {test}: BLEU {q.bleu:.2f} chrF {q.chrf:.2f} (beam {q.beam_size}, {q.seconds} s)")
    lines.append(f"  default variant: cpu={m.default_variant.cpu} cuda={m.default_variant.cuda}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        result = export_bundle(parse_args(argv))
    except (ExportError, BundleError) as e:
        print(f"export failed: {e}", file=sys.stderr)
        return 1
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
