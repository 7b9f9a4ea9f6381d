"""Plot load tests: throughput and p99 latency against concurrency, batching on vs off.

python -m benchmarks.plot --load-json benchmarks/results/load.json [MORE.json] --out benchmarks/load.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt


def label(report: dict, mode: str, several: bool) -> str:
    settings = report["settings"]
    streams = settings.get("streams", 1)
    config = (
        f", threads={settings['threads']}, streams={streams}, wait={settings['max_wait_ms']:g} ms" if several else ""
    )
    return f"batching {mode}{config}" if mode else f"offline engine{config}"


def plot(reports: list[dict], out: Path) -> Path:
    """One figure, two panels; a line per report and batching mode, the offline engine dotted."""
    fig, (ax_tput, ax_p99) = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    several = len(reports) > 1
    for report, color in zip(reports, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=False):
        for mode, style in (("on", "o-"), ("off", "s--")):
            levels = sorted((lv for lv in report["levels"] if lv["batching"] == mode), key=lambda lv: lv["concurrency"])
            clients = [lv["concurrency"] for lv in levels]
            p99 = [lv["p99_s"] * 1000 if lv["p99_s"] is not None else float("nan") for lv in levels]
            ax_tput.plot(
                clients, [lv["throughput"] for lv in levels], style, color=color, label=label(report, mode, several)
            )
            ax_p99.plot(clients, p99, style, color=color, label=label(report, mode, several))
        offline = report["offline"]["throughput"]
        ax_tput.axhline(offline, color=color, linestyle=":", label=label(report, "", several))
    ax_tput.set(title="Throughput", xlabel="concurrent clients", ylabel="sentences / s")
    ax_p99.set(title="p99 latency", xlabel="concurrent clients", ylabel="ms", yscale="log")
    for ax in (ax_tput, ax_p99):
        ax.set_xscale("log", base=2)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    beam, cpu = reports[0]["settings"]["beam_size"], reports[0]["machine"]["cpu"]
    fig.suptitle(f"Service load test: one test sentence per request, beam {beam} ({cpu})")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load-json", type=Path, nargs="+", default=[Path("benchmarks/results/load.json")])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/load.png"))
    args = parser.parse_args(argv)
    for path in args.load_json:
        if not path.is_file():
            parser.error(f"{path} not found: run `python -m benchmarks.load --json {path}` first")
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in args.load_json]
    print(f"wrote {plot(reports, args.out)}")


if __name__ == "__main__":
    main()
