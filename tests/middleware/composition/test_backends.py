"""The pipeline's backends built by name (``middleware.composition.backends``): the NLI verifier and the
seq2seq question generator on real (tiny, random) ONNX exports served by the runtime (label order
from the manifest, windows in one batch, greedy decoding), and the fallbacks and errors when a
backend's model is missing."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.composition.backends import BackendUnavailable, build_question_generator, build_verifier  # noqa: E402
from middleware.pipeline.verifiers import NLIVerifier, Verifier, passages_from_texts  # noqa: E402
from middleware.runtime import clear_models, load_pair_scorer  # noqa: E402
from middleware.settings import RuntimeSettings, load_settings  # noqa: E402
from middleware.types import NLI_LABELS  # noqa: E402
from onnx_models.export import export_model  # noqa: E402
from tests.support.pipeline_doubles import HashingEmbedder, RulePairScorer, keyword_rule  # noqa: E402
from tests.support.tiny_models import save_bert_tokenizer, save_t5_tokenizer  # noqa: E402

LABELS = ["contradiction", "entailment", "neutral"]  # not the product's order on purpose
WORDS = "marie curie was born in warsaw paris 1867 the tower is tall metres when where".split()


def _tiny_bert_nli(directory: Path) -> None:
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=128, num_labels=3, id2label=dict(enumerate(LABELS)),
    )  # fmt: skip
    transformers.BertForSequenceClassification(config).save_pretrained(str(directory))
    save_bert_tokenizer(directory)


def _tiny_t5(directory: Path) -> None:
    vocab = save_t5_tokenizer(directory, WORDS)
    config = transformers.T5Config(
        vocab_size=vocab, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    transformers.T5ForConditionalGeneration(config).save_pretrained(str(directory))


@pytest.fixture(scope="module")
def shuffled_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny NLI export whose labels are not in the product's order, and a tiny T5 (not the
    session's ``exports``: the label order is the point here)."""
    root = tmp_path_factory.mktemp("pipeline-models")
    torch.manual_seed(0)
    _tiny_bert_nli(root / "nli-ckpt")
    _tiny_t5(root / "t5-ckpt")
    return {
        "nli": export_model(root / "nli-ckpt", "nli", root / "nli", max_length=64),
        "seq2seq": export_model(root / "t5-ckpt", "seq2seq", root / "t5", max_length=64),
    }


@pytest.fixture
def runtime(tmp_path: Path) -> RuntimeSettings:
    clear_models()
    return RuntimeSettings(provider="cpu", models_dir=tmp_path / "cache", max_batch=8, max_wait_ms=1.0)


async def test_nli_verifier_on_an_exported_model(shuffled_exports: dict[str, Path], runtime: RuntimeSettings) -> None:
    scorer = load_pair_scorer(str(shuffled_exports["nli"]), "nli", runtime)
    assert scorer.labels == LABELS
    evidence = ["Marie Curie was born in Warsaw in 1867.", "The tower is 330 metres tall. " * 6]
    verifier = NLIVerifier(scorer)
    assert verifier.max_length == 64
    assessment = await verifier.assess("Marie Curie was born in Paris.", passages_from_texts(evidence))
    assert len(assessment.windows) > 2  # the long passage was split to fit 64 tokens
    raw = scorer.score_sync([(w.text, "Marie Curie was born in Paris.") for w in assessment.windows])
    expected = raw[:, [LABELS.index(name) for name in ("entailment", "neutral", "contradiction")]]
    np.testing.assert_allclose(assessment.probs, expected, atol=1e-5)
    verdict = verifier.decide(assessment)
    assert verdict.label in NLI_LABELS and sum(verdict.scores.values()) == pytest.approx(1.0, abs=1e-5)
    await scorer.aclose()


async def test_factory_builds_hybrid_and_seq2seq_from_settings(
    shuffled_exports: dict[str, Path], runtime: RuntimeSettings
) -> None:
    settings = load_settings(
        **{"runtime.nli_model": str(shuffled_exports["nli"]), "pipeline.seq2seq_model": str(shuffled_exports["seq2seq"])}
    )
    settings = settings.model_copy(
        update={"runtime": runtime.model_copy(update={"nli_model": str(shuffled_exports["nli"])})}
    )
    verifier = build_verifier(settings, "hybrid", embedder=HashingEmbedder())
    assert verifier.name == "hybrid"
    verdict = await verifier.verify(
        "Marie Curie was born in Paris.", passages_from_texts(["Marie Curie was born in Warsaw."])
    )
    assert verdict.label == "contradictory" and verdict.replacement == "Warsaw"  # the slot mismatch decides
    generator = build_question_generator(settings, "seq2seq")
    questions = await generator.generate("Marie Curie was born in Warsaw.")
    assert questions and all(q.text for q in questions)  # random weights: any text, but it decodes


# --- backends whose model is missing ------------------------------------------------------


def test_hybrid_falls_back_to_slots_without_a_model(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings(**{"runtime.nli_model": "/nonexistent/nli-model"})
    with caplog.at_level(logging.WARNING):
        verifier = build_verifier(settings, "hybrid", embedder=HashingEmbedder())
    assert verifier.name == "slots" and "falls back to slots" in caplog.text
    with pytest.raises(BackendUnavailable):
        build_verifier(settings, "nli", embedder=HashingEmbedder())
    scorer = RulePairScorer(keyword_rule())
    assert build_verifier(settings, "hybrid", embedder=HashingEmbedder(), scorer=scorer).name == "hybrid"
    assert isinstance(build_verifier(settings, "slots", embedder=HashingEmbedder()), Verifier)


def test_seq2seq_questions_need_a_model() -> None:
    with pytest.raises(BackendUnavailable, match="seq2seq_model"):
        build_question_generator(load_settings(), "seq2seq")


async def test_seq2seq_question_generator_with_a_model() -> None:
    class Model:
        def generate(self, texts: list[str], max_new_tokens: int = 64) -> list[str]:
            assert texts == ["generate questions: Curie was born in 1867."]
            return ["When was Curie born? Where was Curie born?<sep>when was curie born"]

    generator = build_question_generator(load_settings(), "seq2seq", model=Model())
    questions = await generator.generate("Curie was born in 1867.")
    assert [q.text for q in questions] == ["When was Curie born?", "Where was Curie born?"]
