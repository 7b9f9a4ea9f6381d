"""The engine as a library: the README's example runs as written, and the package stands alone."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

from repo_root import REPO


def readme_example() -> str:
    section = (REPO / "README.md").read_text().split("### The engine as a library", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "the README's library section has no Python example"
    return match.group(1)


def test_the_readme_example_translates_with_the_shipped_bundle() -> None:
    run = subprocess.run([sys.executable, "-c", readme_example()], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    text, hypotheses = run.stdout.strip().split(" [", 1)  # the translation, then its 2 hypotheses
    best, second = ast.literal_eval("[" + hypotheses)
    assert text and best == text and second, run.stdout


def test_the_engine_imports_neither_torch_nor_the_http_service() -> None:
    code = (
        "import sys, engine, engine.translator, engine.runner, engine.language_id\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'service', 'fastapi', 'model', 'export'}))"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
