"""Checks on a program's ``--help``: run as the user runs it, it documents every option and its default.

Test modules import it by name (``from cli_help import ...``), as they do ``repo_root``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

from repo_root import REPO, python_env


def run_help(module: str) -> str:
    """``python -m MODULE --help`` from the repository root: its output, after checking it exits 0."""
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=REPO,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def compact(text: str) -> str:
    """Without whitespace: argparse wraps lines where the terminal width says."""
    return "".join(text.split())


def option_help(help_text: str, action: argparse.Action) -> str:
    """The lines of ``help_text`` that describe ``action``: its invocation line and those indented under it."""
    name = action.option_strings[0] if action.option_strings else action.metavar or action.dest
    start = re.compile(rf"  (?:-\w+, )?{re.escape(name)}(?=[\s,]|$)")
    lines = help_text.splitlines()
    first = next((i for i, line in enumerate(lines) if start.match(line)), None)
    assert first is not None, f"{name} is missing from --help"
    block = [lines[first]]
    for line in lines[first + 1 :]:
        if not line.startswith("   ") or not line.strip():
            break
        block.append(line)
    return "\n".join(block)


def assert_documents_every_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """Every option of ``parser`` is in ``help_text``, required or with its default; a default
    argparse would print as None must be explained in the option's own help."""
    assert help_text.startswith(f"usage: {parser.prog} "), help_text.splitlines()[0]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        block = option_help(help_text, action)
        assert "required" in block or "default" in block, block
        if action.default is not None and "default" not in (action.help or ""):
            assert compact(f"(default: {action.default})") in compact(block), block
