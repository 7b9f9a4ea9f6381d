"""Evaluation: ``python -m model.evaluate --checkpoint CKPT --src FILE --ref FILE [--beam-size 5]``.

Translates with the PyTorch reference beam search and prints cased, detokenized sacreBLEU and chrF
with their signatures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import sacrebleu
import torch

from engine.cli import HelpFormatter, int_at_least
from engine.tokenizer import Tokenizer
from model.checkpoint import CheckpointError, model_from_checkpoint, read_checkpoint, write_spm
from model.data import CorpusError, pad, read_lines, read_parallel
from model.decoding import DecodingOptions, beam_search
from model.transformer import Transformer


def translate_texts(
    model: Transformer,
    tokenizer: Tokenizer,
    texts: Sequence[str],
    options: DecodingOptions,
    *,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
) -> list[str]:
    """Translate in length-sorted batches (less padding); results in input order."""
    ids = [ids[: model.config.max_positions] for ids in tokenizer.encode_batch(texts)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = [""] * len(ids)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        hyps = beam_search(model, pad([ids[i] for i in chunk]).to(device), options)
        for i, nbest in zip(chunk, hyps, strict=True):
            out[i] = tokenizer.decode(nbest[0].tokens)
    return out


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str


def score_translations(hyps: Sequence[str], refs: Sequence[str]) -> Scores:
    """Cased, detokenized corpus BLEU and chrF (sacreBLEU defaults) against one reference each."""
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(list(hyps), [list(refs)])
    chrf_score = chrf.corpus_score(list(hyps), [list(refs)])
    return Scores(bleu_score.score, chrf_score.score, str(bleu.get_signature()), str(chrf.get_signature()))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m model.evaluate", description=__doc__, formatter_class=HelpFormatter
    )
    parser.add_argument("--checkpoint", required=True, type=Path, help="training checkpoint (.pt)")
    parser.add_argument("--src", required=True, type=Path, help="source sentences, one per line")
    parser.add_argument(
        "--ref", type=Path, help="references, one per line (default: none; the translations are printed, not scored)"
    )
    parser.add_argument("--out", type=Path, help="write the translations to this file (default: none)")
    parser.add_argument("--beam-size", type=int_at_least(1), default=5, help="beam size")
    parser.add_argument("--length-penalty", type=float, default=1.0, help="length penalty exponent of beam search")
    parser.add_argument("--batch-size", type=int_at_least(1), default=64, help="sentences translated together")
    parser.add_argument("--limit", type=int_at_least(0), default=0, help="only the first N sentences; 0 = all")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.out and not args.out.parent.is_dir():  # found out before translating, not after
        parser.error(f"--out {args.out}: the directory {args.out.parent} does not exist")
    try:
        state = read_checkpoint(args.checkpoint)
        texts, refs = _inputs(args.src, args.ref, args.limit)
    except (CheckpointError, CorpusError) as e:
        parser.error(str(e))
    model = model_from_checkpoint(state)
    tokenizer = Tokenizer(write_spm(state, Path(tempfile.mkdtemp()) / "spm.model"))
    options = DecodingOptions(beam_size=args.beam_size, length_penalty=args.length_penalty)
    hyps = translate_texts(model, tokenizer, texts, options, batch_size=args.batch_size)
    if args.out:
        args.out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    if refs is None:
        sys.stdout.write("".join(h + "\n" for h in hyps))
        return
    scores = score_translations(hyps, refs)
    if args.json:
        print(json.dumps(asdict(scores)))
    else:
        print(f"BLEU {scores.bleu:.2f}  ({scores.bleu_signature})")
        print(f"chrF {scores.chrf:.2f}  ({scores.chrf_signature})")


def _inputs(src: Path, ref: Path | None, limit: int) -> tuple[list[str], list[str] | None]:
    """The source lines and their references, the first ``limit`` of each (0: all).

    References must pair with the sources line for line: scored against a reference file of
    another length, every sentence after the first missing line would meet another's reference.
    """
    if ref is None:
        texts = read_lines(src)
        return (texts[:limit] if limit else texts), None
    texts, refs = read_parallel(src, ref)
    return (texts[:limit], refs[:limit]) if limit else (texts, refs)


if __name__ == "__main__":
    main()
