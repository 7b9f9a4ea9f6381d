"""Reproduce every number in ``benchmarks/RESULTS.md``: ``python -m benchmarks.run_all``.

Runs the engine benchmark, the load test twice (the service's defaults, then the tuned setting
``TUNED``: one onnxruntime thread and a 50 ms batching window) and the plot, with the shipped
checkpoint and bundle on test_2016_flickr, writing ``benchmarks/results/*.json``,
``benchmarks/results/tables.md`` and ``benchmarks/load.png``. Extra arguments after ``--engine``
or ``--load`` go to that script, e.g. ``--engine --rounds 1 --load --duration 10``.
Takes about 20 minutes on a 2-core CPU; run it on an otherwise idle machine.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import engine, load, plot
from benchmarks.common import machine

RESULTS = Path("benchmarks/results")
# Leaves one of the 2 cores to the event loop and batches fill up (see RESULTS.md, "Service").
TUNED = ["--threads", "1", "--max-wait-ms", "50"]


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


def load_section(title: str, report: dict) -> str:
    offline = report["offline"]
    return (
        f"## {title}\n\nOffline engine: {offline['throughput']:.1f} sentences/s "
        f"({offline['sentences']} sentences in {offline['seconds']:.1f} s)\n\n{report['table']}\n"
    )


def tables_markdown(engine_report: dict, load_report: dict, tuned_report: dict) -> str:
    m = machine()
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    return (
        f"Machine: {m['cpu']}, {m['cores']} cores; {m['platform']}\n\nVersions: {versions}\n\n"
        f"## Engine (test_2016_flickr, {engine_report['settings']})\n\n{engine_report['table']}\n\n"
        + load_section("Service load test, defaults", load_report)
        + "\n"
        + load_section(f"Service load test, tuned ({' '.join(TUNED)})", tuned_report)
    )


def main(argv: list[str] | None = None) -> None:
    groups = split_args(sys.argv[1:] if argv is None else argv)
    paths = [RESULTS / name for name in ("engine.json", "load.json", "load_tuned.json")]
    engine.main([*groups["--engine"], "--json", str(paths[0])])
    load.main([*groups["--load"], "--json", str(paths[1])])
    load.main([*groups["--load"], *TUNED, "--json", str(paths[2])])
    plot.main(["--load-json", str(paths[1]), str(paths[2]), "--out", "benchmarks/load.png"])
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    (RESULTS / "tables.md").write_text(tables_markdown(*reports), encoding="utf-8")
    print(f"wrote {RESULTS / 'tables.md'}")


if __name__ == "__main__":
    main()
