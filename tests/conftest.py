"""Shared fixtures: a tiny trained checkpoint and the bundle exported from it, made in seconds.

The model learns a synthetic word-for-word "translation" (a small lexicon, so its outputs are
varied and meaningful rather than degenerate) for a few dozen steps. torch is imported inside the
fixtures only, so that service tests which do not use them run without it. Both fixtures keep torch
on one thread (``export.parity.one_torch_thread``): tiny models are all overhead.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

# A small lexicon, source word = target word.
LEXICON_TEXT = """
a=ein the=der man=mann woman=frau dog=hund cat=katze child=kind girl=maedchen boy=junge red=rot blue=blau
green=gruen big=gross small=klein old=alt young=jung runs=rennt sits=sitzt plays=spielt walks=geht jumps=springt
on=auf in=im under=unter with=mit and=und park=park street=strasse house=haus water=wasser ball=ball car=auto
tree=baum
"""
LEXICON = dict(pair.split("=") for pair in LEXICON_TEXT.split())
EN = list(LEXICON)
SPLITS = {"train": 1200, "val": 64, "test_2016_flickr": 64}
MAX_POSITIONS = 128  # room for the 100-token sources of the dynamic-shape tests


def synthetic_pairs(n: int, rng: random.Random) -> list[tuple[str, str]]:
    pairs = []
    for _ in range(n):
        words = [rng.choice(EN) for _ in range(rng.randint(2, 9))]
        pairs.append((" ".join(words).capitalize() + ".", " ".join(LEXICON[w] for w in words).capitalize() + "."))
    return pairs


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory in the Multi30K layout: {train,val,test_2016_flickr}.{en,de}."""
    root = tmp_path_factory.mktemp("tiny_corpus")
    rng = random.Random(0)
    for split, n in SPLITS.items():
        pairs = synthetic_pairs(n, rng)
        (root / f"{split}.en").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        (root / f"{split}.de").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory, tiny_corpus: Path) -> Path:
    """A checkpoint (d_model 32, 2+2 layers, 150-piece vocabulary) trained for 60 steps."""
    import torch

    from engine.tokenizer import Tokenizer
    from export.parity import one_torch_thread
    from model.checkpoint import save_checkpoint
    from model.data import ParallelData, collate, make_batches, read_lines
    from model.tokenizer import train_sentencepiece
    from model.train import label_smoothed_loss
    from model.transformer import ModelConfig, build_model

    root = tmp_path_factory.mktemp("tiny_checkpoint")
    src, tgt = read_lines(tiny_corpus / "train.en"), read_lines(tiny_corpus / "train.de")
    tokenizer = Tokenizer(train_sentencepiece(src + tgt, root / "spm.model", vocab_size=150))
    data = ParallelData(tokenizer.encode_batch(src), tokenizer.encode_batch(tgt))

    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        max_positions=MAX_POSITIONS,
    )
    model = build_model(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batches = make_batches(data, max_tokens=768, seed=0, epoch=0)
    with one_torch_thread():
        for step in range(60):
            src_ids, tgt_in, tgt_out = collate(data, batches[step % len(batches)])
            loss, n = label_smoothed_loss(model(src_ids, tgt_in), tgt_out, 0.1)
            (loss / n).backward()
            optimizer.step()
            optimizer.zero_grad()
    path = root / "checkpoint.pt"
    save_checkpoint(
        path, model.eval(), tokenizer.model_path.read_bytes(), train_config={"src_lang": "en", "tgt_lang": "de"}
    )
    return path


@pytest.fixture(scope="session")
def tiny_bundle(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_corpus: Path) -> Path:
    """The bundle exported from ``tiny_checkpoint``: fp32 and int8, parity-checked on 64 sentences."""
    from export.pipeline import ExportConfig, export_bundle

    out = tmp_path_factory.mktemp("tiny_bundle") / "bundle"
    export_bundle(ExportConfig(checkpoint=tiny_checkpoint, out=out, int8=True, parity_data=tiny_corpus / "val.en"))
    return out


def relabelled_bundle(bundle: Path, out: Path, name: str, sources: list[str], targets: list[str]) -> Path:
    """A copy of ``bundle`` that declares another name and languages: the same weights, so its
    outputs are known, serving other pairs (what routing, pivoting and unloading are tested with)."""
    import json
    import shutil

    shutil.copytree(bundle, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["name"] = name
    manifest["languages"] = {
        "source": [{"code": code, "tokens": []} for code in sources],
        "target": [{"code": code, "tokens": []} for code in targets],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return out


def both_ways(bundle: Path, root: Path) -> Path:
    """``root`` holding ``bundle`` relabelled as en->de and as de->en: a repository of the two
    directions, as the shipped models are."""
    relabelled_bundle(bundle, root / "en-de", "tiny-en-de", ["en"], ["de"])
    relabelled_bundle(bundle, root / "de-en", "tiny-de-en", ["de"], ["en"])
    return root


@pytest.fixture(scope="session")
def model_repository(tmp_path_factory: pytest.TempPathFactory, tiny_bundle: Path) -> Path:
    """A repository of tiny bundles: en->de, de->en, fr->en, a many-to-many (cs, sk -> en, pl), and
    a bundle whose graph is corrupted (its manifest reads, its load fails)."""
    root = both_ways(tiny_bundle, tmp_path_factory.mktemp("repository"))
    relabelled_bundle(tiny_bundle, root / "fr-en", "tiny-fr-en", ["fr"], ["en"])
    relabelled_bundle(tiny_bundle, root / "many" / "bundle", "tiny-many", ["cs", "sk"], ["en", "pl"])
    broken = relabelled_bundle(tiny_bundle, root / "broken", "tiny-broken", ["it"], ["en"])
    (broken / "encoder.onnx").write_bytes(b"not an onnx graph")
    return root
