"""``Runtime`` without HTTP: one call checks and translates a ``TranslationJob``; drain state."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from engine import TranslationOptions, Translator
from engine.bundle import load_bundle
from engine.tokenizer import Tokenizer
from service.errors import PayloadTooLarge, Unauthorized, Unavailable, UnsupportedLanguage
from service.identification import Refused
from service.metrics import Metrics
from service.runtime import Runtime
from service.settings import Settings
from service.translation import TranslationJob


def with_runtime(bundle: Path, test: Callable[[Runtime], Coroutine[Any, Any, None]], **settings: Any) -> None:
    async def main() -> None:
        config = Settings(model_dir=bundle, threads=1, streams=1, engine_process=False, **settings)
        runtime = Runtime(config, Metrics())
        with pytest.raises(Unavailable, match="loading"):
            await runtime.check_ready()
        await runtime.load()
        try:
            await test(runtime)
        finally:
            await runtime.close()

    asyncio.run(main())


def test_one_call_checks_key_size_and_languages_then_translates(tiny_bundle: Path) -> None:
    async def test(runtime: Runtime) -> None:
        job = TranslationJob(texts=["A dog runs."], target_lang="de", api_key="secret")
        done = await runtime.translate(job)
        assert done.results[0].text and done.models == ["mt-en-de:1.0.0"]
        assert done.detections is not None and done.detections[0].language == "en"
        for bad, error in [
            (TranslationJob(texts=["A dog."], target_lang="de"), Unauthorized),
            (TranslationJob(texts=["A dog."], target_lang="de", api_key="wrong"), Unauthorized),
            (TranslationJob(texts=["a"] * 3, target_lang="de", api_key="secret"), PayloadTooLarge),
            (TranslationJob(texts=["A dog."], target_lang="xx", api_key="secret"), UnsupportedLanguage),
            (
                TranslationJob(texts=["Le chien dort sous l'arbre du jardin."], target_lang="de", api_key="secret"),
                UnsupportedLanguage,
            ),
        ]:
            with pytest.raises(error):
                await runtime.translate(bad)

    with_runtime(tiny_bundle, test, api_keys="secret", max_texts=2, max_queue_sentences=2)


def test_texts_are_identified_only_when_the_source_is_not_given(tiny_bundle: Path) -> None:
    async def test(runtime: Runtime) -> None:
        def identified() -> float:
            return runtime.metrics.registry.get_sample_value("mt_detected_languages_total", {"language": "en"}) or 0

        stated = await runtime.translate(TranslationJob(texts=["A dog runs."], source_lang="en", target_lang="de"))
        assert stated.detections is None and identified() == 0
        auto = await runtime.translate(TranslationJob(texts=["A dog runs.", "A cat sits."], target_lang="de"))
        assert [d.language for d in auto.detections or []] == ["en", "en"] and identified() == 2

    with_runtime(tiny_bundle, test)


def test_a_refused_text_fails_only_itself_unless_every_text_is_refused(tiny_bundle: Path) -> None:
    french = "Le chien dort sous l'arbre du jardin."

    async def test(runtime: Runtime) -> None:
        texts = ["A path leads to a pagoda.", french, "A dog runs.", "😀"]
        done = await runtime.translate(TranslationJob(texts=texts, target_lang="de"))
        assert done.detections is not None
        unsure, refused, plain, symbols = done.detections
        assert unsure is not None and unsure.language == "en" and not isinstance(unsure, Refused)  # Italian at 0.23
        assert isinstance(refused, Refused) and refused.language == "fr" and "'fr'" in refused.message
        assert plain is not None and plain.language == "en" and symbols is None
        assert done.models == ["mt-en-de:1.0.0", None, "mt-en-de:1.0.0", None]
        assert [r.text for r in done.results][1::2] == [french, "😀"]  # returned as they are
        with pytest.raises(UnsupportedLanguage, match="'fr'") as refusal:
            await runtime.translate(TranslationJob(texts=[french, "😀"], target_lang="de"))
        assert refusal.value.details["detected_language"] == "fr"

    with_runtime(tiny_bundle, test)


def test_omitted_options_are_the_models_defaults_and_share_the_cache(tiny_bundle: Path) -> None:
    async def test(runtime: Runtime) -> None:
        pool, _ = runtime.serving()
        info = pool.slots["mt-en-de"].info
        assert info is not None
        explicit = TranslationOptions(beam_size=info.decoding.beam_size, length_penalty=info.decoding.length_penalty)
        await runtime.translate(TranslationJob(texts=["A red dog."], target_lang="de", options=explicit))
        hits = lambda: runtime.metrics.registry.get_sample_value("mt_cache_hits_total")
        before = hits()
        await runtime.translate(TranslationJob(texts=["A red dog."], target_lang="de"))
        assert hits() == before + 1
        wider = TranslationOptions(num_hypotheses=info.decoding.beam_size + 1)  # the beam widens to hold them
        # a sentence whose alternatives all have words (one that would be empty is left out)
        done = await runtime.translate(
            TranslationJob(texts=["Two dogs run on the grass."], target_lang="de", options=wider)
        )
        assert len(done.results[0].hypotheses) == info.decoding.beam_size + 1

    with_runtime(tiny_bundle, test)


def test_draining_turns_unready_and_refuses_new_requests(tiny_bundle: Path) -> None:
    async def test(runtime: Runtime) -> None:
        await runtime.check_ready()
        runtime.in_flight.enter()
        runtime.in_flight.start_draining()
        with pytest.raises(Unavailable, match="draining"):
            await runtime.check_ready()
        with pytest.raises(Unavailable, match="shutting down"):
            runtime.in_flight.enter()
        drained = asyncio.ensure_future(runtime.in_flight.drain(timeout_s=30))
        await asyncio.sleep(0)
        assert not drained.done(), "one accepted request is still in flight"
        runtime.in_flight.leave()
        assert await drained

    with_runtime(tiny_bundle, test)


def test_search_cost_and_alignment_size_are_refused_naming_their_setting(tiny_bundle: Path) -> None:
    text = "A man rides a bike down the street."
    tokens = len(Tokenizer.from_bundle(load_bundle(tiny_bundle, check_graphs=False)).encode(text))  # EOS included
    beams = 4

    async def test(runtime: Runtime) -> None:
        def job(texts: list[str], **options: Any) -> TranslationJob:
            return TranslationJob(texts, "de", "en", options=TranslationOptions(**options))

        await runtime.translate(job([text], beam_size=beams, return_alignments=True))
        await runtime.translate(job([text, text], beam_size=beams // 2))  # 2 texts x 2 beams: as much
        looked_up = runtime.metrics.registry.get_sample_value("mt_cache_misses_total")
        for refused, setting, requested in [
            (job([text], beam_size=beams + 1), "MT_MAX_BEAM_TOKENS", tokens * (beams + 1)),
            (job([text], num_hypotheses=beams + 1), "MT_MAX_BEAM_TOKENS", tokens * (beams + 1)),  # the beam widens
            (job([text, text], beam_size=1, return_alignments=True), "MT_MAX_ALIGNMENT_CELLS", 2 * (tokens - 1) ** 2),
        ]:
            with pytest.raises(PayloadTooLarge, match=setting) as refusal:
                await runtime.translate(refused)
            limit = getattr(runtime.settings, setting.removeprefix("MT_").lower())
            assert refusal.value.details == {"setting": setting, "limit": limit, "requested": requested}
        assert runtime.metrics.registry.get_sample_value("mt_cache_misses_total") == looked_up, "refused up front"

    limits = {"max_beam_tokens": tokens * beams, "max_alignment_cells": (tokens - 1) ** 2}
    with_runtime(tiny_bundle, test, **limits)


def test_a_text_is_encoded_once_in_the_http_process(tiny_bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost check's count of each text's source tokens is the one its batch is formed by: the
    batcher does not ask the engine to encode it again. A stream's sentences, not counted by the
    cost check, are counted by the batcher."""
    counted: list[str] = []
    count_tokens = Translator.count_tokens
    monkeypatch.setattr(Translator, "count_tokens", lambda self, text: counted.append(text) or count_tokens(self, text))

    async def test(runtime: Runtime) -> None:
        job = TranslationJob(texts=["A dog runs.", "A cat sleeps."], target_lang="de", source_lang="en")
        done = await runtime.translate(job)
        assert all(r.text for r in done.results) and counted == []
        plan = runtime.plan(TranslationJob(texts=["A dog runs. A bird sings."], target_lang="de", source_lang="en"))
        await runtime.translate_part(plan, "A bird sings.")
        assert counted == ["A bird sings."]

    with_runtime(tiny_bundle, test)
