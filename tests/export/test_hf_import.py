"""Hugging Face MarianMT and M2M100/NLLB checkpoints converted to bundles (export/hf_import.py) give
transformers' own tokens, log-probabilities and beam-search outputs, and are served over HTTP.

The checkpoints are tiny random models with real sentencepiece tokenizers (export/tiny_hf.py),
trained on Multi30K where it is present, else on the synthetic corpus of tests/conftest.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

transformers = pytest.importorskip("transformers", minversion="5.0")
torch = pytest.importorskip("torch")

from engine import TranslationOptions, Translator, TranslatorConfig  # noqa: E402
from engine.bundle import BundleError, Manifest, load_bundle  # noqa: E402
from engine.tokenizer import Tokenizer, normalize_text  # noqa: E402
from export import ExportError  # noqa: E402
from export.parity import OnnxGreedy  # noqa: E402
from export.pipeline import ExportConfig, export_bundle  # noqa: E402
from service.launcher import LiveService  # noqa: E402

NLLB_CODES = {"en": "eng_Latn", "de": "deu_Latn"}
MAX_NEW_TOKENS = 40
# Single sentences without surrounding spaces: the engine splits texts into sentences and keeps
# the whitespace around them, which generate does not.
ONE_SENTENCE = [
    "Hello.",
    "THE CENTRAL BANK raised rates by 0.5 percentage points on 12/03/2024.",
    "Digits 1234567890 and 3,14159 and 1e-9",
    # Mathematical symbols only: emoji and other symbols (☃, ©) are taken out of what the model reads
    # (engine.insets), and at an edge they would be a segment of their own.
    "Symbols ∑ ± ≤ and ∞ inside",
    "Ünïcödé àccents: Straße, façade, naïve",
]
# Words the test models have no pieces for (their tokenizers learnt Multi30K's scripts): generate
# writes words of its own for them, the engine passes them through.
UNREADABLE = ["Кошка сидит на окне.", "猫がいます。中文字符"]
TRICKY = [
    "Hello.",
    "  Two   spaces  and a tab\there ",
    "THE CENTRAL BANK raised rates by 0.5 percentage points on 12/03/2024.",
    "Punctuation!?… «quoted» — (parenthesised); 'single' \"double\"",
    "Digits 1234567890 and 3,14159 and 1e-9",
    "Кошка сидит на окне.",
    "Η γάτα κάθεται.",
    "猫がいます。中文字符",
    "Emoji 😀🎉 and symbols ☃ ∑ ©",
    "Ünïcödé àccents: Straße, façade, naïve",
    "a",
    "x y z q j k",
]


def sentences(corpus: Path, n: int = 24) -> list[str]:
    lines = (corpus / "val.en").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()][:n]


def convert(hf_dir: Path, out: Path, **kwargs: object) -> Path:
    export_bundle(ExportConfig(checkpoint=None, hf_model=hf_dir, out=out, **kwargs))
    return out


@pytest.fixture(scope="session")
def marian_bundle(tmp_path_factory: pytest.TempPathFactory, tiny_marian: Path) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "marian"
    return convert(tiny_marian, out, int8=True, source_language="en", target_language="de")


@pytest.fixture(scope="session")
def nllb_bundle(tmp_path_factory: pytest.TempPathFactory, tiny_nllb: Path) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "nllb"
    return convert(tiny_nllb, out, source_language="en,de", target_language="en,de")


@pytest.fixture(scope="session")
def marian_separate_bundle(tmp_path_factory: pytest.TempPathFactory, tiny_marian_separate: Path) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "marian-separate"
    return convert(tiny_marian_separate, out, source_language="en", target_language="de")


@pytest.fixture(scope="session")
def marian_multi_bundle(tmp_path_factory: pytest.TempPathFactory, tiny_marian_multi: Path) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "marian-multi"
    return convert(tiny_marian_multi, out, source_language="en")


# Each family's checkpoint fixture, bundle fixture, and the pair translated.
FAMILIES = {
    "marian": ("tiny_marian", "marian_bundle", "de"),
    "marian_separate": ("tiny_marian_separate", "marian_separate_bundle", "de"),
    "marian_multi": ("tiny_marian_multi", "marian_multi_bundle", "fr"),
    "nllb": ("tiny_nllb", "nllb_bundle", "de"),
}


@pytest.fixture(params=list(FAMILIES))
def family(request: pytest.FixtureRequest) -> tuple[Path, Path, str, str]:
    """(checkpoint, bundle, source, target) of one family."""
    checkpoint, bundle, target = FAMILIES[request.param]
    return request.getfixturevalue(checkpoint), request.getfixturevalue(bundle), "en", target


def source_prefix(manifest: Manifest, source: str, target: str) -> list[int]:
    """The language tokens before a source text, as the translator puts them."""
    languages = manifest.languages
    prefix = next(lang.tokens for lang in languages.source if lang.code == source)
    if languages.target_tokens_in == "source":
        prefix = prefix + next(lang.tokens for lang in languages.target if lang.code == target)
    return prefix


def hf_text(text: str, manifest: Manifest, target: str) -> str:
    """The text as transformers' tokenizer is given it: a multilingual OPUS-MT model's target first."""
    if manifest.languages.target_tokens_in == "source":
        code = next(lang.model_code for lang in manifest.languages.target if lang.code == target)
        return f">>{code}<< {text}"
    return text


def hf_tokenizer(hf_dir: Path, source: str) -> object:
    tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
    if hasattr(tokenizer, "src_lang"):
        tokenizer.src_lang = NLLB_CODES[source]
    return tokenizer


def generate_kwargs(tokenizer: object, target: str) -> dict[str, int]:
    if hasattr(tokenizer, "src_lang"):
        return {"forced_bos_token_id": tokenizer.convert_tokens_to_ids(NLLB_CODES[target])}
    return {}


def test_the_manifest_records_what_the_checkpoint_says(marian_bundle: Path, nllb_bundle: Path) -> None:
    marian = load_bundle(marian_bundle).manifest
    assert [lang.code for lang in marian.languages.source + marian.languages.target] == ["en", "de"]
    decoding = marian.decoding
    assert (decoding.forced_eos, decoding.renormalize, decoding.beam_size, decoding.max_length) == (
        "zero_score",
        True,
        4,
        511,
    )
    assert decoding.banned_ids == [marian.special_tokens.pad] and marian.special_tokens.bos == marian.special_tokens.pad
    nllb = load_bundle(nllb_bundle).manifest
    assert [(lang.code, lang.model_code) for lang in nllb.languages.target] == [("en", "eng_Latn"), ("de", "deu_Latn")]
    assert all(len(lang.tokens) == 1 for lang in nllb.languages.source)
    assert (nllb.decoding.forced_eos, nllb.special_tokens.bos, nllb.special_tokens.eos) == ("off", 2, 2)


def test_a_multilingual_opus_mt_model_names_its_target_by_a_token_before_the_source(
    marian_multi_bundle: Path, hf_corpus: Path
) -> None:
    languages = load_bundle(marian_multi_bundle).manifest.languages
    assert languages.target_tokens_in == "source"
    assert [(lang.code, lang.model_code) for lang in languages.target] == [("de", "deu"), ("fr", "fra")]
    assert [(lang.code, lang.tokens) for lang in languages.source] == [("en", [])]
    translator = Translator(TranslatorConfig(model_dir=marian_multi_bundle, provider="cpu", variant="fp32"))
    texts = sentences(hf_corpus, 8)
    de, fr = ([r.text for r in translator.translate_batch(texts, TranslationOptions(target_language=target)).results]
              for target in ("de", "fra"))  # fmt: skip
    assert de != fr
    unnamed = TranslationOptions()  # two targets: the request must name one
    with pytest.raises(ValueError, match="name one"):
        translator.translate_batch(texts, unnamed)


def test_token_ids_are_the_transformers_tokenizers(family: tuple[Path, Path, str, str], hf_corpus: Path) -> None:
    hf_dir, bundle_dir, source, target = family
    manifest = load_bundle(bundle_dir).manifest
    ours = Tokenizer.from_bundle(load_bundle(bundle_dir))
    theirs = hf_tokenizer(hf_dir, source)
    prefix = source_prefix(manifest, source, target)
    texts = TRICKY + sentences(hf_corpus, 20)
    for text in texts:
        # Both see the text as the service does: NFKC, whitespace runs and ends collapsed. (Given
        # a trailing space, NLLB's tokenizer adds a lone word-start piece; ours does not.)
        expected = theirs(hf_text(normalize_text(text), manifest, target)).input_ids
        assert ours.encode(text, prefix=prefix) == expected, text
    # Decoding: sentences' ids read back as target ids (a joint vocabulary). Generated outputs are
    # compared in test_beam_search_gives_transformers_generate_output.
    for ids in (theirs(text).input_ids for text in sentences(hf_corpus, 20)):
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True)


def test_a_vocabulary_both_sides_name_is_held_once(marian_bundle: Path, marian_separate_bundle: Path) -> None:
    shared = Tokenizer.from_bundle(load_bundle(marian_bundle))
    assert shared.source.sp is not shared.target.sp  # a sentencepiece model per side
    assert shared.source.vocab is shared.target.vocab and shared.source.by_id is shared.target.by_id
    separate = Tokenizer.from_bundle(load_bundle(marian_separate_bundle))
    assert separate.source.vocab != separate.target.vocab


@pytest.mark.parametrize("bad_id", [-1, 1 << 40, "7"])
def test_a_vocabulary_id_out_of_range_is_named(marian_bundle: Path, tmp_path: Path, bad_id: object) -> None:
    """The inverse is a list as long as the largest id: a damaged file must not allocate terabytes."""
    manifest = load_bundle(marian_bundle).manifest
    bundle = shutil.copytree(marian_bundle, tmp_path / "bundle")
    vocab_file = bundle / manifest.tokenizer.source.vocab
    vocab = json.loads(vocab_file.read_text(encoding="utf-8"))
    vocab["▁damaged"] = bad_id
    vocab_file.write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(BundleError, match="every id must be an integer"):
        Tokenizer.from_files(bundle, manifest.tokenizer, manifest.special_tokens)


def test_step_log_probabilities_match_transformers(family: tuple[Path, Path, str, str], hf_corpus: Path) -> None:
    """The ONNX decoder step, along its own greedy path, against transformers' teacher-forced model
    with its generation config's logits processing (banned tokens, renormalisation)."""
    hf_dir, bundle_dir, source, target = family
    bundle = load_bundle(bundle_dir)
    m = bundle.manifest
    tokenizer = Tokenizer.from_bundle(bundle)
    ids = tokenizer.encode_batch(sentences(hf_corpus, 8), prefix=source_prefix(m, source, target))
    src = np.full((len(ids), max(map(len, ids))), m.special_tokens.pad, dtype=np.int64)
    for i, row in enumerate(ids):
        src[i, : len(row)] = row
    greedy = OnnxGreedy(
        *bundle.graph_paths("fp32"),
        eos_id=m.special_tokens.eos,
        pad_id=m.special_tokens.pad,
        bos_id=m.special_tokens.bos,
    )
    run = greedy.decode(src, [20] * len(ids))
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval()
    decoder_in = np.concatenate([np.full((len(ids), 1), m.special_tokens.bos), run.tokens[:, :-1]], axis=1)
    with torch.no_grad():
        logits = model(
            input_ids=torch.from_numpy(src),
            attention_mask=torch.from_numpy(src != m.special_tokens.pad).long(),
            decoder_input_ids=torch.from_numpy(decoder_in),
        ).logits
    log_probs = logits.log_softmax(-1)
    if m.decoding.banned_ids:
        log_probs[..., m.decoding.banned_ids] = float("-inf")
        if m.decoding.renormalize:
            log_probs = log_probs.log_softmax(-1)
    expected = log_probs.numpy()[run.alive]
    ours = run.log_probs[run.alive][:, : expected.shape[-1]]
    finite = np.isfinite(expected)
    assert np.array_equal(finite, np.isfinite(ours))
    assert np.abs(ours[finite] - expected[finite]).max() <= 1e-4


def test_a_ban_before_log_softmax_is_folded_into_the_projection_s_bias(marian_bundle: Path) -> None:
    """Marian's renormalised ban on its padding token costs the step no vocabulary-sized addition of
    its own: the logits that LogSoftmax reads come from the projection, whose bias is the step's only
    vocabulary-sized constant, with -inf at the banned token."""
    import onnx
    from onnx import numpy_helper

    bundle = load_bundle(marian_bundle)
    graph = onnx.load(str(marian_bundle / "decoder.onnx")).graph
    vocab = bundle.manifest.dimensions.vocab_size
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    constants |= {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in graph.node if n.op_type == "Constant"}
    sized = {name: value for name, value in constants.items() if value.shape == (vocab,)}
    (log_softmax,) = [n for n in graph.node if n.op_type == "LogSoftmax"]
    (projection,) = [n for n in graph.node if log_softmax.input[0] in n.output]
    assert projection.op_type in ("Gemm", "MatMul", "Add"), projection.op_type
    (bias,) = [sized[name] for name in projection.input if name in sized]
    assert len(sized) == 1, sorted(sized)
    banned = bundle.manifest.decoding.banned_ids
    assert np.isneginf(bias[banned]).all() and np.isfinite(np.delete(bias, banned)).all()


def test_beam_search_gives_transformers_generate_output(family: tuple[Path, Path, str, str], hf_corpus: Path) -> None:
    """Beam 4, early_stopping=True, max_new_tokens = our max_length: the same translations and scores."""
    hf_dir, bundle_dir, source, target = family
    texts = sentences(hf_corpus, 24) + ONE_SENTENCE
    tokenizer = hf_tokenizer(hf_dir, source)
    manifest = load_bundle(bundle_dir).manifest
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        out = model.generate(
            **tokenizer([hf_text(t, manifest, target) for t in texts], return_tensors="pt", padding=True),
            num_beams=4,
            early_stopping=True,
            max_new_tokens=MAX_NEW_TOKENS,
            output_scores=True,
            return_dict_in_generate=True,
            **generate_kwargs(tokenizer, target),
        )
    expected = tokenizer.batch_decode(out.sequences, skip_special_tokens=True)
    translator = Translator(TranslatorConfig(model_dir=bundle_dir, provider="cpu", variant="fp32"))
    options = TranslationOptions(
        source_language=source,
        target_language=target,
        beam_size=4,
        max_length=MAX_NEW_TOKENS,
        max_consecutive_repeats=0,  # transformers has no such guard
    )
    results = translator.translate_batch(texts, options).results
    assert [r.text for r in results] == expected
    scores = [r.hypotheses[0].normalized_score for r in results]
    assert scores == pytest.approx(out.sequences_scores.tolist(), abs=1e-4)
    assert [r.text for r in translator.translate_batch(UNREADABLE, options).results] == UNREADABLE


def test_int8_variant_translates(marian_bundle: Path, hf_corpus: Path) -> None:
    translator = Translator(TranslatorConfig(model_dir=marian_bundle, provider="cpu", variant="int8"))
    results = translator.translate_batch(sentences(hf_corpus, 4)).results
    assert all(r.text and r.output_tokens > 0 for r in results)


def test_a_multilingual_bundle_is_served_over_http(nllb_bundle: Path, tmp_path: Path) -> None:
    with LiveService({"MT_MODEL_DIR": str(nllb_bundle), "MT_STREAMS": "1"}, tmp_path / "service.log") as service:
        client = httpx.Client(base_url=service.url, timeout=60)
        body = {"text": ["A dog runs.", "Two girls play."], "source_lang": "en", "target_lang": "deu_Latn"}
        by_code = client.post("/v1/translate", json={**body, "target_lang": "de"}).json()
        extras = {"num_hypotheses": 2, "beam_size": 4, "return_alignments": True}
        by_model_code = client.post("/v1/translate", json={**body, **extras}).json()
        assert [t["text"] for t in by_code["translations"]] == [t["text"] for t in by_model_code["translations"]]
        first = by_model_code["translations"][0]
        assert len(first["alternatives"]) == 1 and first["alignment"]["word_alignment"]
        assert "deu_Latn" not in first["text"] and "deu_Latn" not in first["alignment"]["target_tokens"]
        back = client.post("/v1/translate", json={"text": "Ein Hund.", "source_lang": "de", "target_lang": "en"})
        assert back.status_code == 200
        wrong = client.post("/v1/translate", json={**body, "target_lang": "fr"})
        assert wrong.status_code == 400 and wrong.json()["error"]["type"] == "unsupported_language"
        unnamed = client.post("/v1/translate", json={"text": "A dog runs in the park.", "target_lang": "de"})
        assert unnamed.json()["translations"][0]["detected_language"]["language"] == "en"
        model = client.get("/v1/models").json()["models"][0]
        assert [lang["model_code"] for lang in model["target_languages"]] == ["eng_Latn", "deu_Latn"]
        languages = {lang["code"]: lang["targets"] for lang in client.get("/languages").json()}
        assert languages == {"en": ["de"], "de": ["en"]}


def test_unsupported_checkpoints_fail_clearly_and_write_nothing(
    tiny_marian: Path, tiny_marian_multi: Path, tiny_nllb: Path, tmp_path: Path
) -> None:
    bart = tmp_path / "bart"
    transformers.BartForConditionalGeneration(
        transformers.BartConfig(
            vocab_size=50,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
        )
    ).save_pretrained(bart)
    no_vocab = tmp_path / "no-vocab"
    shutil.copytree(tiny_marian, no_vocab)
    (no_vocab / "vocab.json").unlink()
    cases = [
        (bart, {}, "architecture 'bart' is not supported; supported: marian"),
        (no_vocab, {"source_language": "en", "target_language": "de"}, "tokenizer"),
        (tiny_marian, {}, "does not record its source languages; pass --source-lang"),
        (tiny_marian_multi, {"target_language": "de"}, "does not record its source languages; pass --source-lang"),
        (tiny_nllb, {"target_language": "xx"}, "the model has no language ['xx']"),
    ]
    for i, (hf_dir, kwargs, message) in enumerate(cases):
        out = tmp_path / f"out{i}"
        with pytest.raises(ExportError, match=message.replace("[", r"\[").replace("]", r"\]")):
            convert(hf_dir, out, **kwargs)
        assert not out.exists()


def test_the_generation_config_s_settings_are_honoured(tiny_marian: Path, tmp_path: Path) -> None:
    config = json.loads((tiny_marian / "generation_config.json").read_text())
    edited = tmp_path / "edited"
    shutil.copytree(tiny_marian, edited)
    config.update(num_beams=6, max_length=33)
    del config["forced_eos_token_id"], config["bad_words_ids"]
    (edited / "generation_config.json").write_text(json.dumps(config))
    decoding = load_bundle(
        convert(edited, tmp_path / "b", source_language="en", target_language="de")
    ).manifest.decoding
    assert (decoding.beam_size, decoding.max_length, decoding.forced_eos, decoding.banned_ids) == (6, 32, "off", [])
