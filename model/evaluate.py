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
from pathlib import Path

import sacrebleu
import torch

from model.checkpoint import load_checkpoint, model_from_checkpoint, write_spm
from model.data import pad, read_lines
from model.decoding import DecodingOptions, beam_search
from model.tokenizer import Tokenizer
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


def score_translations(hyps: Sequence[str], refs: Sequence[str]) -> tuple[sacrebleu.metrics.BLEUScore, sacrebleu.metrics.CHRFScore]:
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    return bleu.corpus_score(list(hyps), [list(refs)]), chrf.corpus_score(list(hyps), [list(refs)])


def bleu_signatures() -> tuple[str, str]:
    return str(sacrebleu.metrics.BLEU().get_signature()), str(sacrebleu.metrics.CHRF().get_signature())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--src", required=True, type=Path, help="source sentences, one per line")
    parser.add_argument("--ref", type=Path, help="references, one per line (omit to only translate)")
    parser.add_argument("--out", type=Path, help="write translations here")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--length-penalty", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, default=0, help="only the first N sentences")
    parser.add_argument("--json", action="store_true", help="print scores as JSON")
    args = parser.parse_args(argv)

    state = load_checkpoint(args.checkpoint)
    model = model_from_checkpoint(state)
    tokenizer = Tokenizer(write_spm(state, Path(tempfile.mkdtemp()) / "spm.model"))
    texts = read_lines(args.src)
    if args.limit:
        texts = texts[: args.limit]
    options = DecodingOptions(beam_size=args.beam_size, length_penalty=args.length_penalty)
    hyps = translate_texts(model, tokenizer, texts, options, batch_size=args.batch_size)
    if args.out:
        args.out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    if not args.ref:
        sys.stdout.write("".join(h + "\n" for h in hyps))
        return
    bleu, chrf = score_translations(hyps, read_lines(args.ref)[: len(hyps)])
    bleu_sig, chrf_sig = bleu_signatures()
    if args.json:
        print(json.dumps({"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2), "bleu_signature": bleu_sig, "chrf_signature": chrf_sig}))
    else:
        print(f"BLEU {bleu.score:.2f}  ({bleu_sig})")
        print(f"chrF {chrf.score:.2f}  ({chrf_sig})")


if __name__ == "__main__":
    main()
