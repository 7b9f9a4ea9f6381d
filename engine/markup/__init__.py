"""Markup translated with its tags in place: HTML and XML parsed losslessly (``tree``), cut into
blocks of text with inline elements (``document``), and inline elements re-inserted around the
target words aligned to the words they covered (``projection``)."""

from engine.markup.document import Document, Translation, plain_text
from engine.markup.projection import WordAlignment
from engine.markup.tree import MarkupError, MarkupFormat

__all__ = ["Document", "MarkupError", "MarkupFormat", "Translation", "WordAlignment", "plain_text"]
