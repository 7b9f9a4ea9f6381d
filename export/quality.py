"""Measured quality of a bundle's variants: cased, detokenized sacreBLEU and chrF on a test set.

Translation goes through the service's own engine (``engine.translator.Translator``) on the
staged bundle, so the figures in the manifest are those of what is served, int8 included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from engine.bundle import Quality
from export import ExportError
from model.data import CorpusError, read_lines
from model.evaluate import score_translations

TEST_SET = "test_2016_flickr"


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


def measure(bundle_dir: Path, variant: str, test_set: TestSet, *, beam_size: int) -> Quality:
    """Translate ``test_set`` with ``variant`` of the bundle in ``bundle_dir`` and score it."""
    # Imported here: the engine is only needed with --eval-data.
    from engine import TranslationOptions, Translator, TranslatorConfig

    translator = Translator(TranslatorConfig(model_dir=bundle_dir, provider="cpu", variant=variant))
    try:
        start = time.perf_counter()
        options = TranslationOptions(
            source_language=test_set.source_language, target_language=test_set.target_language, beam_size=beam_size
        )
        results = translator.translate_batch(test_set.sources, options).results
        seconds = time.perf_counter() - start
    finally:
        translator.close()
    scores = score_translations([r.text for r in results], test_set.references)
    return Quality(
        bleu=round(scores.bleu, 2),
        chrf=round(scores.chrf, 2),
        beam_size=beam_size,
        sentences=len(test_set.sources),
        seconds=round(seconds, 2),
        bleu_signature=scores.bleu_signature,
        chrf_signature=scores.chrf_signature,
    )
