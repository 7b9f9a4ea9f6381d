"""What a text whose source language was not stated becomes: translated from which language, kept
unchanged as already in the target, or refused; and what the /detect routes answer of it.

    found = identifier.detect("Abbrechen")  # engine.language_id.LanguageIdentifier
    choose(found, sources=["de"], target="en")  # Choice(outcome="translate", detection=... "de" ...)

The rules act on the identifier's probabilities (``engine.language_id.Detection``): fastText's among
the identifier's languages, and for a short text (or a longer one fastText is unsure of between
served languages) lingua's shares of the served ones (``engine.short_text_id``). Every threshold
below was chosen on Multi30K and this project's short everyday texts (benchmarks/RESULTS.md, sections
6.1 and 6.2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from engine.language_id import Candidate, Detection

# What a text identified without a stated source becomes (``choose``), decided on Multi30K val for a
# service of en->de and de->en, with fr and cs unserved (``python -m benchmarks.detection --policy``,
# benchmarks/RESULTS.md section 6). Both are odds between two of the model's probabilities: a text the
# model is unsure of, spread over many languages at low probability each, is judged by which language
# the model prefers and by how much, not by a probability that short and unusual texts never reach.
# Measured when they decided every text; texts of one to three words are now decided by the short-text
# rules further down (section 6.2), these from four words up and where no short ranking is made.
#
# A language no model serves is believed when the model gives it at least these odds over the likeliest
# language the service can take (a source translated into the target, or the target itself). 5 is the
# smallest whole number at which English and German texts of one to three words are refused clearly less
# often than by the rule before (0.61% against 0.78%; at 4, 0.77%); from four words up, 0-0.1% are (up to
# 0.5% before), none of the full sentences, nor "A path leads to a pagoda." (Italian 0.23 against
# English 0.14) or "A man paddles an inflatable canoe." (Spanish 0.07 against English 0.03). The cost:
# 0.3% of full French sentences and 1.0% of Czech ones are translated as English or German instead of
# refused (0-0.1% before), while far fewer short ones are (one to three words: 5-33% against 10-55%).
REFUSE_ODDS = 5.0
# A text whose likeliest takeable language is the target is returned unchanged only when the model gives
# the target at least these odds over the likeliest other source; else it is translated from that one.
# At 1.5 rather than 1 (the likeliest taken as it is), English texts of one to three words left unchanged
# as German fall from 2.6% to 0.8% of them and German ones translated as English rise from 10.3% to
# 11.4%; into English, German texts left unchanged fall from 10.3% to 9.9% and English ones translated
# rise from 2.6% to 3.4%. From 1.56 up, every English word the model does not know (English 0.125,
# German 0.08) would be translated from German into English.
KEEP_ODDS = 1.5
# A language outside the identifier's set (Turkish, Chinese, Arabic to the default set) is believed, as
# the set's languages are at REFUSE_ODDS, only when the model also gives it at least this probability:
# restricted to the set, such a text was credited to a set language at a probability near 0 and
# translated from it (Turkish from English, into invented words). Without the floor, the model's
# confident mistakes on short texts in a language of the set would be refused too: on Multi30K val and
# test_2016_flickr, English and German windows of one to three words and full sentences, 0.1-0.4% more
# at 5:1 odds alone, 0-0.1% more at 0.9 (none English; "Ein Mann boxt" is Turkish at 0.96).
OUTSIDE_FLOOR = 0.9
# ... or when the set's languages together get less than this: the model is sure the text is in none of
# them, though it splits the rest between outside languages that share a script (Arabic 0.58 and Persian
# 0.26 for "مرحبا بالعالم", Hindi and Marathi, Georgian 0.60): without it, such a text was credited to the
# set's likeliest at 0.0002-0.005 and translated from English, or refused as Portuguese or Latvian. On
# Multi30K val and test_2016_flickr (16,112 English and German sentences and windows of one to three
# words), none gets under 0.01 with an outside language first; one English one under 0.03.
SET_FLOOR = 0.01
# A short text (``engine.short_text_id``) is returned unchanged as already in the target only when the
# short-text model gives the target at least this share among the languages the service can take: on
# Multi30K val's English and German windows of one to three words, 1 of 6,080 got 0.9 for the wrong
# one of the two (fastText: 101); none of this project's short everyday texts did. It is the share,
# too, from which a short text's source is identified rather than guessed.
SHORT_SURE = 0.9
# ... or at least the first share when fastText's likeliest language is the target, at the second's
# odds over that source: the two agreeing keep 69% of the short everyday English and German texts sent
# into their own language rather than 55%, and 74% of Multi30K's windows of one to three words rather
# than 49%; none of the 300 kept wrongly, 11 of the 6,080 windows (2 at 0.9 alone).
SHORT_KEEP_AGREED = (0.7, 3.0)
# A short text is refused only when fastText gives a language of the identifier's set that no model
# takes at least this probability ("Lyžaři před chatou." is Czech at 0.97), or gives the set's languages
# under ``SET_FLOOR`` together ("Köpek parkta koşuyor": Turkish 0.987, the set 0.009), or no served
# language is written in its script: none of this project's short everyday English and German texts
# gets over 0.67 for another language ("Hi!": Italian), but 0.2% of Multi30K's windows of one to three
# words do ("of hay": Spanish 0.97), and German "Ein Mann boxt" is Turkish at 0.96 (the set 0.02).
SHORT_REFUSE_FLOOR = 0.9


Outcome = Literal["translate", "keep", "refuse"]


@dataclass(frozen=True)
class Choice:
    """What to do with a text whose source language was not stated (``choose``)."""

    outcome: Outcome  # translate it from ``detection.language``, keep it (in the target already), refuse it
    # The identification, its language and confidence those of the language acted on: the source
    # translated from, the target kept, the unserved language refused (None: undetermined).
    detection: Detection


def choose(
    detection: Detection,
    sources: Collection[str],
    target: str | None = None,
    *,
    refuse_odds: float = REFUSE_ODDS,
    keep_odds: float = KEEP_ODDS,
    prior: str | None = None,
) -> Choice:
    """What a text identified as ``detection`` becomes, for a service that translates it into
    ``target`` from ``sources`` (codes as the identifier's); ``prior``: the language the request's
    other texts were identified in (``request_prior``), taken for a text that is only guessed.

    - A short text (``Detection.short``) in a script one of these languages is written in is refused
      only when fastText gives a language of its set that is none of them ``SHORT_REFUSE_FLOOR``, or
      its set's languages under ``SET_FLOOR`` together (then as the language outside it);
      kept unchanged only when the short-text model gives the target ``SHORT_SURE`` of their shares
      (or ``SHORT_KEEP_AGREED``: less, with fastText agreeing);
      else translated from the source the short-text model ranks first (``prior`` instead
      when that one is under ``SHORT_SURE``), guessed when under ``SHORT_SURE`` or fastText knows
      nothing of the text.
    - Any other text is refused when the likeliest language is neither a source nor the target and
      the model gives it at least ``refuse_odds`` over the likeliest that is (or none of those is a
      candidate at all); a language outside the identifier's set (``detection.outside``) also needs
      ``OUTSIDE_FLOOR``, or the set's languages under ``SET_FLOOR`` together;
    - else the likeliest source or target: kept unchanged when it is the target and the model gives it
      at least ``keep_odds`` over the likeliest other source (or there is none), else translated from
      that source (guessed, when it is not the model's likeliest language);
    - a text fastText knows nothing of (``language`` None, no ``outside``) is a guess: translated from
      ``prior``, else the first source; refused only when nothing is served into the target.
    """
    if (shares := _short_shares(detection, sources, target)) is not None:
        return _choose_short(detection, shares, sources, target, prior)
    takeable = [c for c in detection.candidates if c.language in sources or c.language == target]
    best = takeable[0] if takeable else None
    if (outside := _believed_outside(detection, best, refuse_odds)) is not None:
        return Choice("refuse", _as(detection, outside))
    if detection.language is None:
        return _guess(detection, sources, prior)
    top = detection.candidates[0]
    if best is None:
        return Choice("refuse", _as(detection, top))
    if best.language != top.language and top.confidence >= refuse_odds * best.confidence:
        return Choice("refuse", _as(detection, top))
    if best.language == target:
        other = next((c for c in takeable if c.language != target), None)
        if other is None or (best.confidence >= keep_odds * other.confidence and _confirmed(detection, best, other)):
            return Choice("keep", _as(detection, best))
        best = other
    return Choice("translate", replace(_as(detection, best), guessed=best.language != top.language))


def _confirmed(detection: Detection, target: Candidate, source: Candidate) -> bool:
    """Whether the short-text model, where it checked a longer text, ranks ``target`` over ``source``."""
    if detection.checked is None:
        return True
    shares = {c.language: c.confidence for c in detection.checked}
    return shares.get(target.language, 0.0) >= shares.get(source.language, 0.0)


def _short_shares(detection: Detection, sources: Collection[str], target: str | None) -> dict[str, float] | None:
    """The short-text model's shares of the languages the service can take, best first, summing to
    1; None for a longer text, one that none of them is written like, or a service with a language
    the short-text model does not rank (those are judged as longer texts)."""
    if detection.short is None:
        return None
    shares = {c.language: c.confidence for c in detection.short}
    takeable = {*sources, *([target] if target else [])}
    if not takeable or not takeable <= shares.keys():
        return None
    total = sum(shares[language] for language in takeable)
    if total == 0:
        return None
    return {language: shares[language] / total for language in sorted(takeable, key=lambda c: -shares[c])}


def _choose_short(
    detection: Detection, shares: dict[str, float], sources: Collection[str], target: str | None, prior: str | None
) -> Choice:
    top = detection.candidates[0] if detection.candidates else None
    if top is not None and top.language not in shares and top.confidence >= SHORT_REFUSE_FLOOR:
        return Choice("refuse", _as(detection, top))
    outside = detection.outside
    if outside is not None and sum(c.confidence for c in detection.candidates) < SET_FLOOR:
        return Choice("refuse", _as(detection, outside))
    source = next((language for language in shares if language in sources), None)
    if target is not None and (source is None or _in_target(detection, shares, target, source)):
        return Choice("keep", _as(detection, Candidate(target, shares[target])))
    assert source is not None  # a target, or a source: shares are never empty
    if prior in sources and prior != source and shares[source] < SHORT_SURE:
        source = prior
    guessed = shares[source] < SHORT_SURE or detection.language is None
    return Choice("translate", replace(_as(detection, Candidate(source, shares[source])), guessed=guessed))


def _in_target(detection: Detection, shares: dict[str, float], target: str, source: str) -> bool:
    """Whether a short text is sure enough to be in ``target`` already, rather than in ``source``."""
    share, odds = SHORT_KEEP_AGREED
    if shares[target] >= SHORT_SURE or shares[target] < share:
        return shares[target] >= SHORT_SURE
    if detection.language != target:  # fastText's likeliest language, not merely above the source
        return False
    by_fasttext = {c.language: c.confidence for c in detection.candidates}
    return by_fasttext[target] >= odds * by_fasttext.get(source, 0.0)


def _guess(detection: Detection, sources: Collection[str], prior: str | None) -> Choice:
    """A text fastText knows nothing of, without a short-text ranking: from ``prior`` or the first
    source, at confidence 0; refused (undetermined) when nothing is served into the target."""
    source = prior if prior in sources else min(sources, default=None)
    if source is None:
        return Choice("refuse", detection)
    return Choice("translate", replace(detection, language=source, confidence=0.0, guessed=True))


def request_prior(choices: Sequence[Choice | None]) -> str | None:
    """The language a request's texts are most often translated from on an identification (not a
    guess): where one text of a request is a guess, the others say which language it likely is."""
    counts = Counter(
        c.detection.language for c in choices if c is not None and c.outcome == "translate" and not c.detection.guessed
    )
    return counts.most_common(1)[0][0] if counts else None


def as_answer(detection: Detection) -> Detection:
    """``detection`` of a short text as an answer to "which language is this?" (the /detect routes):
    the served language the short-text model ranks first, with its share, as ``choose`` would
    translate it from ("Abbrechen": German 0.99, where fastText says English 0.37); unchanged where
    fastText knew nothing of the text (undetermined), is sure of an unserved language of its set
    (``SHORT_REFUSE_FLOOR``) or gives its set under ``SET_FLOOR`` together, or no served language is
    written in the text's script."""
    short = detection.short
    if not short or detection.language is None or sum(c.confidence for c in short) == 0:
        return detection
    top = detection.candidates[0]
    served = {c.language for c in short}
    if top.language not in served and top.confidence >= SHORT_REFUSE_FLOOR:
        return detection
    if detection.outside is not None and sum(c.confidence for c in detection.candidates) < SET_FLOOR:
        return detection
    return replace(detection, language=short[0].language, confidence=short[0].confidence, candidates=short)


def reported(detection: Detection) -> Detection:
    """``detection`` as an answer to "which language is this?": the language outside the identifier's
    set when ``choose`` would refuse a text as it (Chinese, not the set's likeliest at probability 0),
    first among the candidates; else ``detection`` as it is."""
    best = detection.candidates[0] if detection.candidates else None
    outside = _believed_outside(detection, best, REFUSE_ODDS)
    if outside is None:
        return detection
    return replace(_as(detection, outside), candidates=(outside, *detection.candidates))


def _believed_outside(detection: Detection, best: Candidate | None, refuse_odds: float) -> Candidate | None:
    """The language outside the identifier's set that ``detection`` names, when it is believed over
    ``best`` (the likeliest takeable language, None: none is a candidate)."""
    outside = detection.outside
    if outside is None:
        return None
    if outside.confidence < OUTSIDE_FLOOR and sum(c.confidence for c in detection.candidates) >= SET_FLOOR:
        return None
    return outside if best is None or outside.confidence >= refuse_odds * best.confidence else None


def _as(detection: Detection, candidate: Candidate) -> Detection:
    return replace(detection, language=candidate.language, confidence=candidate.confidence)
