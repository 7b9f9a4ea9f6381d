"""A small reader of the repository's Dockerfile and .dockerignore, for the deployment tests.

It understands what our Dockerfile uses: global ARGs with defaults substituted into FROM, stages
named with AS, line continuations, comment lines, exec-form JSON for CMD. It is no full BuildKit
frontend; hadolint checks the file's syntax and practice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from fnmatch import translate
from pathlib import Path

from repo_root import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ...
    args: str

    def exec_form(self) -> list[str]:
        """The JSON array of CMD/ENTRYPOINT, or of HEALTHCHECK's CMD (exec form), or a clear failure."""
        text = self.args.split("CMD", 1)[1] if self.keyword == "HEALTHCHECK" else self.args
        value = json.loads(text)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"not exec form: {self}"
        return value


@dataclass
class Stage:
    name: str
    base: str  # image or stage name, build arguments substituted
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def instructions(text: str) -> list[Instruction]:
    """Logical instructions: comment lines dropped (also inside continuations), continuations joined."""
    result, pending = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical = " ".join((pending + line).split())
        pending = ""
        keyword, _, args = logical.partition(" ")
        result.append(Instruction(keyword.upper(), args))
    return result


def stages(build_args: dict[str, str] | None = None, *, path: Path = DOCKERFILE) -> dict[str, Stage]:
    """Stages by name (in file order), with global ARG defaults and ``build_args`` substituted in FROM."""
    parsed = instructions(path.read_text(encoding="utf-8"))
    values: dict[str, str] = {}
    result: dict[str, Stage] = {}
    current: Stage | None = None
    for instruction in parsed:
        if instruction.keyword == "ARG" and current is None:
            name, _, default = instruction.args.partition("=")
            values[name] = (build_args or {}).get(name, default.strip('"'))
        elif instruction.keyword == "FROM":
            words = instruction.args.split()
            base = _VARIABLE.sub(lambda m: values[m.group(1) or m.group(2)], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else f"stage-{len(result)}"
            current = result[name] = Stage(name, base)
        elif current is not None:
            current.instructions.append(instruction)
    return result


def chain(all_stages: dict[str, Stage], target: str) -> list[Stage]:
    """The stage ``target`` and the stages it is built FROM, target first."""
    result = [all_stages[target]]
    while result[-1].base in all_stages:
        result.append(all_stages[result[-1].base])
    return result


def global_arg(name: str, *, path: Path = DOCKERFILE) -> str:
    for instruction in instructions(path.read_text(encoding="utf-8")):
        if instruction.keyword == "FROM":
            break
        arg, _, default = instruction.args.partition("=")
        if instruction.keyword == "ARG" and arg == name:
            return default.strip('"')
    raise KeyError(f"no global ARG {name} in {path}")


def copy_sources(instruction: Instruction) -> list[str]:
    """Build-context sources of a COPY (none for COPY --from=stage)."""
    words = instruction.args.split()
    if any(w.startswith("--from=") for w in words):
        return []
    paths = [w for w in words if not w.startswith("--")]
    return paths[:-1]


def _glob(element: str) -> str:
    """One path element of a pattern as a regex: ``*`` does not cross ``/``."""
    return translate(element).removeprefix("(?s:").removesuffix(")\\Z").replace(".*", "[^/]*")


def _pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex; ``**`` matches any number of path elements."""
    elements = pattern.strip("/").split("/")
    pieces = []
    for i, element in enumerate(elements):
        last = i == len(elements) - 1
        if element == "**":
            pieces.append(".*" if last else "(?:.*/)?")
        else:
            pieces.append(_glob(element) + ("" if last else "/"))
    return re.compile("".join(pieces) + "\\Z", re.S)


def dockerignored(relative_path: str, *, path: Path = DOCKERIGNORE) -> bool:
    """Whether Docker leaves ``relative_path`` out of the build context: the last pattern matching
    the path or one of its parent directories decides, ``!`` patterns re-include."""
    patterns = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    candidates = _self_and_parents(relative_path)
    excluded = False
    for pattern in patterns:
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        regex = _pattern(pattern.removeprefix("!"))
        if any(regex.match(candidate) for candidate in candidates):
            excluded = not negated
    return excluded


def _self_and_parents(relative_path: str) -> list[str]:
    parts = Path(relative_path).parts
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]
