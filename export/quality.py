"""Measured quality of a bundle's variants: cased, detokenized sacreBLEU and chrF on a test set,
and the time each takes, from which the default CPU variant is chosen.

Translation goes through the service's own engine (``engine.translator.Translator``) on the
bundle, in the layout the service runs by default (``auto_streams``: two single-thread streams on
a machine of two cores or more), so the figures in the manifest are those of what is served, int8
included. The variants' passes alternate over a few rounds and each keeps its median time: one
pass each, one after the other, compares two moments of a machine whose speed drifts.

    python -m export.quality --bundle models/en-de/bundle --eval-data ../shared/data/multi30k

measures an existing bundle again and rewrites its manifest's quality and default CPU variant (the
graphs are left as they are).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from engine.bundle import BundleError, Manifest, Quality
from export import ExportError
from model.data import CorpusError, read_lines
from model.evaluate import score_translations

TEST_SET = "test_2016_flickr"
ROUNDS = 3  # timed passes of each variant, alternating
# int8 is served by default only if it loses at most this much BLEU against fp32 and is this much
# faster: on small models onnxruntime's int8 can be slower than fp32, and then there is no reason to
# serve it; and a single timing on a busy machine once made a 6% noise difference look like a win.
MAX_INT8_BLEU_LOSS = 0.3
MIN_INT8_SPEEDUP = 1.1


@dataclass(frozen=True)
class TestSet:
    name: str
    source_language: str
    target_language: str
    sources: list[str]
    references: list[str]

    @classmethod
    def load(cls, data_dir: Path, source_language: str, target_language: str, name: str = TEST_SET) -> TestSet:
        src, ref = data_dir / f"{name}.{source_language}", data_dir / f"{name}.{target_language}"
        for path in (src, ref):
            if not path.is_file():
                raise ExportError(f"{path}: evaluation file not found (needed by --eval-data)")
        try:
            sources, references = read_lines(src), read_lines(ref)
        except CorpusError as e:
            raise ExportError(f"--eval-data: {e}") from e
        if len(sources) != len(references) or not sources:
            raise ExportError(f"{src} and {ref}: {len(sources)} vs {len(references)} lines; need equal, non-zero")
        return cls(name, source_language, target_language, sources, references)


def measure(
    bundle_dir: Path, variants: list[str], test_set: TestSet, *, beam_size: int, rounds: int = ROUNDS
) -> dict[str, Quality]:
    """Translate ``test_set`` with each of ``variants`` of the bundle in ``bundle_dir`` and score
    it; the seconds are each variant's median over ``rounds`` alternating passes."""
    # Imported here: the engine is only needed with --eval-data.
    from engine import TranslationOptions, Translator, TranslatorConfig
    from engine.translator import auto_streams

    streams = auto_streams("cpu")
    options = TranslationOptions(
        source_language=test_set.source_language, target_language=test_set.target_language, beam_size=beam_size
    )
    translators = {
        v: Translator(TranslatorConfig(model_dir=bundle_dir, provider="cpu", variant=v, streams=streams))
        for v in variants
    }
    texts: dict[str, list[str]] = {}
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    try:
        for round_ in range(rounds):
            for v in variants if round_ % 2 == 0 else variants[::-1]:
                start = time.perf_counter()
                results = translators[v].translate_batch(test_set.sources, options).results
                seconds[v].append(time.perf_counter() - start)
                if round_ == 0:  # every pass translates alike: the first is scored
                    texts[v] = [r.text for r in results]
    finally:
        for translator in translators.values():
            translator.close()
    return {v: _quality(texts[v], statistics.median(seconds[v]), test_set, beam_size) for v in variants}


def _quality(texts: list[str], seconds: float, test_set: TestSet, beam_size: int) -> Quality:
    scores = score_translations(texts, test_set.references)
    return Quality(
        bleu=round(scores.bleu, 2),
        chrf=round(scores.chrf, 2),
        beam_size=beam_size,
        sentences=len(test_set.sources),
        seconds=round(seconds, 2),
        bleu_signature=scores.bleu_signature,
        chrf_signature=scores.chrf_signature,
    )


def cpu_default(
    qualities: dict[str, Quality],
    *,
    max_int8_bleu_loss: float = MAX_INT8_BLEU_LOSS,
    min_int8_speedup: float = MIN_INT8_SPEEDUP,
) -> str:
    """The variant the CPU serves by default: int8 if it pays for its quality loss with speed."""
    if "int8" not in qualities:
        return "fp32"
    fp32, int8 = qualities["fp32"], qualities["int8"]
    paid = fp32.bleu - int8.bleu <= max_int8_bleu_loss and int8.seconds * min_int8_speedup <= fp32.seconds
    return "int8" if paid else "fp32"


def with_quality(manifest: Manifest, qualities: dict[str, Quality], test_set: str, default: str) -> Manifest:
    """``manifest`` with each variant's quality on ``test_set`` and ``default`` as its CPU default."""
    variants = {
        name: variant.model_copy(update={"quality": {**variant.quality, test_set: qualities[name]}})
        for name, variant in manifest.variants.items()
    }
    chosen = manifest.default_variant.model_copy(update={"cpu": default})
    return manifest.model_copy(update={"variants": variants, "default_variant": chosen})


def build_parser() -> argparse.ArgumentParser:
    from engine.cli import HelpFormatter, int_at_least

    parser = argparse.ArgumentParser(
        prog="python -m export.quality", description=__doc__, formatter_class=HelpFormatter
    )
    parser.add_argument("--bundle", type=Path, required=True, help="the bundle to measure; its manifest is rewritten")
    parser.add_argument(
        "--eval-data", type=Path, required=True, help=f"a directory with {TEST_SET}.{{source,target language}}"
    )
    parser.add_argument("--eval-beam-size", type=int_at_least(1), default=5, help="beam size of the translations")
    return parser


def main(argv: list[str] | None = None) -> int:
    from engine.bundle import load_bundle
    from export.bundle_writer import write_manifest

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        manifest = load_bundle(args.bundle).manifest
        source, target = manifest.languages.source[0].code, manifest.languages.target[0].code
        test_set = TestSet.load(args.eval_data, source, target)
    except (BundleError, ExportError) as e:
        parser.error(str(e))
    qualities = measure(args.bundle, list(manifest.variants), test_set, beam_size=args.eval_beam_size)
    default = cpu_default(qualities)
    write_manifest(args.bundle, with_quality(manifest, qualities, test_set.name, default))
    for name, quality in qualities.items():
        sys.stdout.write(f"{name}: BLEU {quality.bleu:.2f}, chrF {quality.chrf:.2f}, {quality.seconds:.2f} s\n")
    sys.stdout.write(f"default CPU variant: {default}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
