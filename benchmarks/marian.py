"""An OPUS-MT-sized MarianMT: our engine against CTranslate2 and transformers: ``python -m benchmarks.marian``.

    python -m benchmarks.marian [--size opus-mt|tiny] [--limit 256] [--streams 1 2] [--rounds 3] [--out FILE]
    python -m benchmarks.marian --provider cuda --streams 1 --systems ours-fp16 graph-fp16 ct2-float16

1. The model: a MarianMT checkpoint of OPUS-MT en-de's shape (6 + 6 layers, d_model 512, 8 heads,
   FFN 2048, SiLU, 58,101 vocabulary entries, tied embeddings) with random weights (fixed seed),
   sentencepiece models trained on Multi30K and the vocabulary filled up with pieces they never
   produce (``export.tiny_hf.build_marian``). A few weights are set so that outputs end by
   themselves, after about as many tokens as the source has (``end_by_source_length``); their text
   is meaningless, their cost that of real translations. ``--size tiny`` builds a tiny one instead.
2. Conversions of that one directory: ours by ``python -m export --hf-model`` (fp32, int8),
   CTranslate2's by its own ``TransformersConverter`` (float32, int8). Built once into
   ``--workdir``; ``--rebuild`` builds them again.
3. Every system in a worker process of its own (``benchmarks/systems.py``): our engine fp32 and
   int8, CTranslate2 float32 and int8, and transformers' ``generate``. All warm up before any
   timing; each round runs every system on the first ``--limit`` test sentences, in a rotated
   order; transformers, the slowest, runs in the first round only.
4. Same batches (``--batch-size`` length-sorted sentences), same threads (``--threads``, split
   into S streams for each S of ``--streams``; transformers runs one stream only), beam 4, length
   penalty 1, a sentence done once beam-size hypotheses have ended (transformers'
   ``early_stopping=True``), one cap on generated tokens for every system (``--max-new-tokens``).
5. Reported per system: the median time as sentences/s and generated tokens/s (EOS excluded), as
   ratios to CTranslate2 at the same precision and to transformers; the worker's peak RSS; the
   share of sentences that ended before the cap; the share of translations identical to
   transformers'. The result file is ``--out`` (default ``benchmarks/results/marian.json``).

With ``SHORTLIST_SYSTEMS`` among ``--systems``, the bundle gets a vocabulary shortlist built from
``--corpus`` (``export.shortlist``, k 100, frequent 1000) and CTranslate2 a vocabulary map of it;
``--memory`` then adds ours with shared weights and the shortlist, and CTranslate2 with the map.

``--memory`` measures the service's arrangement instead: ``S`` engine processes (``S`` the largest
of ``--streams``, ``service.engine_process.EngineHost``, ``--threads // S`` threads each), every
batch sent to the least busy one by ``S`` client threads, with the weights shared
(``engine.shared_weights``, a cache under ``--workdir``) and without, against CTranslate2 with
``inter_threads=S`` in its worker, at each precision of ``--systems``. All start and warm up
before any timing, then run ``--rounds`` alternating rounds. The resident memory (RSS) and its
proportional share (PSS, pages shared between processes counted once in all) of every process
are read from /proc/PID/smaps_rollup every ``--sample-every-s``; reported are the peaks of their
sums over each system's processes, and the speed as sentences per second of wall time and per
second of the processes' CPU time (which other jobs on the machine disturb far less). The result
file is ``--out`` (default ``benchmarks/results/shared_weights.json``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import (
    DATA_DIR,
    RESULTS,
    RUNS,
    TEST_SRC,
    child_env,
    markdown_table,
    read_lines,
    require_paths,
    settings_record,
    start_run,
    streams_markdown,
    streams_title,
    write_report,
)
from benchmarks.engine import write_vmap
from benchmarks.systems import (
    MULTI_STREAM,
    SYSTEMS,
    WARMUP_SENTENCES,
    Schedule,
    Worker,
    ct2_baseline,
    ct2_model,
    length_sorted_batches,
    run_workers,
)
from engine.bundle import load_bundle
from export.shortlist import main as build_shortlist

MARIAN_SYSTEMS = ["ours-fp32", "ours-int8", "ct2-float32", "ct2-int8", "transformers"]
POOL_SYSTEMS = ["pool-fp32", "pool-int8"]  # ours decoding in the row pool (engine.pool)
# with --provider cuda: ours captured as CUDA graphs, and both in float16
GPU_SYSTEMS = ["graph-fp32", "ours-fp16", "graph-fp16", "ct2-float16"]
# with the vocabulary shortlist: ours with the bundle's, CTranslate2 with a vocabulary map of it
SHORTLIST_SYSTEMS = ["ours-fp32-shortlist", "ours-int8-shortlist", "ct2-float32-vmap", "ct2-int8-vmap"]
SHORTLIST_K, SHORTLIST_FREQUENT = 100, 1000  # en-de's choice on Multi30K val (RESULTS.md section 16)
REFERENCE = "transformers"
OPUS_MT_VOCAB = 58100  # OPUS-MT en-de's vocabulary without <pad>


def build(size: str, corpus: Path, out: Path) -> None:
    """The Hugging Face checkpoint of ``size``, written to a temporary directory first so that an
    interrupted build leaves nothing behind."""
    from export.parity import one_torch_thread
    from export.tiny_hf import TinyDims, build_marian

    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    if size == "opus-mt":
        dims = TinyDims(d_model=512, layers=6, heads=8, ffn=2048, vocab_size=32000, max_positions=512)
        with one_torch_thread():
            build_marian(staging, corpus, lines=29000, dims=dims, vocab_entries=OPUS_MT_VOCAB, length_ratio=1.0)
    else:
        with one_torch_thread():
            build_marian(staging, corpus, length_ratio=1.0)
    staging.rename(out)


def convert_all(hf_dir: Path, workdir: Path) -> None:
    """Our bundle (fp32 and int8) and CTranslate2's float32 and int8 models of ``hf_dir``."""
    import ctranslate2

    from export.pipeline import ExportConfig, export_bundle

    config = ExportConfig(
        checkpoint=None, hf_model=hf_dir, out=workdir / "bundle", int8=True, source_language="en", target_language="de"
    )
    export_bundle(config)
    for quantization in ("float32", "int8"):
        converter = ctranslate2.converters.TransformersConverter(str(hf_dir))
        converter.convert(str(workdir / f"ct2-{quantization}"), quantization=quantization, force=True)


def prepare(args: argparse.Namespace, texts: list[str]) -> None:
    """The checkpoint and its conversions (unless already built), and the source file the workers read."""
    args.workdir.mkdir(parents=True, exist_ok=True)
    hf_dir = args.workdir / "hf"
    if args.rebuild:
        for path in (hf_dir, args.workdir / "bundle", args.workdir / "ct2-float32", args.workdir / "ct2-int8"):
            shutil.rmtree(path, ignore_errors=True)
    if not hf_dir.is_dir():
        build(args.size, args.corpus, hf_dir)
    if not all((args.workdir / name).is_dir() for name in ("bundle", "ct2-float32", "ct2-int8")):
        convert_all(hf_dir, args.workdir)
    if set(args.systems) & set(SHORTLIST_SYSTEMS):
        add_shortlist(args)
    args.src = args.workdir / "source.txt"
    args.src.write_text("".join(t + "\n" for t in texts), encoding="utf-8")


def add_shortlist(args: argparse.Namespace) -> None:
    """The bundle's shortlist from the corpus (unless it has one), and CTranslate2's vocabulary map of it."""
    bundle = args.workdir / "bundle"
    if load_bundle(bundle, check_graphs=False).manifest.shortlist is None:
        corpus = [str(args.corpus / "train.en"), str(args.corpus / "train.de")]
        build_shortlist(["--bundle", str(bundle), "--source", corpus[0], "--target", corpus[1],
                         "--k", str(SHORTLIST_K), "--frequent", str(SHORTLIST_FREQUENT)])  # fmt: skip
    for precision in ("float32", "int8"):
        write_vmap(bundle, args.workdir / f"ct2-{precision}" / "vmap.txt")


def worker(name: str, streams: int, args: argparse.Namespace) -> Worker:
    cmd = ["--src", str(args.src), "--threads", str(args.threads), "--streams", str(streams)]
    cmd += ["--batch-size", str(args.batch_size), "--max-new-tokens", str(args.max_new_tokens)]
    family, precision = SYSTEMS[name]
    cmd += ["--bundle", str(args.workdir / "bundle"), "--hf-dir", str(args.workdir / "hf"), "--provider", args.provider]
    if family == "ct2":
        cmd += ["--ct2-dir", str(args.workdir / f"ct2-{ct2_model(precision)}")]
    return Worker(name, cmd, args.workdir / f"{name}-streams{streams}.log", child_env())


def summarize(runs: list[dict], reference: list[str] | None, cap: int) -> dict:
    first = runs[0]
    translations, counts = first["translations"], first["token_counts"]
    seconds = statistics.median(r["seconds"] for r in runs)
    result = {
        "sentences": len(translations),
        "rounds": len(runs),
        "seconds": seconds,
        "seconds_all": [r["seconds"] for r in runs],
        "sentences_per_s": len(translations) / seconds,
        "tokens_per_s": sum(counts) / seconds,
        "target_tokens": sum(counts),
        "ended_rate": sum(n < cap - 1 for n in counts) / len(counts),  # EOS before the last step
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "deterministic": all(r["translations"] == translations for r in runs),
    }
    if reference is not None:
        result["identical_rate"] = sum(a == b for a, b in zip(reference, translations, strict=True)) / len(reference)
    return result


def table(results: dict[str, dict]) -> str:
    header = ["system", "sent/s", "tok/s", "× CT2", "× transformers", "peak RSS MB", "ended by EOS",
              "= transformers"]  # fmt: skip
    rows = []
    reference = results.get(REFERENCE)
    for name in [*MARIAN_SYSTEMS, *POOL_SYSTEMS, *SHORTLIST_SYSTEMS, *GPU_SYSTEMS]:
        if (r := results.get(name)) is None:
            continue
        base = results.get(ct2_baseline(name)) if SYSTEMS[name][0] != "transformers" else None
        ratio = f"{r['sentences_per_s'] / base['sentences_per_s']:.2f}" if base else "n/a"
        versus = f"{r['sentences_per_s'] / reference['sentences_per_s']:.1f}" if reference else "n/a"
        same = "reference" if name == REFERENCE else f"{r['identical_rate']:.1%}" if "identical_rate" in r else "n/a"
        rows.append([name, f"{r['sentences_per_s']:.2f}", f"{r['tokens_per_s']:.0f}", ratio, versus,
                     f"{r['peak_rss_mb']:.0f}", f"{r['ended_rate']:.0%}", same])  # fmt: skip
    return markdown_table(header, rows)


def measure_streams(streams: int, n: int, args: argparse.Namespace, reference: dict | None) -> tuple[dict, dict]:
    """The systems that can decode ``streams`` batches at once, compared at that setting; also the
    reference's run (measured at one stream, reused for the others)."""
    names = [name for name in args.systems if streams == 1 or SYSTEMS[name][0] in MULTI_STREAM]
    workers = {name: worker(name, streams, args) for name in names if not (name == REFERENCE and reference)}
    runs = run_workers(workers, Schedule((args.beam,), args.rounds, (REFERENCE,), args.slow_rounds), n)
    runs = {name: value for (name, _), value in runs.items() if value}
    if reference is None and REFERENCE in runs:
        reference = {"runs": runs[REFERENCE]}
    if reference is not None:
        runs[REFERENCE] = reference["runs"]
    texts = reference["runs"][0]["translations"] if reference else None
    results = {name: summarize(value, None if name == REFERENCE else texts, args.max_new_tokens)
               for name, value in runs.items()}  # fmt: skip
    setting = {
        "streams": streams,
        "results": [{"system": name, "beam_size": args.beam, **r} for name, r in results.items()],
        "table": table(results),
    }
    return setting, reference


# -- --memory: the service's engine processes, weights shared and not, against CTranslate2 -------

MB = 1e6


def smaps_rollup(pid: int) -> dict[str, float]:
    """A process's Rss and Pss (MB) from /proc/PID/smaps_rollup; empty once it has exited."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    except OSError:
        return {}
    fields = {name: value.split() for name, _, value in (line.partition(":") for line in lines)}
    return {name: int(fields[name][0]) * 1024 / MB for name in ("Rss", "Pss")}


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of the processes so far: a measure of work that other jobs on the
    machine disturb far less than wall time."""
    import psutil

    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


@dataclass
class MemoryPeaks:
    """The peaks of a system's processes' RSS and PSS, each summed over the processes at one sample."""

    pids: list[int]
    rss_mb: float = 0.0
    pss_mb: float = 0.0
    last: dict[str, float] = field(default_factory=dict)

    def sample(self) -> None:
        readings = [smaps_rollup(pid) for pid in self.pids]
        self.last = {name: sum(r.get(name, 0.0) for r in readings) for name in ("Rss", "Pss")}
        self.rss_mb, self.pss_mb = max(self.rss_mb, self.last["Rss"]), max(self.pss_mb, self.last["Pss"])


class Sampler:
    """Samples every system's ``MemoryPeaks`` every ``every_s`` in a thread of its own."""

    def __init__(self, peaks: list[MemoryPeaks], every_s: float) -> None:
        self.peaks, self.every_s = peaks, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="smaps-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            for peaks in self.peaks:
                peaks.sample()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class EngineProcesses:
    """The service's arrangement of one model: ``streams`` engine processes, each batch of
    ``--batch-size`` length-sorted texts sent to the least busy one, ``streams`` at once."""

    def __init__(
        self,
        variant: str,
        streams: int,
        weights_cache: Path | None,
        args: argparse.Namespace,
        *,
        shortlist: bool = False,
    ) -> None:
        from engine.api import TranslationOptions
        from engine.translator import TranslatorConfig
        from service.engine_process import EngineHost

        self.streams = streams
        self.host = EngineHost(streams=streams, threads=max(1, args.threads // streams), weights_cache=weights_cache)
        config = TranslatorConfig(model_dir=args.workdir / "bundle", provider="cpu", variant=variant,
                                  max_batch_sentences=args.batch_size)  # fmt: skip
        began = time.perf_counter()
        self.engine = self.host.load(config)
        self.load_s = time.perf_counter() - began
        # As systems.load_ours: no repetition guard, which the other systems do not have.
        self.options = TranslationOptions(beam_size=args.beam, length_penalty=1.0, max_length=args.max_new_tokens,
                                          max_consecutive_repeats=0, shortlist=shortlist)  # fmt: skip
        self.batch_size = args.batch_size

    @property
    def pids(self) -> list[int]:
        return [pid for pid in self.host.pids if pid is not None]

    def run(self, texts: list[str]) -> dict:
        batches = length_sorted_batches([self.engine.count_tokens(t) for t in texts], self.batch_size)
        began, cpu = time.perf_counter(), cpu_seconds(self.pids)
        with ThreadPoolExecutor(self.streams) as pool:
            done = list(pool.map(lambda batch: self.engine.translate_batch([texts[i] for i in batch], self.options),
                                 batches))  # fmt: skip
        seconds, cpu = time.perf_counter() - began, cpu_seconds(self.pids) - cpu
        translations = [""] * len(texts)
        for batch, result in zip(batches, done, strict=True):
            for i, r in zip(batch, result.results, strict=True):
                translations[i] = r.text
        return {"seconds": seconds, "cpu_seconds": cpu, "translations": translations}

    def close(self) -> None:
        self.host.close()


class Ct2Worker:
    """CTranslate2 in its benchmark worker (``benchmarks.systems``), ``inter_threads=streams``; it
    translates the first sentences of ``args.src``, which are the texts given."""

    def __init__(self, name: str, streams: int, args: argparse.Namespace) -> None:
        self.worker, self.beam = worker(name, streams, args), args.beam
        self.pids = [self.worker.proc.pid]
        self.load_s = float("nan")  # its warm-up is timed with its loading
        self.worker.receive()  # ready

    def run(self, texts: list[str]) -> dict:
        cpu = cpu_seconds(self.pids)
        result = self.worker.run(self.beam, len(texts))
        cpu = cpu_seconds(self.pids) - cpu
        return {"seconds": result["seconds"], "cpu_seconds": cpu, "translations": result["translations"]}

    def close(self) -> None:
        self.worker.close()


MEMORY_SYSTEMS = {"fp32": ("ours-fp32", "ct2-float32"), "int8": ("ours-int8", "ct2-int8")}
SHARED, UNSHARED = "shared weights", "a copy per process"


def memory_systems(variant: str, streams: int, args: argparse.Namespace, stack: ExitStack) -> dict:
    """Our engine processes with and without shared weights, and CTranslate2, of one precision;
    each closed by ``stack``."""
    ours, ct2 = MEMORY_SYSTEMS[variant]
    cache = args.workdir / "weights"
    systems = {
        f"{ours}, {SHARED}": EngineProcesses(variant, streams, cache, args),
        f"{ours}, {UNSHARED}": EngineProcesses(variant, streams, None, args),
        f"{ct2}, inter_threads={streams}": Ct2Worker(ct2, streams, args),
    }
    if set(args.systems) & set(SHORTLIST_SYSTEMS):
        systems[f"{ours}, {SHARED}, shortlist"] = EngineProcesses(variant, streams, cache, args, shortlist=True)
        systems[f"{ct2}, inter_threads={streams}, vmap"] = Ct2Worker(f"{ct2}-vmap", streams, args)
    for system in systems.values():
        stack.callback(system.close)
    return systems


def measure_memory(variant: str, texts: list[str], args: argparse.Namespace) -> dict:
    """Time every system of ``variant`` over ``--rounds`` rotated rounds, sampling its memory throughout."""
    streams = max(args.streams)
    with ExitStack() as stack:
        systems = memory_systems(variant, streams, args, stack)
        peaks = {name: MemoryPeaks(system.pids) for name, system in systems.items()}
        for system in systems.values():
            system.run(texts[:WARMUP_SENTENCES])
        sampler = Sampler(list(peaks.values()), args.sample_every_s)
        stack.callback(sampler.close)
        names, runs = list(systems), {name: [] for name in systems}
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                runs[name].append(systems[name].run(texts))
        for value in peaks.values():
            value.sample()
        return {name: memory_result(systems[name], runs[name], peaks[name], len(texts)) for name in names}


def memory_result(system: EngineProcesses | Ct2Worker, runs: list[dict], peaks: MemoryPeaks, n: int) -> dict:
    seconds = statistics.median(r["seconds"] for r in runs)
    return {
        "processes": len(peaks.pids),
        "load_s": system.load_s,
        "seconds_all": [r["seconds"] for r in runs],
        "sentences_per_s": n / seconds,
        "cpu_seconds_all": [r["cpu_seconds"] for r in runs],
        "sentences_per_cpu_s": n / statistics.median(r["cpu_seconds"] for r in runs),
        "peak_rss_mb": peaks.rss_mb,
        "peak_pss_mb": peaks.pss_mb,
        "after_rss_mb": peaks.last["Rss"],
        "after_pss_mb": peaks.last["Pss"],
        "translations": runs[0]["translations"],
    }


def memory_table(results: dict[str, dict]) -> str:
    header = ["system", "processes", "sent/s", "× CT2", "sent/CPU s", "× CT2", "peak RSS MB", "peak PSS MB",
              "RSS / PSS after, MB"]  # fmt: skip
    base = next(r for name, r in results.items() if name.startswith("ct2"))
    rows = [[name, r["processes"], f"{r['sentences_per_s']:.2f}",
             f"{r['sentences_per_s'] / base['sentences_per_s']:.2f}", f"{r['sentences_per_cpu_s']:.2f}",
             f"{r['sentences_per_cpu_s'] / base['sentences_per_cpu_s']:.2f}",
             f"{r['peak_rss_mb']:.0f}", f"{r['peak_pss_mb']:.0f}", f"{r['after_rss_mb']:.0f} / {r['after_pss_mb']:.0f}"]
            for name, r in results.items()]  # fmt: skip
    return markdown_table(header, rows)


def memory_report(texts: list[str], args: argparse.Namespace) -> dict:
    variants = [v for v, (ours, ct2) in MEMORY_SYSTEMS.items() if ours in args.systems or ct2 in args.systems]
    settings, sections = [], []
    for variant in variants:
        results = measure_memory(variant, texts, args)
        shared, unshared = (results[f"{MEMORY_SYSTEMS[variant][0]}, {kind}"] for kind in (SHARED, UNSHARED))
        identical = sum(a == b for a, b in zip(shared["translations"], unshared["translations"], strict=True))
        settings.append(
            {"variant": variant, "results": results, "shared_identical_to_unshared": identical / len(texts)}
        )
        sections.append(
            f"### {variant}, {streams_title(max(args.streams), args.threads)}\n\n{memory_table(results)}\n\n"
            f"Translations with shared weights identical to those without: {identical} of {len(texts)}."
        )
    return {"settings": settings_record(args), "variants": settings, "markdown": "\n\n".join(sections)}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=["opus-mt", "tiny"], default="opus-mt")
    parser.add_argument("--corpus", type=Path, default=DATA_DIR, help="train.en and train.de for the tokenizers")
    parser.add_argument("--src", type=Path, default=TEST_SRC)
    parser.add_argument("--limit", type=int, default=256, help="the first N test sentences")
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=[*MARIAN_SYSTEMS, *POOL_SYSTEMS, *SHORTLIST_SYSTEMS, *GPU_SYSTEMS],
        default=MARIAN_SYSTEMS,
    )
    parser.add_argument(
        "--provider",
        choices=["cpu", "cuda"],
        default="cpu",
        help=f"where the systems run; {', '.join(GPU_SYSTEMS)} need cuda",
    )
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--streams", nargs="+", type=int, default=[1, 2], help="one table each")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="cap on generated tokens, EOS included")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slow-rounds", type=int, default=1, help=f"rounds for {REFERENCE}")
    parser.add_argument("--workdir", type=Path, default=RUNS / "marian", help="checkpoint, conversions, logs")
    parser.add_argument("--rebuild", action="store_true", help="build the checkpoint and conversions again")
    parser.add_argument("--memory", action="store_true", help="the service's engine processes' memory (see above)")
    parser.add_argument("--sample-every-s", type=float, default=0.2, help="--memory: seconds between samples")
    parser.add_argument("--out", type=Path, help="the result file (default: results/marian.json, with --memory "
                        "results/shared_weights.json)")  # fmt: skip
    args = parser.parse_args(argv)
    args.out = args.out or RESULTS / ("shared_weights.json" if args.memory else "marian.json")
    require_paths(parser, [args.src, args.corpus / "train.en", args.corpus / "train.de"])
    return args


def main(argv: list[str] | None = None) -> None:
    start = start_run("benchmarks.marian", argv)
    args = parse_args(start.argv)
    texts = read_lines(args.src, args.limit)
    prepare(args, texts)
    if args.memory:
        write_report(start, args.out, memory_report(texts, args))
        return
    settings, reference = [], None
    for streams in args.streams:
        setting, reference = measure_streams(streams, len(texts), args, reference)
        settings.append(setting)
    markdown = streams_markdown(settings, args.threads)
    options = {"size": args.size, "threads": args.threads, "batch_size": args.batch_size, "beam_size": args.beam,
               "max_new_tokens": args.max_new_tokens, "rounds": args.rounds, "sentences": len(texts)}  # fmt: skip
    write_report(start, args.out, {"settings": options, "streams": settings, "markdown": markdown})


if __name__ == "__main__":
    main()
