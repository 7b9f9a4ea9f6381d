"""Every benchmark once, and the tables ``benchmarks/RESULTS.md`` quotes: ``python -m benchmarks.run_all``.

Runs each question's entry point with its defaults, each writing its result file:

1. ``python -m benchmarks.engine``: ``benchmarks/results/engine.json``
2. ``python -m benchmarks.service``: ``benchmarks/results/service.json`` (and ``service.png``, drawn here)
3. ``python -m benchmarks.composition``: ``benchmarks/results/composition.json``
4. ``python -m benchmarks.profile``: ``benchmarks/results/profile.json``
5. ``python -m benchmarks.marian``: ``benchmarks/results/marian.json``

then ``benchmarks/results/tables.md``: per question, where and how it was measured and its tables.
About 45 minutes on 2 cores; run it on an otherwise idle machine. Arguments after ``--engine``,
``--service``, ``--composition``, ``--profile`` or ``--marian`` go to that entry point (``--service --rounds 1``);
``--results DIR`` writes all the files to DIR instead; ``--only NAME ...`` reruns those questions and
rebuilds the tables from every result file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from benchmarks import composition, engine, marian, profile, service
from benchmarks.common import RESULTS, measured_line
from benchmarks.plot import plot_service

# name -> (entry point, section title in tables.md and RESULTS.md)
QUESTIONS: dict[str, tuple[Callable[[list[str]], None], str]] = {
    "engine": (engine.main, "1. Engine: ours against CTranslate2 and PyTorch"),
    "service": (service.main, "2. Service under load against the offline engine"),
    "composition": (composition.main, "3. Batch composition: sorted against arrival-order batches"),
    "profile": (profile.main, "4. Where the engine's time goes"),
    "marian": (marian.main, "5. An OPUS-MT-sized MarianMT: ours against CTranslate2 and transformers"),
}


def split_args(argv: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """run_all's own arguments, and each entry point's (those after ``--NAME``)."""
    own: list[str] = []
    groups: dict[str, list[str]] = {name: [] for name in QUESTIONS}
    current = own
    for arg in argv:
        if arg.startswith("--") and arg[2:] in groups:
            current = groups[arg[2:]]
        else:
            current.append(arg)
    return own, groups


def tables_markdown(reports: dict[str, dict]) -> str:
    sections = [
        f"## {QUESTIONS[name][1]}\n\n{measured_line(report['run'])}\n\n{report['markdown']}\n"
        for name, report in reports.items()
    ]
    head = "# Benchmark tables\n\nWritten by `python -m benchmarks.run_all` from the result files next to this one.\n"
    return "\n".join([head, *sections])


def main(argv: list[str] | None = None) -> None:
    own, groups = split_args(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, help=f"where the files go (default {RESULTS})")
    parser.add_argument("--only", nargs="+", choices=list(QUESTIONS), help="run only these (default: all)")
    args = parser.parse_args(own)
    results = args.results or RESULTS
    reports = {}
    for name, (entry_point, _) in QUESTIONS.items():
        out = results / f"{name}.json"
        if args.only is None or name in args.only:
            # --out only where it is not the default: the command recorded in the file stays the plain one
            entry_point([*groups[name], *(["--out", str(out)] if args.results else [])])
        reports[name] = json.loads(out.read_text(encoding="utf-8"))
    print(f"wrote {plot_service(reports['service'], results / 'service.png')}")
    tables = results / "tables.md"
    tables.write_text(tables_markdown(reports), encoding="utf-8")
    print(f"wrote {tables}")


if __name__ == "__main__":
    main()
