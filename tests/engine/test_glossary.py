"""Where a text says a glossary's source terms (engine/glossary.py)."""

from __future__ import annotations

import pickle

import pytest

from engine.glossary import BuiltGlossaries, Glossary, Term, glossary_size


def said(glossary: Glossary, text: str) -> list[tuple[str, str]]:
    return [(text[m.start : m.end], glossary.terms[m.term].target) for m in glossary.find(text)]


def test_whole_words_only_and_case_insensitive_by_default() -> None:
    g = Glossary.of({"dog": "Köter", "e-mail": "E-Post"})
    assert said(g, "A Dog, two dogs, a hotdog; DOG!") == [("Dog", "Köter"), ("DOG", "Köter")]
    assert said(g, "Send an e-mail, not e-mails or an email.") == [("e-mail", "E-Post")]


def test_a_case_sensitive_term_matches_its_case_only() -> None:
    g = Glossary((Term("Apple", "Apple Inc.", case_sensitive=True), Term("apple", "Apfel")))
    assert said(g, "Apple sells an apple, APPLE.") == [("Apple", "Apple Inc."), ("apple", "Apfel"), ("APPLE", "Apfel")]


def test_the_longest_term_wins_and_matches_do_not_overlap() -> None:
    g = Glossary.of({"red": "rot", "red shirt": "rotes Hemd", "shirt": "Hemd", "shirt sleeve": "Ärmel"})
    assert said(g, "A red shirt sleeve; a red hat.") == [("red shirt", "rotes Hemd"), ("red", "rot")]
    assert said(g, "The shirt sleeve is red.") == [("shirt sleeve", "Ärmel"), ("red", "rot")]


def test_multi_word_terms_match_across_any_whitespace() -> None:
    g = Glossary.of({"fire  truck": "Löschfahrzeug"})
    assert said(g, "A fire\ttruck.") == [("fire\ttruck", "Löschfahrzeug")]


@pytest.mark.parametrize(
    ("terms", "message"),
    [
        ({"": "x"}, "empty"),
        ({"dog": " "}, "empty"),
        ({" ".join(["w"] * 17): "x"}, "more than 16 words"),
    ],
)
def test_bad_terms_are_refused_with_a_message(terms: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Glossary.of(terms)


def test_a_source_term_twice_is_refused_as_it_would_match() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Glossary.of([("Dog", "Hund"), ("dog", "Köter")])
    Glossary((Term("Dog", "Hund", case_sensitive=True), Term("dog", "Köter", case_sensitive=True)))


def test_many_terms_and_a_long_text_are_matched_word_by_word() -> None:
    """10,000 terms and a 200,000-character text: a dictionary lookup per word, not a regex per term."""
    g = Glossary.of({f"term{i} word": f"Begriff{i}" for i in range(10_000)})
    text = " ".join(f"term{i % 20_000} word" for i in range(20_000))[:200_000]
    found = g.find(text)
    assert len(found) == sum(1 for i in range(20_000) if i % 20_000 < 10_000 and f"term{i} word" in text)
    assert found[0].start == 0 and text[found[-1].start : found[-1].end].endswith("word")


def test_a_pickled_glossary_comes_back_whole_and_is_built_once_per_process() -> None:
    """As the service sends it to an engine process with each batch: the same terms, places and
    index; a second batch with the same glossary gets the copy built for the first."""
    sent = Glossary(
        (Term("New York", "New York", case_sensitive=True), Term("dog", "Köter"), Term("ice cream", "Eis")),
        placed=(0.1, 0.5, 0.9),
    )
    first, second = pickle.loads(pickle.dumps(sent)), pickle.loads(pickle.dumps(sent))
    assert first == sent and hash(first) == hash(sent) and first.placed == sent.placed
    assert second is first
    plain = Glossary(sent.terms)
    assert pickle.loads(pickle.dumps(plain)).find("In New York a dog eats ice cream.") == plain.find(
        "In New York a dog eats ice cream."
    )


def test_built_glossaries_keep_the_most_recently_used_within_their_bytes() -> None:
    glossaries = [Glossary.of({f"term {g} {i}": f"Begriff {i}" for i in range(1000)}) for g in range(3)]
    size = glossary_size(glossaries[0])
    assert 400_000 < size < 700_000  # about 560 bytes a short term (5.6 MB for 10,000, measured)
    built = BuiltGlossaries(max_bytes=2 * size + size // 2)
    built.put("a", glossaries[0])
    built.put("b", glossaries[1])
    assert built.get("a") is glossaries[0]  # "b" is now the least recently used
    built.put("c", glossaries[2])
    assert (built.get("a"), built.get("b"), built.get("c")) == (glossaries[0], None, glossaries[2])
    built.put("a", glossaries[1])  # replaced, not counted twice
    assert built.get("a") is glossaries[1] and built.get("c") is glossaries[2]


def test_a_placed_glossary_gives_each_markup_unit_the_terms_placed_in_it() -> None:
    dog, park, cat = Term("dog", "Köter"), Term("park", "Grünanlage"), Term("cat", "Mieze")
    glossary = Glossary((dog, park, cat, dog), placed=(0.25, 0.5, 2.0, 7.5))
    # Past the last unit: in the last, after its end.
    assert glossary.in_units(3) == [[(0, 0.25), (1, 0.5)], [], [(2, 0.0), (3, 5.5)]]
    assert glossary.in_units(0) == []


def test_markup_says_the_terms_of_its_units_each_at_its_unit_and_place_in_it() -> None:
    glossary = Glossary.of({"dog": "Köter", "red": "rot"})
    markup = '<p>A <b>red</b> dog.</p><p title="the red house">The dog sleeps.</p>'  # units: text, title, text
    found = [(glossary.terms[m.term].target, place) for m, place in glossary.said(markup, "html")]
    assert found == [("rot", 2 / 10), ("Köter", 6 / 10), ("rot", 1 + 4 / 13), ("Köter", 2 + 4 / 15)]
    # Its tags say nothing: "b" and "title" are no words of it.
    assert Glossary.of({"b": "B", "title": "Titel"}).said(markup, "html") == []
    plain = [(glossary.terms[m.term].target, place) for m, place in glossary.said("A red dog.")]
    assert plain == [("rot", 2 / 10), ("Köter", 6 / 10)]


def test_the_terms_a_text_says_make_the_glossary_of_its_pivot_text_placed_where_it_says_them() -> None:
    glossary = Glossary.of({"dog": "Köter", "cat": "Mieze", "park": "Grünanlage"})
    said = glossary.said("A dog, a cat and a dog.")
    placed = glossary.placed_as_said(said)
    assert placed is not None
    assert [t.target for t in placed.terms] == ["Köter", "Mieze", "Köter"]  # a term said twice is placed twice
    assert placed.placed == (2 / 23, 9 / 23, 19 / 23)
    assert glossary.placed_as_said(glossary.said("A bird sings.")) is None
