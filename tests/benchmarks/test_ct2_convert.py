"""The CTranslate2 conversion of a checkpoint (benchmarks/ct2_convert.py) reproduces the PyTorch
model exactly: same decoding, same log-probabilities."""

from __future__ import annotations

from pathlib import Path

import pytest

ctranslate2 = pytest.importorskip("ctranslate2", reason="the bench extra (ctranslate2) is not installed")
torch = pytest.importorskip("torch")

from benchmarks.agreement import token_log_probs  # noqa: E402
from benchmarks.ct2_convert import convert, main  # noqa: E402
from engine.tokenizer import EOS_ID, Tokenizer, normalize_text  # noqa: E402
from model.checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from model.data import pad  # noqa: E402
from model.decoding import DecodingOptions, beam_search, max_decoding_length  # noqa: E402

SENTENCES = 8
pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def ct2_model(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return convert(tiny_checkpoint, tmp_path_factory.mktemp("ct2") / "float32")


def sources(tiny_corpus: Path, n: int = SENTENCES) -> list[str]:
    return (tiny_corpus / "val.en").read_text(encoding="utf-8").splitlines()[:n]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_ct2_conversion_reproduces_pytorch_decoding(
    ct2_model: Path, tiny_checkpoint: Path, tiny_corpus: Path, beam_size: int
) -> None:
    model = model_from_checkpoint(load_checkpoint(tiny_checkpoint))
    tokenizer = Tokenizer(ct2_model / "spm.model")
    translator = ctranslate2.Translator(str(ct2_model), intra_threads=1)
    eos = tokenizer.sp.id_to_piece(EOS_ID)
    options = DecodingOptions(beam_size=beam_size)
    for text in sources(tiny_corpus):
        src_ids = tokenizer.encode(text)
        expected = beam_search(model, pad([src_ids]), options)[0][0].tokens
        # The reference forces EOS at its cap; CTranslate2 stops one token earlier without it.
        cap = max_decoding_length(len(src_ids), options, model.config.max_positions)
        result = translator.translate_batch(
            [tokenizer.sp.encode(normalize_text(text), out_type=str)],
            beam_size=beam_size,
            min_decoding_length=0,
            max_decoding_length=cap - 1,
            return_end_token=True,
        )[0]
        assert [tokenizer.sp.piece_to_id(p) for p in result.hypotheses[0] if p != eos] == expected, text


def test_ct2_conversion_gives_the_same_log_probabilities(ct2_model: Path, tiny_checkpoint: Path, tiny_corpus: Path):
    model = model_from_checkpoint(load_checkpoint(tiny_checkpoint))
    tokenizer = Tokenizer(ct2_model / "spm.model")
    translator = ctranslate2.Translator(str(ct2_model), intra_threads=1)
    texts = sources(tiny_corpus, 4)
    targets = [tokenizer.encode(t)[:-1][::-1] for t in texts]  # any target will do: reversed sources
    scored = translator.score_batch(
        [tokenizer.sp.encode(normalize_text(t), out_type=str) for t in texts],
        [tokenizer.target_pieces(ids) for ids in targets],
    )
    for text, target, result in zip(texts, targets, scored, strict=True):
        expected = token_log_probs(model, tokenizer.encode(text), target)
        assert result.log_probs == pytest.approx(expected, abs=1e-4)


def test_ct2_conversion_errors(tiny_checkpoint: Path, ct2_model: Path, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="already exists"):
        convert(tiny_checkpoint, ct2_model)
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        convert(tmp_path / "missing.pt", tmp_path / "out")
    with pytest.raises(ValueError, match="quantization"):
        convert(tiny_checkpoint, tmp_path / "out", quantization="int4")


def test_the_command_line_converts_and_refuses_to_overwrite(
    tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "int8"
    main(["--checkpoint", str(tiny_checkpoint), "--out", str(out), "--quantization", "int8"])
    assert (out / "model.bin").is_file() and (out / "spm.model").is_file()
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", str(tiny_checkpoint), "--out", str(out)])
    assert exit_info.value.code == 2 and "already exists" in capsys.readouterr().err
