"""``--help`` conventions shared by the project's programs (train, evaluate, export, service).

Here because every package depends on ``engine`` and it imports neither torch nor HTTP code.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Iterable

_INDENT = "  "
_DESCRIPTION_INDENT = "      "
_WIDTH = 100


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, or says it is required; description and epilog
    keep their own line breaks (examples, the generated setting lists).

    An option whose default is None says in its own words what leaving it out does: "(default:
    None)" would tell the reader nothing.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        if action.required:
            return f"{help_text} (required)"
        if action.default is None or "default" in help_text:
            return help_text
        return super()._get_help_string(action)


def definition_list(title: str, entries: Iterable[tuple[str, str]]) -> str:
    """``title:`` then each term on its own line, its description (if any) wrapped below it."""
    lines = [f"{title}:"]
    for term, description in entries:
        lines.append(_INDENT + term)
        lines += textwrap.wrap(
            description,
            _WIDTH,
            initial_indent=_DESCRIPTION_INDENT,
            subsequent_indent=_DESCRIPTION_INDENT,
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(lines)


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` for integers of at least ``minimum``: a value out of range is a usage
    error (exit 2, naming the option) before any work, not a crash deep inside it."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below the minimum, {minimum}")
        return value

    parse.__name__ = "int"  # argparse names the type in its messages
    return parse
