"""Reproduce every number in ``benchmarks/RESULTS.md``: ``python -m benchmarks.run_all``.

Runs the engine benchmark, the load test and the plot in turn with their defaults (the shipped
checkpoint and bundle, test_2016_flickr), writing ``benchmarks/results/{engine,load}.json``,
``benchmarks/results/tables.md`` and ``benchmarks/load.png``. Extra arguments after ``--engine``
or ``--load`` go to that script, e.g. ``--engine --rounds 1 --load --duration 10``.
Takes about 15-20 minutes on a 2-core CPU; run it on an otherwise idle machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import engine, load, plot
from benchmarks.common import machine

RESULTS = Path("benchmarks/results")


def split_args(argv: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {"--engine": [], "--load": []}
    current = None
    for arg in argv:
        if arg in groups:
            current = arg
        elif current is None:
            sys.exit(f"error: {arg!r}: put script arguments after --engine or --load")
        else:
            groups[current].append(arg)
    return groups


def tables_markdown(engine_report: dict, load_report: dict) -> str:
    m = machine()
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    offline = load_report["offline"]
    return (
        f"Machine: {m['cpu']}, {m['cores']} cores; {m['platform']}\n\nVersions: {versions}\n\n"
        f"## Engine (test_2016_flickr, {engine_report['settings']})\n\n{engine_report['table']}\n\n"
        f"## Service load test\n\nOffline engine: {offline['throughput']:.1f} sentences/s "
        f"({offline['sentences']} sentences in {offline['seconds']:.1f} s)\n\n{load_report['table']}\n"
    )


def main(argv: list[str] | None = None) -> None:
    groups = split_args(sys.argv[1:] if argv is None else argv)
    engine_json, load_json = RESULTS / "engine.json", RESULTS / "load.json"
    engine.main([*groups["--engine"], "--json", str(engine_json)])
    load.main([*groups["--load"], "--json", str(load_json)])
    plot.main(["--load-json", str(load_json), "--out", "benchmarks/load.png"])
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in (engine_json, load_json)]
    (RESULTS / "tables.md").write_text(tables_markdown(*reports), encoding="utf-8")
    print(f"wrote {RESULTS / 'tables.md'}")


if __name__ == "__main__":
    main()
