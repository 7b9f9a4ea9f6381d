"""Offline training: ``python -m model.train --config configs/en-de.toml [key=value ...]``.

Token-based length-bucketed batches, label-smoothed cross-entropy, Adam with linear warm-up and
inverse-square-root decay, gradient clipping and accumulation, periodic validation (loss and BLEU),
best/last checkpoints with averaging, exact resume, and data parallelism under ``torchrun``
(gloo on CPU, nccl on CUDA).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import os
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from engine.cli import HelpFormatter, definition_list
from engine.tokenizer import PAD_ID, Tokenizer
from model.checkpoint import CheckpointError, average_checkpoints, read_checkpoint, save_checkpoint
from model.config import TrainConfig, config_keys, load_config, model_keys
from model.data import CorpusError, ParallelData, collate, corpus_paths, make_batches, read_parallel
from model.decoding import DecodingOptions
from model.evaluate import score_translations, translate_texts
from model.tokenizer import train_sentencepiece
from model.transformer import ModelConfig, build_model, count_parameters

log = logging.getLogger("model.train")


# Model settings a resumed run may change: they regularise training, the weights mean the same.
RESUMABLE_CHANGES = frozenset({"dropout", "attention_dropout", "activation_dropout"})


class RunError(ValueError):
    """The run cannot start or go on as configured; the message says why and what to change."""


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Peak ``lr`` after ``warmup_steps`` of linear warm-up, then decay as 1/sqrt(step).

    With ``cooldown_steps`` the rate also falls linearly to 0 at ``max_steps``: inverse-sqrt alone
    leaves it high, and annealing it at the end is worth BLEU for free.
    """
    step = max(step, 1)
    rate = cfg.lr * min(step / cfg.warmup_steps, math.sqrt(cfg.warmup_steps / step))
    if cfg.cooldown_steps:
        rate *= min(1.0, max(cfg.max_steps - step, 0) / cfg.cooldown_steps)
    return rate


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> tuple[torch.Tensor, int]:
    """Summed label-smoothed cross-entropy over non-pad targets, and the number of those targets."""
    log_probs = logits.float().log_softmax(dim=-1).view(-1, logits.size(-1))
    target = target.reshape(-1)
    keep = target != PAD_ID
    nll = -log_probs.gather(1, target[:, None]).squeeze(1)
    uniform = -log_probs.mean(dim=-1)
    loss = ((1.0 - smoothing) * nll + smoothing * uniform)[keep].sum()
    return loss, int(keep.sum())


class Trainer:
    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.out_dir = Path(cfg.out_dir)
        self.rank = int(os.environ.get("RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        self.device = torch.device(
            cfg.device if cfg.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        )
        if self.world_size > 1:
            if self.device.type == "cuda":
                self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
                torch.cuda.set_device(self.device)
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.is_main = self.rank == 0

        self.tokenizer = self._tokenizer()
        data_dir = Path(cfg.data_dir)
        self.train_data = ParallelData.load(
            *corpus_paths(data_dir, "train", cfg.src_lang, cfg.tgt_lang), self.tokenizer, max_len=cfg.max_len
        )
        self.val_data = ParallelData.load(
            *corpus_paths(data_dir, "val", cfg.src_lang, cfg.tgt_lang), self.tokenizer, max_len=cfg.max_len
        )
        val_texts, val_refs = read_parallel(*corpus_paths(data_dir, "val", cfg.src_lang, cfg.tgt_lang))
        self.val_texts, self.val_refs = val_texts[: cfg.val_bleu_sentences], val_refs[: cfg.val_bleu_sentences]

        torch.manual_seed(cfg.seed)
        self.model = build_model(ModelConfig(vocab_size=self.tokenizer.vocab_size, **cfg.model)).to(self.device)
        self._check_batches()
        self.ddp = DistributedDataParallel(self.model) if self.world_size > 1 else None
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
        self.step, self.epoch, self.batch_in_epoch = 0, 0, 0
        self.best_bleu = -1.0
        self.history: list[dict] = []
        self._resume()

    def _tokenizer(self) -> Tokenizer:
        spm_path = self.out_dir / "spm.model"
        if self.is_main and not spm_path.exists():
            src, tgt = read_parallel(
                *corpus_paths(Path(self.cfg.data_dir), "train", self.cfg.src_lang, self.cfg.tgt_lang)
            )
            try:
                train_sentencepiece(src + tgt, spm_path, vocab_size=self.cfg.vocab_size)
            except RuntimeError as e:  # e.g. every line blank
                raise CorpusError(
                    f"sentencepiece cannot train on the training corpus of {self.cfg.data_dir}: {e}"
                ) from e
        if self.world_size > 1:
            dist.barrier()
        return Tokenizer(spm_path)

    def _resume(self) -> None:
        last = self.out_dir / "checkpoints" / "last.pt"
        if not last.exists():
            return
        try:
            state = read_checkpoint(last)
        except CheckpointError as e:
            raise RunError(f"cannot resume: {e}") from e
        self._check_resumable(last, state)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.best_bleu, self.history = state["best_bleu"], state["history"]
        random.setstate(state["rng"]["python"])
        torch.set_rng_state(state["rng"]["torch"])
        if "cuda" in state["rng"] and self.device.type == "cuda":  # GPU dropout draws from the device generator
            torch.cuda.set_rng_state(state["rng"]["cuda"], self.device)
        log.info("resumed from %s at step %d (epoch %d, batch %d)", last, self.step, self.epoch, self.batch_in_epoch)

    def _check_resumable(self, last: Path, state: dict) -> None:
        """The run in ``out_dir`` must be this config's model with this tokenizer: weights of another
        shape fail to load, and those of another activation or normalisation would load and train on
        as a different model."""
        saved_model, model = state["model_config"], self.model.config.to_dict()
        changed = [
            f"model.{k}: {saved_model.get(k)!r} -> {v!r}"
            for k, v in model.items()
            if saved_model.get(k) != v and k not in RESUMABLE_CHANGES
        ]
        saved_vocab = (state.get("train_config") or {}).get("vocab_size", self.cfg.vocab_size)
        if saved_vocab != self.cfg.vocab_size:
            changed.append(f"vocab_size: {saved_vocab} -> {self.cfg.vocab_size}")
        if state["spm_sha256"] != hashlib.sha256(self.tokenizer.model_path.read_bytes()).hexdigest():
            changed.append(f"{self.tokenizer.model_path} is not the sentencepiece model the run was trained with")
        if changed:
            raise RunError(
                f"{last} was trained with other settings ({'; '.join(changed)}): resume with the run's own settings, "
                "or give a new out_dir to start another run"
            )

    def _check_batches(self) -> None:
        """An epoch must hold one update's batches, or every epoch would end before its first step."""
        batches = len(make_batches(self.train_data, max_tokens=self.cfg.max_tokens, seed=self.cfg.seed, epoch=0))
        per_update = self.cfg.accum_steps * self.world_size
        if batches < per_update:
            raise RunError(
                f"the training data makes {batches} batches of max_tokens={self.cfg.max_tokens}, fewer than the "
                f"{per_update} of one update (accum_steps x processes): lower accum_steps or max_tokens"
            )

    def _save(self, name: str, **extra: object) -> Path:
        path = self.out_dir / "checkpoints" / name
        save_checkpoint(
            path, self.model, self.tokenizer.model_path.read_bytes(), train_config=asdict(self.cfg), **extra
        )
        return path

    def _save_resumable(self) -> None:
        rng = {"python": random.getstate(), "torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.device)
        extra = {"optimizer": self.optimizer.state_dict(), "step": self.step, "epoch": self.epoch}
        extra |= {
            "batch_in_epoch": self.batch_in_epoch,
            "best_bleu": self.best_bleu,
            "history": self.history,
            "rng": rng,
        }
        self._save("last.pt", **extra)
        self._save(f"step_{self.step:07d}.pt", step=self.step)
        stale = sorted((self.out_dir / "checkpoints").glob("step_*.pt"))[: -self.cfg.keep_last]
        for path in stale:
            path.unlink()

    @torch.no_grad()
    def validate(self) -> dict:
        self.model.eval()
        total, count = 0.0, 0
        for batch in make_batches(self.val_data, max_tokens=self.cfg.max_tokens, seed=0, epoch=0):
            src, tgt_in, tgt_out = (t.to(self.device) for t in collate(self.val_data, batch))
            loss, n = label_smoothed_loss(self.model(src, tgt_in), tgt_out, 0.0)
            total, count = total + float(loss), count + n
        options = DecodingOptions(beam_size=self.cfg.val_beam_size)
        hyps = translate_texts(self.model, self.tokenizer, self.val_texts, options, device=self.device)
        bleu = score_translations(hyps, self.val_refs).bleu
        self.model.train()
        return {"step": self.step, "epoch": self.epoch, "val_nll": total / count, "val_bleu": bleu}

    def train_step(self, batches: list[list[int]]) -> tuple[float, int]:
        """One optimizer update over ``batches`` (gradient accumulation); returns (loss sum, tokens)."""
        module = self.ddp or self.model
        loss_sum, tokens = 0.0, 0
        # Normalise per token over the whole update so accumulation equals one big batch.
        update_tokens = max(1, sum(len(self.train_data.tgt[j]) for b in batches for j in b))
        for i, batch in enumerate(batches):
            src, tgt_in, tgt_out = (t.to(self.device) for t in collate(self.train_data, batch))
            loss, n = label_smoothed_loss(module(src, tgt_in), tgt_out, self.cfg.label_smoothing)
            scaled = loss / update_tokens
            if self.ddp is not None and i < len(batches) - 1:
                with self.ddp.no_sync():
                    scaled.backward()
            else:
                scaled.backward()
            loss_sum, tokens = loss_sum + loss.item(), tokens + n
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
        self.step += 1
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate(self.step, self.cfg)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, tokens

    def run(self) -> None:
        cfg = self.cfg
        if self.is_main:
            n_tokens = self.train_data.num_tokens()
            log.info(
                "model: %d parameters; train: %d pairs, %d tokens",
                count_parameters(self.model),
                len(self.train_data),
                n_tokens,
            )
        self.model.train()
        deadline = time.monotonic() + cfg.max_minutes * 60 if cfg.max_minutes else math.inf
        progress = tqdm(
            total=cfg.max_steps, initial=self.step, disable=not self.is_main or not cfg.progress, dynamic_ncols=True
        )
        window_tokens, window_start = 0, time.monotonic()
        while self.step < cfg.max_steps and self.epoch < cfg.max_epochs and time.monotonic() < deadline:
            epoch_batches = make_batches(self.train_data, max_tokens=cfg.max_tokens, seed=cfg.seed, epoch=self.epoch)
            per_update = cfg.accum_steps * self.world_size
            while self.batch_in_epoch + per_update <= len(epoch_batches):
                group = epoch_batches[self.batch_in_epoch : self.batch_in_epoch + per_update]
                self.batch_in_epoch += per_update
                loss, tokens = self.train_step(group[self.rank :: self.world_size])
                window_tokens += tokens * self.world_size
                if self.is_main:
                    elapsed = time.monotonic() - window_start
                    progress.update(1)
                    progress.set_postfix(
                        epoch=self.epoch,
                        loss=f"{loss / max(tokens, 1):.3f}",
                        lr=f"{learning_rate(self.step, cfg):.2e}",
                        tok_s=f"{window_tokens / max(elapsed, 1e-9):.0f}",
                    )
                if self.step % cfg.log_every == 0 and self.is_main:
                    log.info(
                        "step %d epoch %d loss %.4f lr %.2e tok/s %.0f",
                        self.step,
                        self.epoch,
                        loss / max(tokens, 1),
                        learning_rate(self.step, cfg),
                        window_tokens / max(time.monotonic() - window_start, 1e-9),
                    )
                    window_tokens, window_start = 0, time.monotonic()
                if self.step % cfg.validate_every == 0:
                    self._checkpoint()
                if self.step >= cfg.max_steps or time.monotonic() >= deadline:
                    break
            else:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        progress.close()
        if self.step % cfg.validate_every:
            self._checkpoint()
        if self.is_main:
            self._average()
        if self.world_size > 1:
            dist.destroy_process_group()

    def _checkpoint(self) -> None:
        if self.is_main:
            metrics = self.validate()
            self.history.append(metrics)
            log.info("validation: %s", metrics)
            if metrics["val_bleu"] > self.best_bleu:
                self.best_bleu = metrics["val_bleu"]
                self._save("best.pt", metrics=metrics)
            self._save_resumable()
        if self.world_size > 1:
            dist.barrier()

    def _average(self) -> None:
        paths = sorted((self.out_dir / "checkpoints").glob("step_*.pt"))[-self.cfg.average_last :]
        if not paths:  # stopped (max_minutes) before its first step
            log.info("no step checkpoints to average")
            return
        self.model.load_state_dict(average_checkpoints(paths))
        metrics = self.validate()
        log.info("average of %d checkpoints: %s", len(paths), metrics)
        self._save("averaged.pt", metrics=metrics, averaged=[p.name for p in paths])


def build_parser() -> argparse.ArgumentParser:
    epilog = "\n\n".join(
        [
            definition_list(
                "config keys (in the --config file or as key=value; a key it leaves out has the default)", config_keys()
            ),
            definition_list("[model] keys (ModelConfig in model/transformer.py describes them)", model_keys()),
        ]
    )
    parser = argparse.ArgumentParser(
        prog="python -m model.train", description=__doc__, epilog=epilog, formatter_class=HelpFormatter
    )
    parser.add_argument("--config", required=True, type=Path, help="TOML training config, e.g. configs/en-de.toml")
    parser.add_argument(
        "overrides",
        nargs="*",
        default=[],
        help="key=value settings replacing the config file's, e.g. max_steps=100 model.d_model=128 (default: none)",
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
        Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as e:  # ValueError includes a TOML syntax error
        parser.error(str(e))
    _log_to(Path(cfg.out_dir) / "train.log")
    log.info("config: %s", asdict(cfg))
    try:
        Trainer(cfg).run()
    except (CorpusError, RunError) as e:
        parser.error(str(e))
    except KeyboardInterrupt:
        # Checkpoints are replaced atomically, so the last one is whole whenever the interrupt came.
        log.error("interrupted: the same command resumes from the last checkpoint")
        sys.exit(130)


def _log_to(path: Path) -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        handlers=[logging.FileHandler(path), logging.StreamHandler()],
        force=True,  # a second run in the same process logs to its own out_dir
    )


if __name__ == "__main__":
    main()
