"""What putting glossary terms in costs the engine: a sentence whose terms no guide can give it is
decoded again only within the allowance the service admits it at (``engine.translator._Allowance``),
counted in sub-batches decoded on the tiny bundle, not in time."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import TranslationOptions, Translator, TranslatorConfig
from engine.constraints import GUIDES
from engine.cost import GLOSSARY_SEARCHES
from engine.glossary import Glossary

# Longer than the translation of a short sentence may be (1.5 x its source + 10): neither put in
# place of the model's words nor reached by a constrained search, under any guide.
TOO_LONG = " ".join(["hund", "katze", "mann", "frau", "baum", "haus", "auto", "ball"] * 4)


@pytest.fixture(scope="module")
def translator(tiny_bundle: Path) -> Translator:
    return Translator(TranslatorConfig(model_dir=tiny_bundle, threads=1))


def sub_batches(translator: Translator, text: str, glossary: Glossary) -> tuple[int, list[bool | None]]:
    """The sub-batches decoded for ``text`` alone, and whether each term it says was used."""
    batch = translator.translate_batch([text], TranslationOptions(glossary=glossary))
    [result] = batch.results
    return len(batch.stats.sub_batches), [use.used for use in result.terms]


def test_a_term_no_guide_can_put_in_is_tried_once_within_the_allowance(translator: Translator) -> None:
    """Its one sentence's allowance is GLOSSARY_SEARCHES searches at the glossary's beam: the first
    guides spend it, and the term is reported unused rather than tried under every guide."""
    decoded, used = sub_batches(translator, "The cat sits.", Glossary.of({"cat": TOO_LONG}))
    assert used == [False]
    assert decoded == 1 + GLOSSARY_SEARCHES < 1 + len(GUIDES)


def test_sentences_that_use_their_terms_leave_their_allowance_to_one_that_does_not(translator: Translator) -> None:
    """Terms the model writes by itself cost nothing more, so a sentence missing one goes through
    every guide on what the others were admitted for."""
    glossary = Glossary.of({"dog": "Kind", "cat": TOO_LONG})  # the tiny model's translation of "A dog runs."
    assert sub_batches(translator, "A dog runs.", glossary) == (1, [True])
    decoded, used = sub_batches(translator, "A dog runs. " * 2 + "The cat sits.", glossary)
    assert used == [True, True, False]
    assert decoded == 1 + len(GUIDES)
