"""Sessions: provider choice, the CUDA error, the shared registry, the IO-binding path, the raw
logits of a tiny random int8 export keeping the fp32 export's argmax, and exact int8 products
on CPUs without VNNI."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from middleware.runtime.onnx_session import (
    CPU,
    CUDA,
    OnnxSession,
    ProviderUnavailable,
    choose_providers,
    clear_sessions,
    get_session,
)
from middleware.settings import RuntimeSettings
from tests.support.tiny_exports import _raw_logits, random_pairs


HAS_CUDA = CUDA in ort.get_available_providers()


@pytest.fixture
def linear_model(tmp_path: Path) -> Path:
    """y = x @ W + b with a dynamic batch axis, built directly with onnx.helper."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.normal(size=(3,)).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[weight, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "linear.onnx"
    onnx.save(model, str(path))
    return path


def test_cpu_and_auto_providers() -> None:
    assert choose_providers("cpu") == [CPU]
    assert choose_providers("auto") == ([CUDA, CPU] if HAS_CUDA else [CPU])
    with pytest.raises(ValueError, match="unknown runtime.provider"):
        choose_providers("tpu")


@pytest.mark.skipif(HAS_CUDA, reason="CUDA is available here")
def test_cuda_without_a_gpu_fails_clearly(linear_model: Path) -> None:
    with pytest.raises(ProviderUnavailable, match="onnxruntime-gpu") as info:
        OnnxSession(linear_model, RuntimeSettings(provider="cuda"))
    assert "GPU" in str(info.value) and "FACTCHECK_RUNTIME__PROVIDER=cpu" in str(info.value)


def test_one_shared_session_per_model_and_settings(linear_model: Path) -> None:
    clear_sessions()
    settings = RuntimeSettings(provider="cpu", intra_op_threads=1)
    first = get_session(linear_model, settings)
    assert get_session(linear_model, settings) is first
    assert get_session(linear_model, settings.model_copy(update={"intra_op_threads": 2})) is not first
    assert first.provider == CPU and not first.io_binding  # IO binding is the CUDA path
    clear_sessions()


def test_io_binding_path_gives_the_same_outputs(linear_model: Path) -> None:
    settings = RuntimeSettings(provider="cpu")
    plain = OnnxSession(linear_model, settings)
    bound = OnnxSession(linear_model, settings, io_binding=True)
    x = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    expected = plain.run({"x": x})[0]
    np.testing.assert_allclose(bound.run({"x": x})[0], expected, rtol=1e-6)
    device_x = bound.to_device(x)  # placed once, reused across runs
    assert isinstance(device_x, ort.OrtValue)
    np.testing.assert_allclose(bound.run({"x": device_x})[0], expected, rtol=1e-6)
    assert plain.to_device(x) is x


def test_a_session_loaded_at_a_precision_is_not_shared_with_one_loaded_as_stored(linear_model: Path) -> None:
    """The encoder reads ``session.precision`` (int8 runs one sequence per inference), so the
    same file loaded as stored and as a chosen precision must be two sessions."""
    from middleware.runtime.precision import GraphChoice

    clear_sessions()
    settings = RuntimeSettings(provider="cpu")
    plain = get_session(linear_model, settings)
    chosen = get_session(linear_model, settings, GraphChoice(linear_model, "int8", "int8"), [CPU])
    assert plain.precision == "as stored" and chosen.precision == "int8" and chosen is not plain
    assert get_session(linear_model, settings, GraphChoice(linear_model, "int8", "int8"), [CPU]) is chosen
    clear_sessions()


def test_int8_keeps_the_argmax(exports: dict[str, Path]) -> None:
    pairs = random_pairs(200, seed=3)
    fp32, int8 = _raw_logits(exports["nli-fp32"], pairs), _raw_logits(exports["nli-int8"], pairs)
    agreement = float((fp32.argmax(1) == int8.argmax(1)).mean())
    assert agreement >= 0.95, agreement


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="an x86 switch")
@pytest.mark.parametrize("needed", [True, False])
def test_a_cpu_without_vnni_gets_exact_int8_products(
    needed: bool, exports: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``middleware.runtime.cpu`` finds the int8 kernel saturating (no VNNI), the sessions ask onnxruntime for
    exact products: it moves the int8 weights to uint8 at load (the kernels that cannot
    saturate), and the logits stay those of the exact int8 kernels (this CPU's own, with the
    switch where it needs it). Elsewhere the weights stay int8, on the fast kernels."""
    import middleware.runtime.onnx_session as onnx_session

    model = exports["nli-int8"] / "model.onnx"
    pairs = random_pairs(50, seed=4)
    exact = _raw_logits(exports["nli-int8"], pairs)
    monkeypatch.setattr(onnx_session, "exact_int8_switch_needed", lambda: needed)
    options = onnx_session.session_options(RuntimeSettings(provider="cpu"))
    options.optimized_model_filepath = str(tmp_path / "as_loaded.onnx")
    ort.InferenceSession(str(model), options, providers=[CPU])
    kinds = {init.data_type for init in onnx.load(str(tmp_path / "as_loaded.onnx")).graph.initializer}
    if not needed:
        assert TensorProto.INT8 in kinds
        return
    assert TensorProto.INT8 not in kinds and TensorProto.UINT8 in kinds
    np.testing.assert_allclose(_raw_logits(exports["nli-int8"], pairs), exact, atol=1e-5)
