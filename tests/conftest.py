"""Shared fixtures: the scripted demo upstream and the proxy, both on loopback; spaCy loaded
before a module's tests (``pytestmark = pytest.mark.usefixtures("warm_spacy")``); tiny random
checkpoints and their ONNX exports, built once per session on first request (they need the
train extra: torch, transformers; helpers in tests/support/tiny_exports.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from adapters.demo_upstream import DemoUpstream
from middleware.interfaces import Checker
from middleware.composition import build_app
from middleware.commands.serve import start_site
from middleware.settings import Settings, load_settings
from tests.support.checkers import ScriptedChecker

# The suite runs the in-process path whatever machine it is on (``server.workers`` and
# ``check.workers`` default to ``auto``, sized from the machine: tests/test_machine.py tests
# that); a test of the workers names them. Set before any settings are read, inherited by the
# processes the tests start.
os.environ.setdefault("FACTCHECK_SERVER__WORKERS", "1")
os.environ.setdefault("FACTCHECK_CHECK__WORKERS", "0")


@dataclass
class Proxy:
    url: str
    """Base URL of the proxy, ending in /v1."""
    upstream: DemoUpstream
    checker: Checker
    settings: Settings
    app: web.Application


@pytest.fixture
async def make_proxy() -> AsyncIterator[Callable[..., object]]:
    runners: list[web.AppRunner] = []

    async def _make(checker: Checker | None = None, **overrides: object) -> Proxy:
        upstream = DemoUpstream()
        up_runner, up_port = await start_site(upstream.app(), "127.0.0.1", 0)
        runners.append(up_runner)
        settings = load_settings(**{"upstream.url": f"http://127.0.0.1:{up_port}/v1", "check.checker": "none",
                                    **overrides})
        checker = checker if checker is not None else ScriptedChecker()
        app = build_app(settings, checker=checker)
        runner, port = await start_site(app, "127.0.0.1", 0)
        runners.append(runner)
        return Proxy(f"http://127.0.0.1:{port}/v1", upstream, checker, settings, app)

    yield _make
    for runner in reversed(runners):
        await runner.cleanup()


@pytest.fixture(scope="module")
def warm_spacy() -> None:
    """Load spaCy once, outside any sentence budget (a cold load takes seconds)."""
    from middleware.pipeline.slots import analyse

    analyse("Warm up the parser.")


# ------------------------------------------------------------------ tiny checkpoints and exports


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny random BERT checkpoints (embed, nli, rerank) and a tiny T5 (seq2seq), built offline."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tests.support.tiny_exports import HEAD_LABELS, WORDS
    from tests.support.tiny_models import save_bert_tokenizer, save_t5_tokenizer, tiny_bert_config

    root = tmp_path_factory.mktemp("ckpt")
    torch.manual_seed(0)
    paths = {name: root / name for name in ("embed", "nli", "rerank", "seq2seq")}
    transformers.BertModel(tiny_bert_config()).save_pretrained(str(paths["embed"]))
    nli_config = tiny_bert_config(num_labels=3, id2label=dict(enumerate(HEAD_LABELS)))
    transformers.BertForSequenceClassification(nli_config).save_pretrained(str(paths["nli"]))
    transformers.BertForSequenceClassification(tiny_bert_config(num_labels=1)).save_pretrained(str(paths["rerank"]))
    for name in ("embed", "nli", "rerank"):
        save_bert_tokenizer(paths[name])
    vocab = save_t5_tokenizer(paths["seq2seq"], WORDS)
    t5 = transformers.T5Config(
        vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, initializer_factor=2.0,  # varied outputs
    )
    transformers.T5ForConditionalGeneration(t5).save_pretrained(str(paths["seq2seq"]))
    return paths


@pytest.fixture(scope="session")
def exports(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 exports of each checkpoint; int8 straight from the checkpoint for nli and seq2seq,
    and from the fp32 export (no re-export) for embed and rerank."""
    from onnx_models.export import export_model

    root = tmp_path_factory.mktemp("onnx")
    out = {}
    for task, path in checkpoints.items():
        out[f"{task}-fp32"] = export_model(path, task, root / f"{task}-fp32", max_length=64)
        source = path if task in ("nli", "seq2seq") else out[f"{task}-fp32"]
        out[f"{task}-int8"] = export_model(source, task, root / f"{task}-int8", quantize="int8", max_length=64)
    return out


@pytest.fixture(scope="session")
def t5(checkpoints: dict[str, Path]) -> object:
    """The PyTorch model of ``checkpoints["seq2seq"]``, in eval mode."""
    transformers = pytest.importorskip("transformers")

    return transformers.T5ForConditionalGeneration.from_pretrained(str(checkpoints["seq2seq"])).eval()
