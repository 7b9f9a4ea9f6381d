"""What translating a text costs, in source tokens times beams: the one rule that the service admits
requests by (``service.planning``, against ``MT_MAX_BEAM_TOKENS``) and the engine spends by
(``engine.translator``, when it puts glossary terms in).

A search's work grows with its source's pieces (the decoder's length follows the source's) times
the rows it decodes, its beam; a route through a pivot searches once per model. A text that says
glossary terms may be searched ``GLOSSARY_SEARCHES`` times more under constraints, at a beam of at
least ``GLOSSARY_MIN_BEAM``: what it is admitted for is what the engine may spend on it.
"""

from __future__ import annotations

from collections.abc import Sequence

# The beam of a sentence with glossary terms at least: dynamic beam allocation shares the beam
# between hypotheses at each stage of meeting its constraints, and one beam has no stages to share.
GLOSSARY_MIN_BEAM = 4
# Searches with constraints that a sentence with glossary terms is admitted for, at that beam: two
# guides, of engine.constraints.GUIDES' four, suffice for most sentences, and one that needs more
# runs on what the call's other sentences left.
GLOSSARY_SEARCHES = 2


def glossary_beam(beam: int) -> int:
    """The beam a sentence with glossary terms is searched at under constraints."""
    return max(beam, GLOSSARY_MIN_BEAM)


def glossary_work(tokens: int, beam: int) -> int:
    """The most that putting the glossary terms of a sentence of ``tokens`` source pieces in may
    take beyond its own search at ``beam``."""
    return tokens * glossary_beam(beam) * GLOSSARY_SEARCHES


def text_work(tokens: int, beams: Sequence[int], *, says_terms: bool) -> int:
    """A text of ``tokens`` source pieces searched once at each of ``beams`` (one per model of its
    route), and, if it says glossary terms, their searches at the last model's beam."""
    return tokens * sum(beams) + (glossary_work(tokens, beams[-1]) if says_terms else 0)
