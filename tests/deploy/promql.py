"""What a PromQL expression reads: metric names, their label matchers, and grouping labels.

Enough PromQL for the dashboard and the alert rules (selectors, functions, aggregations with
by/without, vector matching with on/ignoring, ranges, Grafana's $variables); promtool checks the
full syntax separately.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Grafana substitutes these before Prometheus sees the query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS |= {"inf", "nan", "atan2"}

_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_SELECTOR = re.compile(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?(\s*\()?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_LITERAL_ALTERNATION = re.compile(r"[\w/.:-]+(?:\|[\w/.:-]+)*")
_REGEX_SPECIALS = set("^$*+?()[]{}\\")


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def literal_values(self) -> list[str] | None:
        """The label values named outright (``a`` or ``a|b`` for regex ops), or None for a real regex
        or a Grafana variable."""
        if "$" in self.value:
            return None
        if self.op in ("=", "!="):
            return [self.value]
        has_special = any(ch in _REGEX_SPECIALS for ch in self.value) or re.search(r"\.(?![\w/])", self.value)
        if has_special or not _LITERAL_ALTERNATION.fullmatch(self.value):
            return None
        return self.value.split("|")


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple[Matcher, ...]


@dataclass(frozen=True)
class Reads:
    selectors: tuple[Selector, ...]
    grouping_labels: frozenset[str]


def substitute_grafana_variables(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def reads(expr: str) -> Reads:
    """The metric selectors and the grouping labels of ``expr``."""
    expr = substitute_grafana_variables(expr)
    grouping = {label.strip() for group in _GROUPING.findall(expr) for label in group.split(",") if label.strip()}
    expr = _RANGE.sub("", _GROUPING.sub(" ", expr))
    selectors = []
    for match in _SELECTOR.finditer(expr):
        name, matchers, call = match.groups()
        if call or name.lower() in KEYWORDS:
            continue  # a function or aggregation, or an operator keyword
        found = tuple(Matcher(*m) for m in _MATCHER.findall(matchers or ""))
        selectors.append(Selector(name, found))
    return Reads(tuple(selectors), frozenset(grouping))
