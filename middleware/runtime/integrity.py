"""Model files checked against their manifest's sha256 (``runtime.verify_checksums``): only the
files a session of the export loads here (the tokenizer files and the graph chosen for each
role, not the copies kept for other devices), each once per process. A file changed on disk
since it was checked (another size or time) is checked again.
"""

from __future__ import annotations

import threading
from pathlib import Path

from middleware.runtime.onnx_session import graph_choice
from middleware.settings import RuntimeSettings
from onnx_models.manifest import Manifest, graph_files, read_manifest, verify_file

_VERIFIED: set[tuple[str, int, int, int, int, str]] = set()
_LOCK = threading.Lock()


def read_model_manifest(directory: Path, task: str, settings: RuntimeSettings) -> Manifest:
    """The manifest of ``directory``, an export of ``task``, with the files a session loads
    verified (ManifestError when one is missing or does not match its sha256)."""
    manifest = read_manifest(directory, verify=False)
    if manifest.task != task:
        raise ValueError(f"{directory} holds a {manifest.task} model, not {task}")
    if settings.verify_checksums:
        for name in loaded_files(directory, manifest, settings):
            _verify_once(Path(directory), manifest, name)
    return manifest


def loaded_files(directory: Path, manifest: Manifest, settings: RuntimeSettings) -> list[str]:
    """The export's files a session loads under ``settings``: every file that is not a graph
    (the tokenizer's), and the graph ``load_graph`` picks for each role."""
    graphs = set(graph_files(manifest))
    chosen = [graph_choice(directory, manifest, role, settings, warn=False)[0].path.name for role in manifest.graphs]
    return [name for name in manifest.files if name not in graphs] + chosen


def _verify_once(directory: Path, manifest: Manifest, name: str) -> None:
    path = directory / name
    if not path.is_file():
        verify_file(directory, manifest, name)  # raises: listed but missing
    stat = path.stat()
    # the inode and ctime too: a file rewritten in place with its size and mtime put back
    # still changes its ctime, which no user call can set
    key = (str(path.resolve()), stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, manifest.files[name])
    with _LOCK:
        if key in _VERIFIED:
            return
        verify_file(directory, manifest, name)
        _VERIFIED.add(key)


def clear_verified() -> None:
    """Forget which files were verified (tests): the next load hashes them again."""
    with _LOCK:
        _VERIFIED.clear()
