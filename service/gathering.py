"""One model's translations of a request's texts: from the cache what it has, the rest from the
model's batcher, gathered back in the texts' order.

The cache is keyed by the model (name, version, variant), the text and the options resolved with
the model's defaults (``TranslationOptions.resolved``): equal requests share batches and cache
entries whatever defaults they leave out. What the batcher translates is put in the cache and
counted in the model's token metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine import languages
from engine.api import ModelInfo, TranslationOptions, TranslationResult
from engine.repository import Hop
from service.cache import TranslationCache
from service.errors import InvalidRequest, UnsupportedLanguage
from service.metrics import Metrics
from service.models import ModelPool


@dataclass(frozen=True)
class Batching:
    """What the batches of one request's texts share: its deadline, and the request's source
    tokens where it is translated a part at a time (a stream's sentences), so that each part goes
    in the batcher's lane of the whole (a long text's sentences are heavy, one by one too)."""

    timeout_s: float
    request_tokens: int | None = None


class Gathering:
    """Translations by the models of ``pool``, through ``cache``."""

    def __init__(self, pool: ModelPool, cache: TranslationCache, metrics: Metrics) -> None:
        self.pool = pool
        self.cache = cache
        self.metrics = metrics

    async def translate(
        self,
        hop: Hop,
        texts: list[str],
        asked: TranslationOptions,
        batching: Batching,
        tokens: list[int] | None = None,
    ) -> tuple[list[TranslationResult], str]:
        """``texts`` by ``hop``'s model, with its name and version. ``tokens``: each text's source
        tokens by that model, where already counted."""
        model = hop.model
        async with self.pool.use(model) as loaded:
            info = loaded.engine.info
            options = _resolve(replace(asked, source_language=hop.source, target_language=hop.target), info)
            key = f"{info.name}:{info.version}:{info.variant}"
            results: list[TranslationResult | None] = [self.cache.get(key, text, options) for text in texts]
            missing = [i for i, r in enumerate(results) if r is None]
            if self.cache.enabled:
                self.metrics.cache_hits.inc(len(texts) - len(missing))
                self.metrics.cache_misses.inc(len(missing))
            if missing:
                fresh = await loaded.batcher.translate(
                    [texts[i] for i in missing],
                    options,
                    timeout_s=batching.timeout_s,
                    request_tokens=batching.request_tokens,
                    tokens=None if tokens is None else [tokens[i] for i in missing],
                )
                for i, result in zip(missing, fresh, strict=True):
                    results[i] = result
                    self.cache.put(key, texts[i], options, result)
                    self.metrics.input_tokens.labels(model).inc(result.input_tokens)
                    self.metrics.output_tokens.labels(model).inc(result.output_tokens)
        return [r for r in results if r is not None], f"{info.name}:{info.version}"


def _resolve(options: TranslationOptions, info: ModelInfo) -> TranslationOptions:
    """Options with the model's defaults and language codes filled in: equal requests share
    batches and cache entries."""
    try:
        return options.resolved(info)
    except languages.UnsupportedLanguage as e:
        raise UnsupportedLanguage(str(e)) from None
    except ValueError as e:
        raise InvalidRequest(str(e)) from None
