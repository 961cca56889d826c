"""Model files checked against their manifest (``runtime.integrity``): only the files a session
loads, each once, again when changed on disk; an export of another task is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.runtime import OnnxEmbedder, OnnxPairScorer, resolve_model  # noqa: E402
from middleware.settings import RuntimeSettings  # noqa: E402
from onnx_models.manifest import ManifestError, read_manifest, sha256_file  # noqa: E402


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files sha256-hashed while the test runs."""
    import onnx_models.manifest

    names: list[str] = []

    def counting(path: Path, chunk: int = 1 << 20) -> str:
        names.append(Path(path).name)
        return sha256_file(path, chunk)

    monkeypatch.setattr(onnx_models.manifest, "sha256_file", counting)
    return names


def test_a_cpu_session_verifies_the_files_it_loads_once(exports: dict[str, Path], tmp_path: Path,
                                                        hashed: list[str]) -> None:
    import shutil

    copy = shutil.copytree(exports["nli-int8"], tmp_path / "nli")
    (copy / "model.weights-int8.onnx").write_bytes(b"a GPU's copy, never loaded on the CPU")
    settings = RuntimeSettings(provider="cpu")
    scorer = OnnxPairScorer(resolve_model(str(copy), "nli", settings), settings, "nli")
    OnnxPairScorer(copy, settings, "nli")
    tokenizer_files = [name for name in read_manifest(copy, verify=False).files if not name.endswith(".onnx")]
    assert tokenizer_files and sorted(hashed) == sorted([*tokenizer_files, "model.onnx"])
    assert scorer.session.path.name == "model.onnx"


def test_a_damaged_graph_that_is_loaded_fails_verification(exports: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    copy = shutil.copytree(exports["nli-int8"], tmp_path / "nli")
    OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")  # verified once, intact
    with open(copy / "model.onnx", "ab") as fh:
        fh.write(b" ")
    with pytest.raises(ManifestError, match="model.onnx does not match its sha256"):
        OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")
    (copy / "model.weights-int8.onnx").write_bytes(b"broken")
    with pytest.raises(ManifestError, match="model.weights-int8.onnx does not match its sha256"):
        OnnxPairScorer(copy, RuntimeSettings(provider="cpu", precision="fp32"), "nli")


def test_a_graph_rewritten_with_its_size_and_time_put_back_is_verified_again(
    exports: dict[str, Path], tmp_path: Path
) -> None:
    import os
    import shutil

    copy = shutil.copytree(exports["nli-int8"], tmp_path / "nli")
    graph = copy / "model.onnx"
    OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")  # verified once, intact
    before = graph.stat()
    data = bytearray(graph.read_bytes())
    data[-1] ^= 0xFF  # one byte changed in place: the same size
    graph.write_bytes(bytes(data))
    os.utime(graph, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ManifestError, match="model.onnx does not match its sha256"):
        OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")


def test_wrong_task_is_refused(exports: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="holds a nli model"):
        OnnxEmbedder(exports["nli-fp32"], RuntimeSettings(provider="cpu"))
    with pytest.raises(ValueError, match="holds a embed model, not rerank"):
        resolve_model(str(exports["embed-fp32"]), "rerank", RuntimeSettings())
