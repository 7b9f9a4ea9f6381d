"""``python -m model.train`` given bad input, resumed with other settings, or interrupted: a one-line
usage error (exit 2) naming the problem before any training, never a traceback or a broken run."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from repo_root import REPO, python_env

from engine.tokenizer import Tokenizer
from model.checkpoint import load_checkpoint
from model.data import ParallelData, read_lines
from model.tokenizer import train_sentencepiece
from model.train import main


def corpus_copy(tiny_corpus: Path, root: Path) -> Path:
    data = root / "data"
    shutil.copytree(tiny_corpus, data)
    return data


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The last line of stderr of a run that must stop with exit status 2."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_read_lines_ends_lines_at_newlines_only(tmp_path: Path) -> None:
    path = tmp_path / "text.en"
    # BOM, CRLF, and separators str.splitlines would also break at: U+2028, NEL, form feed.
    path.write_bytes("\ufeffA dog\u2028runs.\r\nA cat\x85sits.\nA\x0cboy.\n".encode())
    assert read_lines(path) == ["A dog\u2028runs.", "A cat\x85sits.", "A\x0cboy."]


def test_blank_lines_are_left_out_of_training(tiny_corpus: Path, tmp_path: Path) -> None:
    data = corpus_copy(tiny_corpus, tmp_path)
    src, tgt = read_lines(data / "train.en")[:4], read_lines(data / "train.de")[:4]
    src[1], tgt[2] = "", "   "
    (data / "train.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (data / "train.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    tokenizer = Tokenizer(train_sentencepiece(src + tgt, tmp_path / "spm.model", vocab_size=40))
    loaded = ParallelData.load(data / "train.en", data / "train.de", tokenizer, max_len=64)
    assert loaded.src == tokenizer.encode_batch([src[0], src[3]])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "train.en: cannot read it: No such file"),
        ("misaligned", "train.en has 1200 lines but"),
        ("empty", "train.en and"),
        ("empty_val", "val.en and"),
        ("binary", "train.de: not UTF-8 text"),
        ("directory", "train.en: is a directory"),
    ],
)
def test_a_corpus_that_cannot_be_used_is_a_usage_error(
    tiny_train_config: Path,
    tiny_corpus: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: str,
    message: str,
) -> None:
    data = corpus_copy(tiny_corpus, tmp_path)
    if damage == "missing":
        (data / "train.en").unlink()
    elif damage == "misaligned":
        (data / "train.de").write_text("".join(line + "\n" for line in read_lines(data / "train.de")[:-1]))
    elif damage == "empty":
        (data / "train.en").write_text("")
        (data / "train.de").write_text("")
    elif damage == "empty_val":
        (data / "val.en").write_text("")
        (data / "val.de").write_text("")
    elif damage == "binary":
        (data / "train.de").write_bytes(bytes(range(128, 256)) * 8)
    else:
        (data / "train.en").unlink()
        (data / "train.en").mkdir()
    out = tmp_path / "run"
    line = usage_error(capsys, ["--config", str(tiny_train_config), f"data_dir={data}", f"out_dir={out}"])
    assert message in line and line.startswith("python -m model.train: error:"), line
    assert not (out / "checkpoints").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("accum_steps=1000", "fewer than the 1000 of one update"),
        ("max_len=2", "no sentence pair is non-blank and at most max_len=2"),
    ],
)
def test_settings_that_leave_no_update_are_a_usage_error(
    tiny_train_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, message: str
) -> None:
    argv = ["--config", str(tiny_train_config), f"out_dir={tmp_path / 'run'}", "max_steps=4", override]
    assert message in usage_error(capsys, argv)


def test_a_run_stopped_before_its_first_step_ends_cleanly(tiny_train_config: Path, tmp_path: Path) -> None:
    main(["--config", str(tiny_train_config), f"out_dir={tmp_path}", "max_steps=4", "max_minutes=1e-12"])
    assert "no step checkpoints to average" in (tmp_path / "train.log").read_text()


@pytest.mark.parametrize(
    ("override", "changed"),
    [
        ("model.d_model=64", "model.d_model: 32 -> 64"),
        ("model.activation=gelu", "model.activation: 'relu' -> 'gelu'"),  # same shapes: would load silently
        ("vocab_size=80", "vocab_size: 64 -> 80"),  # the run's spm.model would be kept silently
    ],
)
def test_resuming_with_other_model_settings_is_refused(
    tiny_train_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, changed: str
) -> None:
    base = ["--config", str(tiny_train_config), f"out_dir={tmp_path}", "max_steps=4"]
    main(base)
    before = (tmp_path / "checkpoints" / "last.pt").read_bytes()
    line = usage_error(capsys, [*base[:-1], "max_steps=8", override])
    assert "trained with other settings" in line and changed in line, line
    assert (tmp_path / "checkpoints" / "last.pt").read_bytes() == before


def test_resuming_with_other_dropout_goes_on(tiny_train_config: Path, tmp_path: Path) -> None:
    """Dropout regularises training; the weights mean the same with another."""
    base = ["--config", str(tiny_train_config), f"out_dir={tmp_path}", "max_steps=4"]
    main(base)
    main([*base[:-1], "max_steps=6", "model.dropout=0.3"])
    assert "resumed from" in (tmp_path / "train.log").read_text()


def test_resuming_from_a_damaged_checkpoint_is_a_usage_error(
    tiny_train_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--config", str(tiny_train_config), f"out_dir={tmp_path}", "max_steps=4"]
    main(base)
    last = tmp_path / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    assert "cannot resume" in usage_error(capsys, [*base[:-1], "max_steps=8"])


def test_an_interrupted_run_exits_cleanly_and_resumes(tiny_train_config: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "model.train", "--config", str(tiny_train_config), f"out_dir={tmp_path}"]
    run = subprocess.Popen(
        [*argv, "max_steps=100000", "validate_every=2"],
        cwd=REPO,
        env=python_env() | {"PYTHONFAULTHANDLER": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # SIGINT as a terminal delivers it: a runner started in the background (`pytest &` in a
        # script) ignores SIGINT, its children inherit that, and Python then keeps it ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    last = tmp_path / "checkpoints" / "last.pt"
    while not last.exists() and run.poll() is None:  # interrupt once training is under way
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    try:
        _, err = run.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # where every thread is
        run.send_signal(signal.SIGABRT)  # faulthandler writes their stacks to stderr
        pytest.fail(f"training did not stop within 120 s of SIGINT:\n{run.communicate()[1]}")
    assert run.returncode == 130, err
    assert "Traceback" not in err and "the same command resumes" in err
    step = load_checkpoint(last)["step"]
    resumed = subprocess.run(
        [*argv, f"max_steps={step + 2}", "validate_every=2"], cwd=REPO, env=python_env(), capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert load_checkpoint(last)["step"] == step + 2
