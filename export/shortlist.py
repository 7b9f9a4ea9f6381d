"""Build a bundle's vocabulary shortlist (``engine.shortlist``) from a parallel corpus.

    python -m export.shortlist --bundle DIR --source train.en --target train.de
        [--dev-source val.en --dev-target val.de] [--k 5 10 20 --frequent 100 300 1000]

For each source piece, its target pieces ranked by how likely a sentence pair with it has them:
the co-occurrence probability p(t|s) = c(s, t) / c(s) over the corpus's sentence pairs (c: the
pairs a piece, or both, occur in), with the pieces frequent everywhere discounted, as they are in
the shortlist anyway: score = p(t|s) - p(t). This is Marian's lexical shortlist with sentence
co-occurrence in place of fast_align's word alignments, which needs no aligner and, for the short
sentences of a caption corpus, loses little. The ``frequent`` most frequent target pieces (token
counts) are added to every batch's shortlist.

With a dev set, every combination of ``--k`` and ``--frequent`` is translated with the bundle's
default CPU variant, and the one with the fewest pieces per batch (mean M) whose BLEU is within
``--tolerance`` of the full vocabulary's is kept; the shortlist is on by default only if that
holds. Without one, the first ``--k`` and ``--frequent`` are kept, off by default (unmeasured).
The file (``shortlist.npz``) and the manifest's ``shortlist`` entry and checksum are written into
the bundle.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.bundle import MANIFEST, BundleError, load_bundle
from engine.cli import HelpFormatter, int_at_least
from engine.shortlist import Shortlist
from engine.tokenizer import Tokenizer
from model.data import CorpusError, read_parallel

log = logging.getLogger(__name__)

FILE = "shortlist.npz"
K_MAX = 100  # the most pieces per source piece a file holds before the choice of k
FREQUENT_MAX = 4000
CHUNK = 20_000  # sentence pairs counted at once


def build(
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    *,
    source_vocab: int,
    target_vocab: int,
    k: int = K_MAX,
    frequent: int = FREQUENT_MAX,
) -> Shortlist:
    """The shortlist of tokenized sentence pairs (ids below ``source_vocab``/``target_vocab``)."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} source sentences but {len(targets)} target sentences")
    pairs, pair_counts = _pair_counts(sources, targets, target_vocab)
    source_counts = _sentence_counts(sources, source_vocab)
    target_counts = _sentence_counts(targets, target_vocab)
    s, t = pairs // target_vocab, pairs % target_vocab
    score = pair_counts / source_counts[s] - target_counts[t] / max(len(targets), 1)
    table = _best_per_source(s, t, score, source_vocab, k)
    tokens = np.bincount(np.concatenate([np.asarray(x, dtype=np.int64) for x in targets]), minlength=target_vocab)
    seen = np.flatnonzero(tokens)
    by_frequency = seen[np.argsort(-tokens[seen], kind="stable")]
    return Shortlist(table, by_frequency[:frequent])


def _sentence_counts(sentences: Sequence[Sequence[int]], vocab: int) -> np.ndarray:
    """(vocab,): the number of sentences each piece occurs in."""
    unique = [np.unique(np.asarray(s, dtype=np.int64)) for s in sentences]
    return np.bincount(np.concatenate(unique), minlength=vocab) if unique else np.zeros(vocab, np.int64)


def _pair_counts(
    sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]], target_vocab: int
) -> tuple[np.ndarray, np.ndarray]:
    """The (source, target) pieces that share a sentence pair, as codes s * target_vocab + t, and
    the number of pairs each does; counted in chunks, whose codes are merged."""
    codes, counts = [], []
    for start in range(0, len(sources), CHUNK):
        chunk = zip(sources[start : start + CHUNK], targets[start : start + CHUNK], strict=True)
        pairs = [
            (np.unique(np.asarray(s, dtype=np.int64))[:, None] * target_vocab + np.unique(np.asarray(t))).ravel()
            for s, t in chunk
        ]
        chunk_codes, chunk_counts = np.unique(np.concatenate(pairs), return_counts=True)
        codes.append(chunk_codes)
        counts.append(chunk_counts)
    merged, where = np.unique(np.concatenate(codes), return_inverse=True)
    return merged, np.bincount(where, weights=np.concatenate(counts)).astype(np.int64)


def _best_per_source(s: np.ndarray, t: np.ndarray, score: np.ndarray, source_vocab: int, k: int) -> np.ndarray:
    """(source_vocab, k): each source piece's ``k`` best-scored target pieces, best first, -1 past its last."""
    order = np.lexsort((t, -score, s))  # by source, then best first, then lower id first
    s, t = s[order], t[order]
    first = np.searchsorted(s, s)  # where each source's run begins
    rank = np.arange(len(s)) - first
    keep = rank < k
    table = np.full((source_vocab, k), -1, dtype=np.int64)
    table[s[keep], rank[keep]] = t[keep]
    return table


# ---------------------------------------------------------------------------------------------
# Choosing k and the frequent pieces on a dev set
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    k: int
    frequent: int
    bleu: float
    mean_pieces: float  # M per sub-batch, averaged over the sentences


def choose(full_bleu: float, trials: list[Trial], tolerance: float) -> Trial | None:
    """The trial with the fewest pieces per batch among those within ``tolerance`` BLEU of the full
    vocabulary; None if none is."""
    good = [t for t in trials if t.bleu >= full_bleu - tolerance]
    return min(good, key=lambda t: (t.mean_pieces, -t.bleu), default=None)


def measure(bundle: Path, shortlist: Shortlist, texts: list[str], refs: list[str], grid: list[tuple[int, int]]):
    """The full vocabulary's BLEU on ``texts``, and a Trial per (k, frequent) of ``grid``."""
    import sacrebleu

    from engine import TranslationOptions, Translator, TranslatorConfig

    translator = Translator(TranslatorConfig(model_dir=bundle, provider="cpu", max_batch_sentences=32))

    def bleu(options: TranslationOptions) -> float:
        results = translator.translate_batch(texts, options).results
        return sacrebleu.corpus_bleu([r.text for r in results], [refs]).score

    full = bleu(TranslationOptions(shortlist=False))
    trials = []
    for k, frequent in grid:
        translator.shortlist = shortlist.cut(k, frequent)
        pieces = _mean_pieces(translator, texts)
        trials.append(Trial(k, frequent, bleu(TranslationOptions(shortlist=True)), pieces))
        log.info(
            "k %d, frequent %d: BLEU %.2f (full %.2f), %.0f pieces per batch",
            k,
            frequent,
            trials[-1].bleu,
            full,
            pieces,
        )
    translator.close()
    return full, trials


def _mean_pieces(translator, texts: list[str]) -> float:
    """The shortlist's size per sub-batch of 32 length-sorted sentences, averaged over sentences."""
    ids = sorted((translator.tokenizer.encode(t) for t in texts), key=len)
    batches = [ids[i : i + 32] for i in range(0, len(ids), 32)]
    eos = translator.manifest.special_tokens.eos
    return float(
        np.average([len(translator.shortlist.for_batch(b, [eos])) for b in batches], weights=[len(b) for b in batches])
    )


# ---------------------------------------------------------------------------------------------
# Writing it into the bundle
# ---------------------------------------------------------------------------------------------


def write(bundle: Path, shortlist: Shortlist, *, default: bool, bleu: dict[str, dict[str, float]]) -> None:
    """Save ``shortlist`` as the bundle's shortlist file and name it, with its checksum, in the manifest.

    The new manifest is validated before anything is written, and the old file and manifest are put
    back if writing fails: a bundle the service serves must never be left unloadable.
    """
    path, manifest_path = bundle / FILE, bundle / MANIFEST
    old = {p: p.read_bytes() for p in (path, manifest_path) if p.is_file()}
    try:
        shortlist.save(path)
        manifest = _with_shortlist(json.loads(old[manifest_path]), path, shortlist, default=default, bleu=bleu)
        manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        load_bundle(bundle, check_graphs=False)  # the manifest as written must load
    except BaseException:
        path.unlink(missing_ok=True)
        for p, content in old.items():
            p.write_bytes(content)
        raise


def _with_shortlist(
    manifest: dict, path: Path, shortlist: Shortlist, *, default: bool, bleu: dict[str, dict[str, float]]
) -> dict:
    manifest["files"][FILE] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest["files"] = dict(sorted(manifest["files"].items()))
    manifest["shortlist"] = {
        "file": FILE,
        "k": shortlist.k,
        "frequent": len(shortlist.frequent),
        "default": default,
        "bleu": bleu,
    }
    return manifest


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m export.shortlist", description=__doc__, formatter_class=HelpFormatter
    )
    parser.add_argument("--bundle", type=Path, required=True, help="bundle directory to add the shortlist to")
    parser.add_argument("--source", type=Path, required=True, help="parallel corpus, source side, a sentence a line")
    parser.add_argument("--target", type=Path, required=True, help="its target side, line by line")
    parser.add_argument(
        "--dev-source", type=Path, help="held-out source sentences to choose k and --frequent on (default: none)"
    )
    parser.add_argument("--dev-target", type=Path, help="their references; needed with --dev-source (default: none)")
    parser.add_argument("--k", type=int_at_least(1), nargs="+", default=[10], help="target pieces per source piece")
    parser.add_argument(
        "--frequent", type=int_at_least(0), nargs="+", default=[300], help="most frequent target pieces"
    )
    parser.add_argument("--tolerance", type=float, default=0.2, help="BLEU below the full vocabulary's allowed")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.dev_source is None) != (args.dev_target is None):
        parser.error("--dev-source and --dev-target go together: give both, or neither")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        bundle = load_bundle(args.bundle, check_graphs=False)
        corpus = read_parallel(args.source, args.target)
        dev = read_parallel(args.dev_source, args.dev_target) if args.dev_source else None
    except (BundleError, CorpusError) as e:
        parser.error(str(e))
    tokenizer = Tokenizer.from_bundle(bundle)
    d = bundle.manifest.dimensions
    sources = tokenizer.encode_batch(corpus[0])
    targets = [[*tokenizer.encode_target(line), bundle.manifest.special_tokens.eos] for line in corpus[1]]
    k_max, frequent_max = max(args.k), max(args.frequent)
    shortlist = build(
        sources, targets, source_vocab=tokenizer.vocab_size, target_vocab=d.vocab_size, k=k_max, frequent=frequent_max
    )
    if dev is None:
        write(args.bundle, shortlist.cut(args.k[0], args.frequent[0]), default=False, bleu={})
        return
    write(args.bundle, shortlist, default=False, bleu={})  # the translator measures with it loaded
    grid = [(k, f) for k in args.k for f in args.frequent]
    texts, refs = dev
    full, trials = measure(args.bundle, shortlist, texts, refs, grid)
    best = choose(full, trials, args.tolerance) or min(trials, key=lambda t: -t.bleu)
    within = best.bleu >= full - args.tolerance
    bleu = {args.dev_source.stem: {"full": round(full, 2), "shortlist": round(best.bleu, 2)}}
    write(args.bundle, shortlist.cut(best.k, best.frequent), default=within, bleu=bleu)
    log.info(
        "kept k %d, frequent %d: BLEU %.2f vs %.2f, on by default: %s", best.k, best.frequent, best.bleu, full, within
    )


if __name__ == "__main__":
    main()
