"""Fine-tuning a 3-way NLI cross-encoder on the CPU, with a wall-clock budget.

Speed levers for a small shared CPU: pre-tokenised pairs, dynamic padding with length-bucketed
batches, frozen word embeddings (optional), evaluation on a fixed dev slice. The best checkpoint
(by 3-way accuracy on the natural dev pairs) is saved at every improving evaluation, so a killed
run loses at most one evaluation interval.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import platform
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from middleware.training import ENTAILMENT
from middleware.training.verifier_data import NOT_ENTAILMENT, Pair
from middleware.training.metrics import dev_metrics
from middleware.types import NLI_HEAD_LABELS

log = logging.getLogger(__name__)



@dataclass
class TrainConfig:
    base: str
    out: Path
    seed: int = 13  # dev split, initialisation
    shuffle_seed: int | None = None  # batch order (default: seed); change it to continue a run on fresh batches
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup: float = 0.06
    batch_size: int = 32
    max_length: int = 128
    epochs: float = 2.0
    max_minutes: float = 70.0
    eval_every: int = 200
    patience: int = 5
    threads: int = 2
    freeze_embeddings: bool = True
    eval_batch_size: int = 64
    bucket_span: int = 50  # batches per length-sorted shuffle chunk
    alpha: float = 0.0  # weight of the teacher's soft labels: loss = (1 - alpha) * hard + alpha * soft
    long_sources: tuple[str, ...] = ()  # document-level sources, encoded up to long_max_length
    long_max_length: int = 384
    device: str = "cpu"  # "cuda" trains on a GPU with bf16 autocast
    extra: dict = field(default_factory=dict)  # data description, hashes (written to meta)


def load_base(base: str, labels: Sequence[str] = NLI_HEAD_LABELS):
    """Tokenizer and sequence-classification model from a hub id or local checkpoint; the
    packaged MiniLM encoder gets a fresh classification head."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={name: i for i, name in enumerate(labels)},
        ignore_mismatched_sizes=True,
    )
    return tokenizer, model


def encode(
    tokenizer, pairs: Sequence[Pair], max_length: int, long_sources: Sequence[str] = (), long_max_length: int = 384
) -> tuple[list[list[int]], list[list[int]] | None]:
    """Token ids of (premise, hypothesis), truncating the longer side first; pairs of
    ``long_sources`` (document-level premises) get ``long_max_length`` tokens."""
    ids: list[list[int]] = [[] for _ in pairs]
    types: list[list[int]] | None = [[] for _ in pairs]
    groups = {
        max_length: [i for i, p in enumerate(pairs) if p.source not in long_sources],
        long_max_length: [i for i, p in enumerate(pairs) if p.source in long_sources],
    }
    for length, index in groups.items():
        if not index:
            continue
        enc = tokenizer(
            [pairs[i].premise for i in index],
            [pairs[i].hypothesis for i in index],
            truncation="longest_first",
            max_length=length,
        )
        part_types = enc.get("token_type_ids")
        for row, i in enumerate(index):
            ids[i] = enc["input_ids"][row]
            if part_types is None:
                types = None
            elif types is not None:
                types[i] = part_types[row]
    return ids, types


def nli_loss(
    logits: torch.Tensor, labels: torch.Tensor, soft: torch.Tensor | None = None, alpha: float = 0.0
) -> torch.Tensor:
    """Hard loss: cross-entropy for 3-way targets; for two-class ``not_entailment`` targets,
    -log(1 - P(entailment)) computed as -logsumexp of the other log-probabilities.

    With teacher probabilities ``soft`` (rows of NaN where the teacher has none) and
    ``alpha`` > 0, each row with a teacher gets ``(1 - alpha) * hard + alpha * soft_loss``:
    cross-entropy against the teacher's 3-way distribution on 3-way rows, and binary
    cross-entropy against the teacher's P(entailment) on two-class rows (the teacher learnt
    only P(entailment) there, so its neutral/contradiction split carries no signal).
    """
    logp = F.log_softmax(logits.float(), dim=-1)
    three = labels >= 0
    losses = torch.zeros_like(labels, dtype=logp.dtype)
    if three.any():
        losses[three] = -logp[three].gather(1, labels[three].unsqueeze(1)).squeeze(1)
    two = ~three
    log_not = torch.logsumexp(torch.cat([logp[:, :ENTAILMENT], logp[:, ENTAILMENT + 1 :]], dim=1), dim=1)
    if two.any():
        losses[two] = -log_not[two]
    if soft is not None and alpha > 0:
        taught = ~torch.isnan(soft[:, 0])
        soft_losses = torch.zeros_like(losses)
        rows3 = taught & three
        if rows3.any():
            soft_losses[rows3] = -(soft[rows3] * logp[rows3]).sum(dim=1)
        rows2 = taught & two
        if rows2.any():
            p_ent = soft[rows2, ENTAILMENT]
            soft_losses[rows2] = -(p_ent * logp[rows2, ENTAILMENT] + (1 - p_ent) * log_not[rows2])
        losses = torch.where(taught, (1 - alpha) * losses + alpha * soft_losses, losses)
    return losses.mean()


class Batches:
    """Length-bucketed batches over pre-tokenised pairs: shuffle, sort chunks of
    ``bucket_span`` batches by length, shuffle the batches."""

    def __init__(self, ids, types, labels, batch_size, pad_id, rng, bucket_span=50, soft=None):
        self.ids, self.types, self.labels, self.soft = ids, types, labels, soft
        self.batch_size, self.pad_id, self.rng, self.span = batch_size, pad_id, rng, bucket_span

    def epoch(self) -> list[list[int]]:
        order = list(range(len(self.ids)))
        self.rng.shuffle(order)
        chunk = self.batch_size * self.span
        batches: list[list[int]] = []
        for start in range(0, len(order), chunk):
            part = sorted(order[start : start + chunk], key=lambda i: len(self.ids[i]))
            batches.extend(part[i : i + self.batch_size] for i in range(0, len(part), self.batch_size))
        self.rng.shuffle(batches)
        return batches

    def tensors(self, index: Sequence[int]) -> dict[str, torch.Tensor]:
        batch = collate(
            [self.ids[i] for i in index], [self.types[i] for i in index] if self.types else None, self.pad_id
        ) | {"labels": torch.tensor([self.labels[i] for i in index])}
        if self.soft is not None:
            batch["soft"] = torch.tensor([self.soft[i] for i in index], dtype=torch.float32)
        return batch


def collate(ids, types, pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    token_types = torch.zeros((len(ids), width), dtype=torch.long)
    for row, seq in enumerate(ids):
        input_ids[row, : len(seq)] = torch.tensor(seq)
        mask[row, : len(seq)] = 1
        if types:
            token_types[row, : len(seq)] = torch.tensor(types[row])
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": token_types}


@torch.inference_mode()
def predict(
    model,
    tokenizer,
    pairs: Sequence[Pair],
    max_length: int,
    batch_size: int = 64,
    long_sources: Sequence[str] = (),
    long_max_length: int = 384,
    device: str = "cpu",
) -> np.ndarray:
    """Class probabilities (n, 3) in ``NLI_HEAD_LABELS`` order, batched by length."""
    model.eval()
    ids, types = encode(tokenizer, pairs, max_length, long_sources, long_max_length)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    probs = np.zeros((len(ids), len(NLI_HEAD_LABELS)), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        batch = collate([ids[i] for i in index], [types[i] for i in index] if types else None, tokenizer.pad_token_id)
        with _autocast(device):
            logits = model(**{k: v.to(device) for k, v in batch.items()}).logits
        probs[index] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
    return probs


def _autocast(device: str):
    """bf16 autocast on CUDA; a no-op context on the CPU."""
    if device.startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def check_device(device: str) -> str:
    """The torch device to train on; a clear error when CUDA is asked for and missing."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"--device {device}: this torch build ({torch.__version__}) sees no CUDA device")
    if not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"unknown device {device!r} (cpu, cuda or cuda:N)")
    return device


def train(
    config: TrainConfig,
    train_pairs: Sequence[Pair],
    dev_pairs: Sequence[Pair],
    on_eval: Callable[[dict], None] | None = None,
) -> dict:
    """Fine-tune, evaluating every ``eval_every`` steps and at the end; keep the best
    checkpoint in ``config.out / 'checkpoint'`` and the run record in ``train_meta.json``."""
    started = time.monotonic()
    random.seed(config.seed)
    np.random.seed(config.seed)
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    config.out.mkdir(parents=True, exist_ok=True)
    device = check_device(config.device)
    tokenizer, model = load_base(config.base)
    model.to(device)
    if config.freeze_embeddings:
        model.base_model.embeddings.word_embeddings.weight.requires_grad_(False)
    ids, types = encode(tokenizer, train_pairs, config.max_length, config.long_sources, config.long_max_length)
    nan = (float("nan"),) * len(NLI_HEAD_LABELS)
    soft = [p.soft or nan for p in train_pairs] if config.alpha > 0 else None
    batches = Batches(
        ids,
        types,
        [p.label for p in train_pairs],
        config.batch_size,
        tokenizer.pad_token_id,
        random.Random(config.seed if config.shuffle_seed is None else config.shuffle_seed),
        config.bucket_span,
        soft,
    )
    steps_per_epoch = math.ceil(len(ids) / config.batch_size)
    planned = max(1, int(config.epochs * steps_per_epoch))
    horizon = [planned]
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, horizon[0], config.warmup))
    meta = _meta(config, train_pairs, dev_pairs, steps_per_epoch)
    best = -1.0
    stale = 0
    step = 0
    seen = 0
    budget_s = config.max_minutes * 60
    train_started = time.monotonic()
    stop = ""
    while not stop:
        for index in batches.epoch():
            model.train()
            batch = {k: v.to(device) for k, v in batches.tensors(index).items()}
            labels = batch.pop("labels")
            teacher = batch.pop("soft", None)
            with _autocast(device):
                logits = model(**batch).logits
            loss = nli_loss(logits, labels, teacher, config.alpha)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            seen += len(index)
            if step == 30 or step % config.eval_every == 0:  # fit the LR schedule to the time budget
                horizon[0] = _replan(
                    step, planned, time.monotonic() - train_started, budget_s - (time.monotonic() - started)
                )
                meta["schedule_horizon"].append({"step": step, "horizon": horizon[0]})
            if step % 20 == 0:
                log.info(
                    "step %d loss %.4f lr %.2e pairs/s %.1f",
                    step,
                    loss.item(),
                    scheduler.get_last_lr()[0],
                    seen / (time.monotonic() - train_started),
                )
            out_of_time = time.monotonic() - started > budget_s
            done = step >= horizon[0]
            if step % config.eval_every == 0 or out_of_time or done:
                record = _evaluate(model, tokenizer, dev_pairs, config, step, seen, train_started)
                meta["evals"].append(record)
                if record["acc3_natural"] > best:
                    best, stale = record["acc3_natural"], 0
                    meta["best"] = record
                    model.save_pretrained(config.out / "checkpoint")
                    tokenizer.save_pretrained(config.out / "checkpoint")
                else:
                    stale += 1
                meta["train_seconds"] = round(time.monotonic() - started, 1)
                _write_meta(config.out, meta)
                if on_eval:
                    on_eval(record)
                stop = (
                    "time budget"
                    if out_of_time
                    else "schedule done"
                    if done
                    else "early stopping"
                    if stale >= config.patience
                    else ""
                )
                if stop:
                    break
    meta["stopped"] = stop
    meta["steps"] = step
    meta["pairs_seen"] = seen
    meta["epochs_done"] = round(seen / max(1, len(ids)), 3)
    meta["train_seconds"] = round(time.monotonic() - started, 1)
    _write_meta(config.out, meta)
    return meta


def _replan(step: int, planned: int, elapsed_s: float, remaining_s: float) -> int:
    """Steps the LR schedule should end at: the planned epochs, or fewer when the measured
    rate (evaluations included) will not reach them within the time budget. A loaded machine
    shortens the schedule, so a budgeted run depends on machine load."""
    rate = step / max(elapsed_s, 1e-6)
    fit = step + int(rate * max(0.0, remaining_s) * 0.95)
    horizon = max(step + 1, min(planned, fit))
    log.info("%.3f steps/s: LR schedule ends at step %d", rate, horizon)
    return horizon


def _lr_factor(step: int, horizon: int, warmup: float) -> float:
    warm = max(1, int(horizon * warmup))
    if step < warm:
        return (step + 1) / warm
    return max(0.0, (horizon - step) / max(1, horizon - warm))


def _evaluate(model, tokenizer, dev_pairs, config, step, seen, train_started) -> dict:
    t0 = time.monotonic()
    probs = predict(
        model,
        tokenizer,
        dev_pairs,
        config.max_length,
        config.eval_batch_size,
        config.long_sources,
        config.long_max_length,
        config.device,
    )
    record = {"step": step, "pairs_seen": seen, "minutes": round((time.monotonic() - train_started) / 60, 2)}
    record |= {k: round(v, 4) for k, v in dev_metrics(dev_pairs, probs).items()}
    record["eval_seconds"] = round(time.monotonic() - t0, 1)
    log.info("eval %s", json.dumps(record))
    return record


def _meta(config: TrainConfig, train_pairs, dev_pairs, steps_per_epoch) -> dict:
    hyper = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items() if k != "extra"}
    taught = sum(1 for p in train_pairs if p.soft is not None)
    counts: dict[str, dict[str, int]] = {}
    for name, pairs in (("train", train_pairs), ("dev", dev_pairs)):
        for p in pairs:
            label = "not_entailment" if p.label == NOT_ENTAILMENT else NLI_HEAD_LABELS[p.label]
            counts.setdefault(name, {}).setdefault(p.source, {}).setdefault(label, 0)
            counts[name][p.source][label] += 1
    return {
        "labels": list(NLI_HEAD_LABELS),
        "hyper_parameters": hyper,
        "data": config.extra,
        "counts": counts,
        "steps_per_epoch": steps_per_epoch,
        "teacher_coverage": {"train_pairs_with_soft_labels": taught, "train_pairs": len(train_pairs)},
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
        },
        "evals": [],
        "schedule_horizon": [],
    }


def _write_meta(out: Path, meta: dict) -> None:
    tmp = out / "train_meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=False), encoding="utf-8")
    tmp.replace(out / "train_meta.json")
