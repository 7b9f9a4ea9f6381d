"""``--help`` of ``python -m model.train`` and ``python -m model.evaluate``: every option and its
default under the program's real name, and for train every config key with its default."""

from __future__ import annotations

from dataclasses import fields

from cli_help import assert_documents_every_option, compact, run_help

from model.config import TrainConfig
from model.evaluate import build_parser as evaluate_parser
from model.train import build_parser as train_parser
from model.transformer import ModelConfig


def as_override(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_train_help_documents_options_and_every_config_key() -> None:
    text = run_help("model.train")
    assert_documents_every_option(train_parser(), text)
    lines = text.splitlines()
    for f in fields(TrainConfig):
        if f.name == "model":
            continue
        assert f"  {f.name}={as_override(f.default)}" in lines
        assert compact(f.metadata["help"]) in compact(text), f.name
    for f in fields(ModelConfig):
        if f.name != "vocab_size":
            assert f"  model.{f.name}={as_override(f.default)}" in lines


def test_evaluate_help_documents_every_option() -> None:
    assert_documents_every_option(evaluate_parser(), run_help("model.evaluate"))
