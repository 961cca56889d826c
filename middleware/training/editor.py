"""Fine-tune a T5-family editor on PURR-style instances with fusion-in-decoder input
(Izacard & Grave, 2021; PURR: T5 over 4 evidence snippets).

Each instance is encoded as up to ``max_evidence`` inputs 'statement: x evidence: e_i'
(missing snippets are fully masked), the encoder states of one instance are concatenated
along the sequence axis, and the decoder learns P(y | x, E) with teacher forcing. The result
is saved as a checkpoint (plus ``editor.json`` with the input template) and exported through
``onnx_models.export`` for the runtime, whose ``OnnxSeq2Seq.generate_fused`` decodes the
same way. Needs the ``train`` extra (torch, transformers); runs on CPU or CUDA.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from middleware.training.editor_data import read_lines
from middleware.revise.editors.seq2seq_editor import EDITOR_CONFIG, FID_TEMPLATE, fid_inputs

log = logging.getLogger(__name__)


@dataclass
class EditorTrainConfig:
    data: list[Path]
    base: str
    out: Path
    epochs: float = 3.0
    lr: float = 3e-4
    weight_decay: float = 0.01
    warmup: float = 0.05
    batch_size: int = 8
    grad_accum: int = 1
    max_evidence: int = 4
    max_length: int = 192
    max_target: int = 96
    dev_share: float = 0.1
    max_dev: int = 200
    device: str = "auto"
    precision: str = "fp32"
    max_minutes: float = 600.0
    seed: int = 13
    export: bool = True
    quantize: str | None = None
    template: str = FID_TEMPLATE
    threads: int | None = None
    log_every: int = 50
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Example:
    text: str  # corrupted statement
    target: str  # clean statement
    evidence: list[str]
    gold: list[int]


def load_examples(paths: Sequence[Path]) -> list[Example]:
    out = []
    for path in paths:
        for row in read_lines(path):
            if not isinstance(row.get("text"), str) or not isinstance(row.get("original"), str):
                raise ValueError(f"{path}: every line needs 'text' (corrupted) and 'original' (clean)")
            out.append(Example(row["text"], row["original"], list(row.get("evidence") or []), list(row.get("gold") or [])))
    return out


def split_dev(examples: list[Example], share: float, cap: int, seed: int) -> tuple[list[Example], list[Example]]:
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    size = min(cap, int(len(shuffled) * share)) if len(shuffled) > 1 else 0
    return shuffled[size:], shuffled[:size]


def choose_evidence(example: Example, n: int) -> list[str]:
    """The gold snippets first, then negatives, at most ``n``, in the instance's order."""
    keep = set(example.gold[:n])
    for i in range(len(example.evidence)):
        if len(keep) >= n:
            break
        keep.add(i)
    return [example.evidence[i] for i in sorted(keep) if i < len(example.evidence)]


def encode_batch(tokenizer: Any, batch: Sequence[Example], config: EditorTrainConfig) -> dict[str, torch.Tensor]:
    """input_ids/attention_mask [B, n, L] (absent snippets fully masked) and labels [B, T]."""
    n = config.max_evidence
    flat, present = [], []
    for example in batch:
        snippets = choose_evidence(example, n)
        inputs = fid_inputs(example.text, snippets, config.template)
        present.append(len(inputs))
        flat += inputs + [config.template.format(claim=example.text, evidence="")] * (n - len(inputs))
    enc = tokenizer(flat, padding=True, truncation=True, max_length=config.max_length, return_tensors="pt")
    ids = enc["input_ids"].view(len(batch), n, -1)
    mask = enc["attention_mask"].view(len(batch), n, -1).clone()
    for row, count in enumerate(present):
        mask[row, count:] = 0
    labels = tokenizer(
        text_target=[e.target for e in batch], padding=True, truncation=True, max_length=config.max_target,
        return_tensors="pt",
    )["input_ids"]  # fmt: skip
    labels[labels == tokenizer.pad_token_id] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def fuse_encode(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """Encode [B, n, L] inputs separately and concatenate each instance's states: [B, n*L, d]."""
    from transformers.modeling_outputs import BaseModelOutput

    b, n, length = input_ids.shape
    states = model.get_encoder()(
        input_ids=input_ids.view(b * n, length), attention_mask=attention_mask.view(b * n, length)
    ).last_hidden_state
    return BaseModelOutput(last_hidden_state=states.reshape(b, n * length, -1)), attention_mask.reshape(b, n * length)


def fid_loss(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    encoded, mask = fuse_encode(model, batch["input_ids"], batch["attention_mask"])
    return model(encoder_outputs=encoded, attention_mask=mask, labels=batch["labels"]).loss


@torch.no_grad()
def fid_generate(model: Any, tokenizer: Any, batch: dict[str, torch.Tensor], max_new_tokens: int) -> list[str]:
    encoded, mask = fuse_encode(model, batch["input_ids"], batch["attention_mask"])
    ids = model.generate(encoder_outputs=encoded, attention_mask=mask, max_new_tokens=max_new_tokens,
                         num_beams=1, do_sample=False)  # fmt: skip
    return [" ".join(t.split()) for t in tokenizer.batch_decode(ids, skip_special_tokens=True)]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda but torch sees no GPU (install a CUDA build of torch)")
    return torch.device(name)


def train_editor(config: EditorTrainConfig) -> dict[str, Any]:
    """Train, save, evaluate exact match on the dev split, export; returns the run's figures."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, get_linear_schedule_with_warmup

    torch.manual_seed(config.seed)
    random.seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    device = resolve_device(config.device)
    examples = load_examples(config.data)
    train, dev = split_dev(examples, config.dev_share, config.max_dev, config.seed)
    if not train:
        raise ValueError("no training examples")
    tokenizer = AutoTokenizer.from_pretrained(config.base)
    model = AutoModelForSeq2SeqLM.from_pretrained(config.base).to(device)
    steps_per_epoch = math.ceil(len(train) / config.batch_size / config.grad_accum)
    total = max(1, int(steps_per_epoch * config.epochs))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = get_linear_schedule_with_warmup(optimizer, int(total * config.warmup), total)
    autocast, scaler = _precision(config.precision, device)
    rng = random.Random(config.seed)
    started, step, losses = time.monotonic(), 0, []
    model.train()
    while step < total and not _out_of_time(started, config):
        order = list(train)
        rng.shuffle(order)
        batches = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
        for k, examples_batch in enumerate(batches):
            batch = {key: t.to(device) for key, t in encode_batch(tokenizer, examples_batch, config).items()}
            with autocast():
                loss = fid_loss(model, batch) / config.grad_accum
            scaler.scale(loss).backward()
            losses.append(loss.item() * config.grad_accum)
            if (k + 1) % config.grad_accum and k + 1 < len(batches):
                continue
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            schedule.step()
            step += 1
            if step % config.log_every == 0:
                log.info("step %d/%d loss %.4f", step, total, sum(losses[-50:]) / len(losses[-50:]))
            if step >= total or _out_of_time(started, config):
                break
    train_seconds = time.monotonic() - started
    model.eval()
    checkpoint = config.out / "checkpoint"
    checkpoint.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(checkpoint))
    tokenizer.save_pretrained(str(checkpoint))
    editor_config = {"template": config.template, "max_evidence": config.max_evidence, "base": config.base}
    (checkpoint / EDITOR_CONFIG).write_text(json.dumps(editor_config, indent=2), encoding="utf-8")
    result: dict[str, Any] = {
        "train_examples": len(train), "dev_examples": len(dev), "steps": step, "train_seconds": round(train_seconds, 1),
        "first_loss": round(sum(losses[:10]) / max(len(losses[:10]), 1), 4),
        "final_loss": round(sum(losses[-10:]) / max(len(losses[-10:]), 1), 4), "device": str(device),
        "checkpoint": str(checkpoint),
    }  # fmt: skip
    predictions = _predict(model, tokenizer, dev, config, device)
    if dev:
        result["dev_exact_match"] = round(sum(p == _norm(e.target) for p, e in zip(predictions, dev)) / len(dev), 4)
        result["dev_copy_rate"] = round(sum(p == _norm(e.text) for p, e in zip(predictions, dev)) / len(dev), 4)
    if config.export:
        result |= _export(checkpoint, config, dev[:20], predictions[:20], editor_config)
    meta = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()}, "result": result}
    meta["config"]["data"] = [str(p) for p in config.data]
    (config.out / "train_meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return result


def _norm(text: str) -> str:
    return " ".join(text.split())


def _out_of_time(started: float, config: EditorTrainConfig) -> bool:
    return time.monotonic() - started > config.max_minutes * 60


def _precision(name: str, device: torch.device) -> tuple[Any, Any]:
    """An autocast context factory and a grad scaler (a no-op one unless fp16 on CUDA)."""
    import contextlib

    if name not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"precision must be fp32, bf16 or fp16, not {name!r}")
    if name == "fp32" or device.type != "cuda":
        return contextlib.nullcontext, torch.amp.GradScaler(enabled=False)
    dtype = torch.bfloat16 if name == "bf16" else torch.float16
    return (lambda: torch.autocast("cuda", dtype=dtype)), torch.amp.GradScaler(enabled=name == "fp16")


def _predict(model: Any, tokenizer: Any, dev: list[Example], config: EditorTrainConfig, device: torch.device) -> list[str]:
    out: list[str] = []
    for i in range(0, len(dev), config.batch_size):
        batch = {k: t.to(device) for k, t in encode_batch(tokenizer, dev[i : i + config.batch_size], config).items()}
        out += fid_generate(model, tokenizer, batch, config.max_target)
    return out


def _export(
    checkpoint: Path, config: EditorTrainConfig, dev: list[Example], torch_outputs: list[str], editor_config: dict
) -> dict[str, Any]:
    """Export to ONNX and check that the runtime's fused greedy decode agrees with PyTorch's."""
    from middleware.runtime.seq2seq import OnnxSeq2Seq
    from middleware.settings import RuntimeSettings
    from onnx_models.export import export_model

    target = config.out / "onnx"
    export_model(checkpoint, "seq2seq", target, quantize=config.quantize, max_length=config.max_length)
    (target / EDITOR_CONFIG).write_text(json.dumps(editor_config, indent=2), encoding="utf-8")
    out: dict[str, Any] = {"onnx": str(target)}
    if dev:
        served = OnnxSeq2Seq(target, RuntimeSettings(provider="cpu"))
        groups = [fid_inputs(e.text, choose_evidence(e, config.max_evidence), config.template) for e in dev]
        onnx_outputs = [_norm(t) for t in served.generate_fused(groups, config.max_target)]
        same = sum(a == b for a, b in zip(onnx_outputs, torch_outputs, strict=True))
        out["onnx_agreement"] = round(same / len(dev), 4)
    return out
