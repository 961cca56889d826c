"""Nothing phones home: the usage telemetry of every library the proxy loads is turned off
before that library is imported.

``middleware/__init__.py`` calls :func:`disable_telemetry` first thing, so whatever imports
any part of the engine (the command line, the Ray tier's workers, the tests, an embedding
application) sets these switches before onnxruntime, huggingface_hub, transformers or Ray
read them. Each variable is only set when absent: an operator who sets one explicitly (say
``ORT_DISABLE_TELEMETRY=0``) has opted in, and that choice stands.

Why the environment and not the libraries' calls: onnxruntime's telemetry (its 1DS client
uploading to ``mobile.events.data.microsoft.com``) starts when the module is imported and reads
``ORT_DISABLE_TELEMETRY`` then; ``onnxruntime.disable_telemetry_events()`` called afterwards did
not stop the uploads (measured: the same lookups of the collector with and without the call,
none with the variable; ``tests/test_no_phone_home.py`` runs the demo under a logging DNS).
The call is made too (:func:`disable_onnxruntime_events`), for the events it does govern.
"""

from __future__ import annotations

import os
import sys

TELEMETRY_OFF: dict[str, str] = {
    "ORT_DISABLE_TELEMETRY": "1",  # onnxruntime: its 1DS uploads to mobile.events.data.microsoft.com
    "HF_HUB_DISABLE_TELEMETRY": "1",  # huggingface_hub, transformers, sentence-transformers
    "DISABLE_TELEMETRY": "1",  # huggingface_hub's older name
    "DO_NOT_TRACK": "1",  # the cross-tool convention (https://donottrack.sh), read by huggingface_hub and others
    "RAY_USAGE_STATS_ENABLED": "0",  # Ray's usage statistics (the `ray` extra)
    "SCARF_NO_ANALYTICS": "true",  # packages that report installs through Scarf
}
"""Environment switches set (when absent) before any library is imported."""


def disable_telemetry(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set every switch of :data:`TELEMETRY_OFF` that is not set yet; return those it set.
    Call it before the libraries are imported (``middleware/__init__.py`` does)."""
    env = os.environ if environ is None else environ
    changed = {name: value for name, value in TELEMETRY_OFF.items() if name not in env}
    env.update(changed)
    if environ is None and "onnxruntime" in sys.modules:  # imported before us: say so through its API too
        disable_onnxruntime_events()
    return changed


def disable_onnxruntime_events() -> None:
    """onnxruntime's own switch for its telemetry events (the runtime calls it after import)."""
    import onnxruntime

    disable = getattr(onnxruntime, "disable_telemetry_events", None)
    if disable is not None and os.environ.get("ORT_DISABLE_TELEMETRY", "1") != "0":
        disable()
