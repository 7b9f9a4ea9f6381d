"""A model repository: every bundle below a directory, and which of them serves a language pair.

``discover`` finds the bundles (any directory holding a ``manifest.json``) and reads only their
manifests, so that a repository of many models is listed at once and a broken bundle is reported
without stopping the others. ``Router`` answers a ``(source, target)`` request with a ``Route``: one
model that serves the pair directly, or, with pivoting, two chained through an intermediate language
(fr->en->de). A direct model always wins; among several, the one serving the fewest pairs (a
dedicated bilingual model before a many-to-many one), then the first by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.bundle import MANIFEST, BundleError, Languages, Manifest, read_manifest
from engine.languages import LanguageNames, UnsupportedLanguage, pairs

# Tried first as the pivot language: most open models translate into and out of English.
PREFERRED_PIVOTS = ("en",)


@dataclass(frozen=True)
class ModelEntry:
    """One bundle of the repository: its manifest, or why it could not be read."""

    id: str  # the manifest's name; the directory (relative to the repository) when unreadable
    path: Path
    manifest: Manifest | None = None
    error: str | None = None

    @property
    def languages(self) -> Languages | None:
        return self.manifest.languages if self.manifest else None

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return pairs(self.manifest.languages) if self.manifest else []


def discover(root: Path) -> list[ModelEntry]:
    """The bundles at or below ``root``, by id. Two bundles with one name: the second is an error
    entry (ids name models in requests, metrics and the cache, so they must be unique)."""
    entries: dict[str, ModelEntry] = {}
    for path in _bundle_dirs(root):
        try:
            manifest = read_manifest(path)
        except BundleError as e:
            entry = ModelEntry(id=_relative_id(root, path), path=path, error=str(e))
        else:
            entry = ModelEntry(id=manifest.name, path=path, manifest=manifest)
            if (other := entries.get(entry.id)) is not None:
                message = f"{path}: model name {entry.id!r} is already served from {other.path}"
                entry = ModelEntry(id=_relative_id(root, path), path=path, error=message)
        entries.setdefault(entry.id, entry)
    return sorted(entries.values(), key=lambda e: e.id)


def single(path: Path) -> list[ModelEntry]:
    """A repository of the one bundle at ``path`` (``MT_MODEL_DIR``)."""
    try:
        manifest = read_manifest(path)
    except BundleError as e:
        return [ModelEntry(id=path.name or str(path), path=path, error=str(e))]
    return [ModelEntry(id=manifest.name, path=path, manifest=manifest)]


def _bundle_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        raise BundleError(f"{root}: model repository directory does not exist")
    if (root / MANIFEST).is_file():
        return [root]
    return sorted(p.parent for p in root.rglob(MANIFEST) if not _inside_another(p.parent, root))


def _inside_another(path: Path, root: Path) -> bool:
    """A manifest inside a bundle's own folder (a copy, a test fixture) is not a second bundle."""
    return any((parent / MANIFEST).is_file() for parent in path.parents if parent != root and root in parent.parents)


def _relative_id(root: Path, path: Path) -> str:
    return str(path.relative_to(root)) if path != root else path.name


@dataclass(frozen=True)
class Hop:
    """One model translating from ``source`` into ``target`` (the model's language codes)."""

    model: str
    source: str
    target: str


@dataclass(frozen=True)
class Route:
    hops: tuple[Hop, ...]  # one, or two through a pivot language

    @property
    def source(self) -> str:
        return self.hops[0].source

    @property
    def target(self) -> str:
        return self.hops[-1].target

    @property
    def pivot(self) -> str | None:
        return self.hops[0].target if len(self.hops) > 1 else None


class Router:
    """Routes over the entries that have a manifest; ``pivot`` allows two-model routes."""

    def __init__(self, entries: Iterable[ModelEntry], *, pivot: bool = True) -> None:
        self.entries = [e for e in entries if e.manifest is not None]
        self.pivot = pivot
        # Most specific first: the order in which direct models are preferred.
        self.entries.sort(key=lambda e: (len(e.pairs), e.id))
        self._direct: dict[tuple[str, str], Hop] = {}
        for entry in self.entries:
            for source, target in entry.pairs:
                self._direct.setdefault((source, target), Hop(entry.id, source, target))
        # Read on every identified text (``sources``): computed once, as the repository is fixed.
        served = set(self._direct)
        if pivot:
            served.update((source, target) for (source, _), (_, target) in _joinable(self._direct) if source != target)
        self._pairs = sorted(served)
        self._sources = sorted({source for source, _ in self._pairs})
        # Every model's languages on each side, looked up at once (``code``): a code one model has
        # exactly wins over a subtag another model's code starts with ("zh" over "zh-Hant").
        self._languages = {
            side: LanguageNames([lang for entry in self.entries for lang in getattr(entry.languages, side)])
            for side in ("source", "target")
        }

    def sources(self) -> list[str]:
        return self._sources

    def pairs(self) -> list[tuple[str, str]]:
        """Every (source, target) served, directly or through a pivot, by language code."""
        return self._pairs

    def route(self, source: str, target: str) -> Route:
        """The route for ``source`` -> ``target``, named by code or by a model's own code;
        ``UnsupportedLanguage`` listing what is served when there is none."""
        src, tgt = self.code(source, "source"), self.code(target, "target")
        if src == tgt:
            raise UnsupportedLanguage(f"source and target language are both {src!r}")
        if (hop := self._direct.get((src, tgt))) is not None:
            return Route((hop,))
        if self.pivot:
            for middle in self._pivots(src, tgt):
                return Route((self._direct[src, middle], self._direct[middle, tgt]))
        raise UnsupportedLanguage(f"no model translates {src!r} into {tgt!r}; served pairs: {self.describe_pairs()}")

    def code(self, name: str, side: str) -> str:
        """The language code a request's ``name`` means on ``side`` ("source" or "target")."""
        if (lang := self._languages[side].find(name)) is not None:
            return lang.code
        served = sorted({s if side == "source" else t for s, t in self.pairs()})
        raise UnsupportedLanguage(f"unsupported {side} language {name!r}; served: {', '.join(served) or 'none'}")

    def describe_pairs(self, limit: int = 20) -> str:
        served = [f"{s}->{t}" for s, t in self.pairs()]
        shown = ", ".join(served[:limit])
        return shown + (f" and {len(served) - limit} more (see /languages)" if len(served) > limit else "")

    def _pivots(self, source: str, target: str) -> Sequence[str]:
        middles = {m for (s, m) in self._direct if s == source and (m, target) in self._direct}
        return sorted(middles, key=lambda m: (m not in PREFERRED_PIVOTS, m))


def _joinable(direct: dict[tuple[str, str], Hop]) -> Iterable[tuple[tuple[str, str], tuple[str, str]]]:
    """Every two direct pairs where the first's target is the second's source."""
    by_source: dict[str, list[tuple[str, str]]] = {}
    for pair in direct:
        by_source.setdefault(pair[0], []).append(pair)
    for first in direct:
        for second in by_source.get(first[1], []):
            yield first, second
