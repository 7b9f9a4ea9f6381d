"""Text handling (engine/segmenter.py): sentence splitting and faithful reassembly."""

from __future__ import annotations

import random

import pytest

from engine.bundle import Language
from engine.languages import word_separator
from engine.segmenter import segment, split_sentences, split_units


def words(text: str) -> int:
    return len(text.split())


def split(text: str, max_tokens: int = 50) -> list[str]:
    return [s.text for s in segment(text, count_tokens=words, max_tokens=max_tokens).segments]


def identity(text: str, max_tokens: int = 50) -> str:
    seg = segment(text, count_tokens=words, max_tokens=max_tokens)
    return seg.join([s.text for s in seg.segments])


@pytest.mark.parametrize("text", ["", " ", "\n", " \t\r\n \n"])
def test_empty_or_whitespace_text_has_no_segments_and_an_empty_translation(text: str) -> None:
    seg = segment(text, count_tokens=words, max_tokens=10)
    assert seg.segments == []
    assert seg.join([]) == ""


def test_sentences_are_split_at_terminal_punctuation() -> None:
    assert split("A dog runs. Two cats sleep! Is it? Yes… ok") == [
        "A dog runs.",
        "Two cats sleep!",
        "Is it?",
        "Yes… ok",
    ]
    assert split('He said "Stop." Then he left.') == ['He said "Stop."', "Then he left."]


def test_chinese_and_japanese_sentences_split_without_a_space() -> None:
    assert split("狗在公园里跑。猫在睡觉！你好吗？好。") == ["狗在公园里跑。", "猫在睡觉！", "你好吗？", "好。"]
    assert split("「走。」他说。犬が走る。") == ["「走。」", "他说。", "犬が走る。"]
    assert identity("狗跑。 猫睡。猫。") == "狗跑。 猫睡。猫。", "passed through as they touched"
    seg = segment("猫睡。猫。", count_tokens=words, max_tokens=50)
    assert seg.join(["Eine Katze schläft.", "Katze."]) == "Eine Katze schläft. Katze.", "translated: a space between"


def test_symbols_at_a_sentence_s_edges_are_segments_of_their_own() -> None:
    assert split("😀 A dog runs.") == ["😀", "A dog runs."]
    assert split("👍🏽 Great job! 🎉🎉") == ["👍🏽", "Great job!", "🎉🎉"]
    assert split("© 2024 ACME") == ["©", "2024 ACME"]
    assert split("Emoji 😀 inside") == ["Emoji 😀 inside"]
    assert split("😀😀") == ["😀😀"], "nothing but symbols: whole"
    for text in ("😀 A dog runs.", " 😀 x 😀 ", "😀A dog", "👍🏽 Great job! 🎉🎉"):
        assert identity(text) == text


def test_abbreviations_initials_and_lowercase_continuations_do_not_split() -> None:
    assert split("Mr. Smith met Dr. Jones. They talked.") == ["Mr. Smith met Dr. Jones.", "They talked."]
    assert split("J. R. R. Tolkien wrote it.") == ["J. R. R. Tolkien wrote it."]
    assert split("The price is 5 p. m. sharp.") == ["The price is 5 p. m. sharp."]
    assert split("It costs approx. five euros.") == ["It costs approx. five euros."]
    # Test set line 361: splitting after the initialism broke the company name in two.
    assert split("He says E.S.E. Electronics. It works.") == ["He says E.S.E. Electronics.", "It works."]
    assert split("Sie sagt z.B. Hallo. Er nickt.") == ["Sie sagt z.B. Hallo.", "Er nickt."]


def test_lines_and_whitespace_are_reassembled_exactly() -> None:
    text = "  First one. Second  one!\n\n\tThird line?  \r\nLast line\rreally last "
    seg = segment(text, count_tokens=words, max_tokens=50)
    assert [s.text for s in seg.segments] == [
        "First one.",
        "Second  one!",
        "Third line?",
        "Last line",
        "really last",
    ]
    assert seg.join(["1", "2", "3", "4", "5"]) == "  1 2\n\n\t3  \r\n4\r5 "
    assert seg.join([s.text for s in seg.segments]) == text


def test_n_input_lines_give_n_output_lines() -> None:
    text = "One.\nTwo. Three.\n\nFour\n"
    seg = segment(text, count_tokens=words, max_tokens=50)
    out = seg.join(["X"] * len(seg.segments))
    assert out.count("\n") == text.count("\n")
    assert out.split("\n") == ["X", "X X", "", "X", ""]


def test_over_long_sentences_are_split_into_flagged_chunks_that_fit() -> None:
    sentence = "one two three four five, six seven eight; nine ten eleven twelve thirteen fourteen fifteen."
    seg = segment(sentence + " Short one.", count_tokens=words, max_tokens=5)
    chunks = [s for s in seg.segments if s.truncated]
    assert [s.text for s in chunks] == [
        "one two three four five,",
        "six seven eight;",
        "nine ten eleven twelve thirteen",
        "fourteen fifteen.",
    ]
    assert [s.text for s in seg.segments if not s.truncated] == ["Short one."]
    assert all(words(s.text) <= 5 for s in seg.segments)
    assert seg.join([s.text for s in seg.segments]) == sentence + " Short one."


def test_a_single_word_longer_than_the_limit_is_cut_inside_the_word() -> None:
    by_chars = lambda text: len(text)
    seg = segment("x" * 37, count_tokens=by_chars, max_tokens=8)
    assert all(len(s.text) <= 8 and s.truncated for s in seg.segments)
    assert "".join(s.text for s in seg.segments) == "x" * 37


def test_control_characters_and_odd_unicode_never_raise() -> None:
    rng = random.Random(0)
    alphabet = "ab .!?\n\r\t\x00\x0b\x0c\x1c\x85\u2028\u200b\ufeff😀é…。"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        seg = segment(text, count_tokens=len, max_tokens=4)
        rebuilt = seg.join([s.text for s in seg.segments], word_separator="")
        assert rebuilt == (text if seg.segments else "")
        assert all(s.text.strip() for s in seg.segments)


def test_translations_of_segments_that_touched_are_joined_by_the_word_separator() -> None:
    seg = segment("abcdefgh ijkl", count_tokens=len, max_tokens=4)  # a word cut in two, then a space
    assert [s.text for s in seg.segments] == ["abcd", "efgh", "ijkl"]
    assert seg.join(["Axt.", "Eine", "Frau."]) == "Axt. Eine Frau."
    assert seg.join(["Axt.", " Eine", "Frau."]) == "Axt. Eine Frau.", "no second space"
    assert seg.join(["斧。", "一个", "女人。"], word_separator="") == "斧。一个 女人。"
    assert seg.join(["", "Eine", "Frau."]) == "Eine Frau.", "nothing before the first text"


@pytest.mark.parametrize(("code", "separator"), [("de", " "), ("en", " "), ("zh-Hant", ""), ("ja", ""), ("th", "")])
def test_languages_written_without_spaces_join_sentences_without_one(code: str, separator: str) -> None:
    assert word_separator(Language(code=code)) == separator


def test_split_sentences_keeps_every_character_and_each_sentence_is_a_text_of_one_sentence() -> None:
    """What the streaming route relies on: the sentences and separators rebuild the text, and a
    sentence segmented on its own is the one segment (or the chunks) it is inside the whole text."""
    rng = random.Random(1)
    pieces = ["A dog.", "Mr.", "J.", "it", "Go!", "Yes…", "z.B.", " ", "  ", "\n", "\r\n", "\t", "1.", "«Ja.»", "x" * 9]
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        sentences = split_sentences(text)
        parts = [s.text for s in sentences.segments]
        rebuilt = "".join(sep + part for sep, part in zip(sentences.separators, [*parts, ""], strict=True))
        assert rebuilt == text
        assert all(sep.isspace() for sep in sentences.separators[1:-1]), "sentences never touch"
        whole = segment(text, count_tokens=len, max_tokens=8).segments
        alone = [chunk for part in parts for chunk in segment(part, count_tokens=len, max_tokens=8).segments]
        assert alone == whole


def test_each_unit_split_on_its_own_is_that_unit_and_segments_as_inside_the_text() -> None:
    """What the streaming route relies on: a text's units (sentences, symbols at their edges apart)
    rebuild it, each split again alone is itself, and segmented alone gives the chunks it gives
    inside the text, with CJK stops, closing brackets, emoji and numbers touching their neighbours."""
    rng = random.Random(2)
    pieces = [
        "A dog runs.",
        "Two men walk",
        "。",
        "！",
        "」",
        "』",
        "😀",
        "👍🏽",
        "✅",
        "42",
        "(",
        ")",
        " ",
        "\n",
        "?",
        "«Ja.»",
    ]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        units = split_units(text)
        parts = [u.text for u in units.segments]
        assert "".join(sep + part for sep, part in zip(units.separators, [*parts, ""], strict=True)) == text
        for part in parts:
            alone = split_units(part)
            assert [u.text for u in alone.segments] == [part] and alone.separators == ["", ""], (text, part)
        whole = segment(text, count_tokens=len, max_tokens=8).segments
        alone_chunks = [c for part in parts for c in segment(part, count_tokens=len, max_tokens=8).segments]
        assert alone_chunks == whole


def test_closing_brackets_after_a_full_stop_at_the_end_stay_with_their_sentence() -> None:
    assert [s.text for s in split_sentences("狗跑。』").segments] == ["狗跑。』"]
    assert [s.text for s in split_sentences("狗跑。』猫睡。").segments] == ["狗跑。』", "猫睡。"]
