"""The README's examples, run as written with curl against the shipped models: every command shown
with its answer gives that answer's translations (the first screen's request, the glossary that
changes the output, LibreTranslate's endpoints, HTML)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from live_server import ServiceProcess
from repo_root import REPO

MODELS = REPO / "models"
BLOCK = re.compile(r"```bash\n(.*?)```", re.S)
# The translations an answer shows: "text" and "translatedText" values, a string or a list of them.
TRANSLATED = re.compile(r'"(?:text|translatedText)":\s*("(?:[^"\\]|\\.)*"|\[[^\]]*\])')
GLOSSARY_ID = re.compile(r'"glossary_id":\s*"([^"]+)"')

pytestmark = [
    pytest.mark.skipif(not (MODELS / "en-de" / "bundle" / "manifest.json").is_file(), reason="no shipped models"),
    pytest.mark.skipif(shutil.which("curl") is None, reason="the README's examples run curl, which is not installed"),
]


@dataclass
class Example:
    command: str
    answer: str  # the comment lines after it, without their "# "

    @property
    def translations(self) -> list[str | list[str]]:
        if self.answer.startswith('"'):  # a translated text alone
            return [json.loads(self.answer)]
        found = [json.loads(value) for value in TRANSLATED.findall(self.answer)]
        return [value for value in found if "…" not in value]


def examples(readme: str) -> Iterator[Example]:
    """Each curl command of a bash block that is followed by its answer (a JSON comment), in
    order; those that upload or download files are left out (their names are placeholders)."""
    for block in BLOCK.findall(readme):
        lines = iter(block.splitlines())
        command: list[str] = []
        comments: list[str] = []
        for line in [*lines, ""]:
            if command and (line.startswith("# ") or (not comments and _open(command))):
                (comments if not _open(command) else command).append(line)
                continue
            if command and not (" -F " in command[0] or " -o " in command[0]):
                answer = " ".join(c[2:].strip() for c in comments if not c.startswith("# ("))
                if answer.startswith(("{", '"')):
                    yield Example("\n".join(command), answer)
            command, comments = ([line], []) if line.startswith("curl ") else ([], [])


def _open(command: list[str]) -> bool:
    """Whether the command goes on on the next line: after a backslash, or inside a quoted string."""
    text = "\n".join(command)
    return text.endswith("\\") or text.count("'") % 2 == 1


def collected(answer: Any) -> list[Any]:
    """Every "text" and "translatedText" value in an answer, depth first."""
    if isinstance(answer, list):
        return [value for item in answer for value in collected(item)]
    if not isinstance(answer, dict):
        return []
    own = [v for k, v in answer.items() if k in ("text", "translatedText")]
    return own + [value for k, v in answer.items() if k not in ("text", "translatedText") for value in collected(v)]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """``python -m service`` as the README starts it: every model under models/."""
    log = tmp_path_factory.mktemp("readme") / "service.log"
    server = ServiceProcess(
        MODELS / "en-de" / "bundle", log, model_dir="", models_dir=str(MODELS), data_dir=str(log.parent)
    )
    yield server
    assert server.stop() == 0


def test_the_readme_shows_its_first_request_and_the_glossary_and_libretranslate_examples() -> None:
    readme = (REPO / "README.md").read_text()
    first_screen = readme[: readme.index("\n## ")]
    assert any("/v1/translate" in e.command for e in examples(first_screen)), "no first request on the first screen"
    commands = [example.command for example in examples(readme)]
    assert any("/v1/glossaries" in c for c in commands) and any('"glossary"' in c for c in commands)
    assert any("localhost:8000/translate " in c for c in commands)


def test_every_readme_example_gives_the_translations_it_shows(shipped: ServiceProcess) -> None:
    ids: dict[str, str] = {}  # a placeholder glossary id ("3f0c…") -> the one the service made
    for example in examples((REPO / "README.md").read_text()):
        command = example.command.replace("localhost:8000", shipped.url.removeprefix("http://"))
        for placeholder, made in ids.items():
            command = command.replace(placeholder, made)
        run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=True)
        answer = json.loads(run.stdout)
        for translation in example.translations:
            assert translation in collected(answer), f"{example.command}\nshows {translation!r}, answered {run.stdout}"
        if placeholder := GLOSSARY_ID.search(example.answer):
            ids[placeholder.group(1)] = answer["glossary_id"]


def test_the_glossary_example_changes_the_translation(shipped: ServiceProcess) -> None:
    readme = (REPO / "README.md").read_text()
    example = next(e for e in examples(readme) if '"glossary"' in e.command)
    body = json.loads(re.search(r"-d '(.*)'", example.command).group(1))  # type: ignore[union-attr]
    del body["glossary"]
    plain = httpx.post(f"{shipped.url}/v1/translate", json=body, timeout=60).json()["translations"][0]["text"]
    assert plain not in example.translations and f'"{plain}"' in readme  # the README says what it was without
