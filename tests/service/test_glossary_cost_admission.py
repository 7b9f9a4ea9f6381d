"""The cost a glossary request is admitted at: each text searched GLOSSARY_SEARCHES times more at
the glossary's beam, the most the engine spends putting its terms in (``engine.translator._Allowance``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_runtime import with_runtime

from engine import TranslationOptions
from engine.bundle import load_bundle
from engine.cost import GLOSSARY_MIN_BEAM, GLOSSARY_SEARCHES
from engine.glossary import Glossary
from engine.tokenizer import Tokenizer
from service.errors import PayloadTooLarge
from service.runtime import Runtime
from service.translation import JobGlossary, TranslationJob

TEXT = "A man rides a bike down the street."
GLOSSARY = JobGlossary(Glossary.of({"man": "Herr"}))


def test_a_glossary_request_is_admitted_at_its_search_and_its_searches_with_constraints(tiny_bundle: Path) -> None:
    bundle = load_bundle(tiny_bundle, check_graphs=False)
    tokens = len(Tokenizer.from_bundle(bundle).encode(TEXT))  # EOS included
    beam = bundle.manifest.decoding.beam_size
    admitted = tokens * (beam + GLOSSARY_SEARCHES * max(beam, GLOSSARY_MIN_BEAM))

    async def test(runtime: Runtime) -> None:
        def job(**options: Any) -> TranslationJob:
            return TranslationJob([TEXT], "de", "en", options=TranslationOptions(**options), glossary=GLOSSARY)

        await runtime.translate(job())
        with pytest.raises(PayloadTooLarge, match="MT_MAX_BEAM_TOKENS") as refusal:
            await runtime.translate(job(beam_size=beam + 1))
        requested = tokens * (beam + 1 + GLOSSARY_SEARCHES * max(beam + 1, GLOSSARY_MIN_BEAM))
        assert refusal.value.details == {"setting": "MT_MAX_BEAM_TOKENS", "limit": admitted, "requested": requested}

    with_runtime(tiny_bundle, test, max_beam_tokens=admitted)


def test_a_glossary_request_over_the_limit_only_by_its_searches_with_constraints_is_refused(tiny_bundle: Path) -> None:
    bundle = load_bundle(tiny_bundle, check_graphs=False)
    tokens = len(Tokenizer.from_bundle(bundle).encode(TEXT))
    beam = bundle.manifest.decoding.beam_size

    async def test(runtime: Runtime) -> None:
        await runtime.translate(TranslationJob([TEXT], "de", "en"))
        with pytest.raises(PayloadTooLarge, match="MT_MAX_BEAM_TOKENS"):
            await runtime.translate(TranslationJob([TEXT], "de", "en", glossary=GLOSSARY))

    with_runtime(tiny_bundle, test, max_beam_tokens=tokens * max(beam, GLOSSARY_MIN_BEAM))


def test_a_text_that_says_no_term_costs_what_it_costs_without_the_glossary(tiny_bundle: Path) -> None:
    """The engine puts terms in only where a sentence says one, so only such texts pay for it."""
    bundle = load_bundle(tiny_bundle, check_graphs=False)
    tokens = len(Tokenizer.from_bundle(bundle).encode(TEXT))
    beam = bundle.manifest.decoding.beam_size
    elsewhere = JobGlossary(Glossary.of({"bicycle": "Fahrrad"}))

    async def test(runtime: Runtime) -> None:
        [result] = (await runtime.translate(TranslationJob([TEXT], "de", "en", glossary=elsewhere))).results
        assert result.terms == []
        with pytest.raises(PayloadTooLarge, match="MT_MAX_BEAM_TOKENS"):
            await runtime.translate(TranslationJob([TEXT], "de", "en", glossary=GLOSSARY))

    with_runtime(tiny_bundle, test, max_beam_tokens=tokens * beam)
