"""The tiny Hugging Face checkpoints (export/tiny_hf.py): what transformers loads from them, and
random models whose outputs end by themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from export.tiny_hf import build_nllb

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")
MAX_NEW_TOKENS = 64


def test_marian_checkpoint_is_laid_out_as_opus_mt(tiny_marian: Path) -> None:
    tokenizer, model = AutoTokenizer.from_pretrained(tiny_marian), AutoModelForSeq2SeqLM.from_pretrained(tiny_marian)
    assert (type(tokenizer).__name__, type(model).__name__) == ("MarianTokenizer", "MarianMTModel")
    assert {"source.spm", "target.spm", "vocab.json", "tokenizer_config.json"} <= {
        p.name for p in tiny_marian.iterdir()
    }
    vocab, pad = tokenizer.get_vocab(), tokenizer.pad_token_id
    assert (vocab["</s>"], vocab["<unk>"], pad) == (0, 1, max(vocab.values())) == (0, 1, model.config.vocab_size - 1)
    g = model.generation_config
    assert (g.decoder_start_token_id, g.bad_words_ids, g.eos_token_id, g.forced_eos_token_id) == (pad, [[pad]], 0, 0)
    assert (g.num_beams, g.max_length) == (4, 512)


def test_marian_separate_vocabularies(tiny_marian_separate: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_marian_separate)
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_marian_separate)
    assert tokenizer.separate_vocabs and (tiny_marian_separate / "target_vocab.json").is_file()
    assert not model.config.share_encoder_decoder_embeddings
    assert tokenizer.target_encoder["<pad>"] == tokenizer.pad_token_id == model.config.pad_token_id
    assert set(tokenizer.target_encoder) != set(tokenizer.get_vocab())


def test_nllb_checkpoint_is_laid_out_as_nllb(tiny_nllb: Path) -> None:
    tokenizer, model = AutoTokenizer.from_pretrained(tiny_nllb), AutoModelForSeq2SeqLM.from_pretrained(tiny_nllb)
    assert (type(tokenizer).__name__, type(model).__name__) == ("NllbTokenizer", "M2M100ForConditionalGeneration")
    assert (tiny_nllb / "sentencepiece.bpe.model").is_file()
    ids = tokenizer.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>"])
    assert ids == [0, 1, 2, 3]
    codes = tokenizer.convert_tokens_to_ids(["eng_Latn", "deu_Latn", "fra_Latn", "ces_Latn"])
    assert min(codes) > max(tokenizer.convert_tokens_to_ids(tokenizer.tokenize("Ein Hund.")))
    tokenizer.src_lang = "deu_Latn"
    assert tokenizer("Ein Hund.").input_ids[0] == codes[1]
    g = model.generation_config
    assert (g.decoder_start_token_id, g.eos_token_id, g.forced_eos_token_id) == (2, 2, None)
    assert model.config.vocab_size == len(tokenizer) + 2


@pytest.mark.parametrize("family", ["tiny_marian", "tiny_marian_separate", "tiny_nllb"])
def test_random_model_outputs_end_by_themselves(family: str, request: pytest.FixtureRequest, hf_corpus: Path) -> None:
    """Most outputs end with EOS before the token limit, after about as many tokens as the source has."""
    hf_dir: Path = request.getfixturevalue(family)
    tokenizer, model = AutoTokenizer.from_pretrained(hf_dir), AutoModelForSeq2SeqLM.from_pretrained(hf_dir)
    texts = (hf_corpus / "val.en").read_text(encoding="utf-8").splitlines()[:32]
    inputs = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**inputs, num_beams=4, early_stopping=True, max_new_tokens=MAX_NEW_TOKENS)
    eos = model.generation_config.eos_token_id
    lengths = [row.index(eos) if eos in row else MAX_NEW_TOKENS for row in (r[1:] for r in out.tolist())]
    assert sum(n < MAX_NEW_TOKENS - 1 for n in lengths) >= 0.8 * len(texts)  # Marian forces EOS at the last step
    sources = inputs["attention_mask"].sum(dim=1).tolist()
    assert torch.corrcoef(torch.tensor([sources, lengths], dtype=torch.float))[0, 1] > 0.5
    assert len({tuple(r) for r in out.tolist()}) > 1  # outputs depend on the source


def test_builds_are_deterministic(hf_corpus: Path, tmp_path: Path) -> None:
    languages = {"eng_Latn": "en", "deu_Latn": "de"}
    first, second = (build_nllb(tmp_path / name, hf_corpus, languages=languages, lines=200) for name in "ab")
    for name in ("sentencepiece.bpe.model", "tokenizer.json", "model.safetensors"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
