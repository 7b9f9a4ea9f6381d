"""The inference engine: load a bundle and translate with onnxruntime; no torch, no HTTP.

from engine import TranslationOptions, Translator, TranslatorConfig

translator = Translator(TranslatorConfig(model_dir="models/en-de/bundle"))
batch = translator.translate_batch(["A dog runs in the park."], TranslationOptions(beam_size=4))
print(batch.results[0].text)
"""

from engine.alignment import Alignment
from engine.api import (
    BatchStats,
    Engine,
    Hypothesis,
    ModelInfo,
    TranslatedBatch,
    TranslationOptions,
    TranslationResult,
)
from engine.bundle import BundleError
from engine.translator import Translator, TranslatorConfig

__all__ = [
    "Alignment",
    "BatchStats",
    "BundleError",
    "Engine",
    "Hypothesis",
    "ModelInfo",
    "TranslatedBatch",
    "TranslationOptions",
    "TranslationResult",
    "Translator",
    "TranslatorConfig",
]
