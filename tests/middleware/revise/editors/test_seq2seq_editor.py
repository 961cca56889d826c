"""The PURR pipeline end to end on a tiny random T5 built offline: make-edit-data from a few
demo-corpus documents, train-editor with fusion-in-decoder input, export through the runtime,
and the seq2seq editor serving the export; plus FiD parity between training and runtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.cli import app  # noqa: E402
from middleware.pipeline.verifiers import SlotsVerifier, passages_from_texts  # noqa: E402
from middleware.pipeline.verifiers.base import DetailedVerdict  # noqa: E402
from middleware.composition.editor import build_editor  # noqa: E402
from middleware.revise.edits import apply_edits  # noqa: E402
from middleware.training.editor_data import KINDS, build_instances, load_corpus  # noqa: E402
from middleware.revise.editors import FID_TEMPLATE, Seq2SeqEditor  # noqa: E402
from middleware.training.editor import EditorTrainConfig, encode_batch, fuse_encode, load_examples  # noqa: E402
from middleware.runtime.seq2seq import OnnxSeq2Seq, fuse  # noqa: E402
from middleware.settings import RuntimeSettings, load_settings  # noqa: E402
from middleware.types import Passage  # noqa: E402
from tests.support.paths import DEMO_CORPUS  # noqa: E402

CORPUS = DEMO_CORPUS
DOCS = ("people/marie-curie.md", "history/battle-of-hastings.md", "geography/nile.md", "geography/volga.md",
        "science/helium.md", "history/magna-carta.md", "places/eiffel-tower.md", "technology/sputnik-1.md",
        "history/sinking-of-the-titanic.md", "geography/mount-everest.md", "sport/fifa.md", "people/isaac-newton.md")  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for name in DOCS:
        source = CORPUS / name
        if source.is_file():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    assert len(list(root.rglob("*.md"))) >= 8
    return root


@pytest.fixture(scope="module")
def data(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data") / "edit.jsonl"
    result = CliRunner().invoke(app, ["make-edit-data", "--corpus", str(corpus), "--out", str(out), "--n", "32",
                                      "--negatives", "3", "--seed", "5", "--per-passage", "3"])  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_make_edit_data_builds_purr_instances(data: Path, corpus: Path) -> None:
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
    assert 20 <= len(rows) <= 32
    assert {r["type"] for r in rows} <= set(KINDS) and len({r["type"] for r in rows}) >= 3
    for row in rows:
        assert set(row) == {"id", "text", "original", "evidence", "gold", "type", "wrong", "right", "doc"}
        assert row["text"] != row["original"]
        assert len(row["evidence"]) == 4 and len(row["gold"]) == 1  # gold + 3 negatives (PURR: 4 snippets)
        gold = row["evidence"][row["gold"][0]]
        assert row["right"] in gold or row["right"] in row["original"]
        assert row["wrong"] in row["text"]
        negatives = [e for i, e in enumerate(row["evidence"]) if i not in row["gold"]]
        assert all(e != gold for e in negatives)
    again = build_instances(load_corpus([corpus]), 32, seed=5, negatives=3, per_passage=3)
    assert [i.to_json() for i in again] == data.read_text(encoding="utf-8").splitlines()  # deterministic


def _tiny_t5(directory: Path, texts: list[str]) -> Path:
    """A random 2-layer T5 and a Unigram tokenizer trained on ``texts``, all offline."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=700, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>")
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(str(directory))
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=tok.get_vocab_size(), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    transformers.T5ForConditionalGeneration(config).save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="module")
def base(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines()]
    texts = [t for r in rows for t in (r["text"], r["original"], *r["evidence"])]
    texts += [FID_TEMPLATE.format(claim="", evidence="")] * 20
    return _tiny_t5(tmp_path_factory.mktemp("t5"), texts)


@pytest.fixture(scope="module")
def run(data: Path, base: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("run")
    result = CliRunner().invoke(app, [
        "train-editor", "--data", str(data), "--base", str(base), "--out", str(out), "--epochs", "8",
        "--batch-size", "4", "--lr", "1e-2", "--max-length", "96", "--max-target", "48", "--dev-share", "0.2",
        "--device", "cpu", "--seed", "3", "--threads", "1",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout[result.stdout.index("{"):])


def test_train_editor_learns_saves_and_exports(run: tuple[Path, dict]) -> None:
    out, figures = run
    assert figures["steps"] >= 40 and figures["final_loss"] < 0.85 * figures["first_loss"]  # it learns
    assert (out / "checkpoint" / "editor.json").is_file() and (out / "onnx" / "manifest.json").is_file()
    assert json.loads((out / "onnx" / "editor.json").read_text())["template"] == FID_TEMPLATE
    assert figures["onnx_agreement"] >= 0.9  # the runtime's fused greedy decode matches PyTorch's
    assert 0.0 <= figures["dev_exact_match"] <= 1.0
    meta = json.loads((out / "train_meta.json").read_text())
    assert meta["result"]["steps"] == figures["steps"]


def test_runtime_fusion_equals_training_fusion(run: tuple[Path, dict], data: Path) -> None:
    out, _ = run
    served = OnnxSeq2Seq(out / "onnx", RuntimeSettings(provider="cpu", verify_checksums=True))
    model = transformers.T5ForConditionalGeneration.from_pretrained(str(out / "checkpoint")).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out / "checkpoint"))
    config = EditorTrainConfig(data=[data], base="", out=out, max_length=96, max_evidence=4)
    examples = [e for e in load_examples([data]) if len(e.evidence) == 4][:2]
    batch = encode_batch(tokenizer, examples, config)
    with torch.no_grad():
        encoded, mask = fuse_encode(model, batch["input_ids"], batch["attention_mask"])
    for row, example in enumerate(examples):
        inputs = [FID_TEMPLATE.format(claim=example.text, evidence=e) for e in example.evidence]
        states, fused_mask = fuse(*served.encode(inputs), [len(inputs)])
        ours = encoded.last_hidden_state[row][mask[row].bool()].numpy()
        theirs = states[0][fused_mask[0].astype(bool)]
        np.testing.assert_allclose(theirs, ours, atol=1e-4)


async def test_seq2seq_editor_serves_the_export(run: tuple[Path, dict]) -> None:
    out, _ = run
    settings = load_settings(**{"runtime.provider": "cpu"})
    editor = build_editor(settings, SlotsVerifier(), backend="seq2seq", model=str(out / "onnx"))
    sentence = "Marie Curie was born in Paris on 7 November 1867."
    evidence = passages_from_texts(["Marie Curie, born Maria Sklodowska in Warsaw on 7 November 1867, was a physicist."])
    result = await editor.edit(sentence, DetailedVerdict(label="contradictory", evidence_index=0), evidence)
    assert result.original == sentence and result.backend == "seq2seq"
    assert apply_edits(sentence, result.edits) == result.text
    assert result.changed or result.rejected


class FixedGenerator:
    """A FusedGenerator double: records the groups and answers with a fixed text."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.groups: list[list[str]] = []

    def generate_fused(self, groups, max_new_tokens: int = 64) -> list[str]:
        self.groups += [list(g) for g in groups]
        return [self.answer for _ in groups]


async def test_seq2seq_editor_fuses_up_to_four_snippets_and_grounds_edits() -> None:
    sentence = "  The Volga flows out of the Caspian Sea. "
    texts = ["Tea is a drink.", "The Volga is long.", "Rome is old.", "It empties into the Caspian Sea.", "Oslo.", "x"]
    evidence = [Passage(id=f"p{i}", text=t, provider="t", source="s") for i, t in enumerate(texts)]
    model = FixedGenerator("The Volga flows into the Caspian Sea.")
    result = await Seq2SeqEditor(model).edit(sentence, DetailedVerdict(label="contradictory", evidence_index=3), evidence)
    [group] = model.groups
    assert len(group) == 4 and group[0] == FID_TEMPLATE.format(claim=sentence.strip(), evidence=texts[3])
    assert result.text == "  The Volga flows into the Caspian Sea. "
    [edit] = result.edits
    assert (edit.original, edit.replacement, edit.tag, edit.evidence_id) == ("out of", "into", "relation", "p3")
    kept = await Seq2SeqEditor(FixedGenerator("The Volga flows out of the Caspian Sea.")).edit(
        sentence, DetailedVerdict(label="contradictory"), evidence
    )
    assert not kept.changed
