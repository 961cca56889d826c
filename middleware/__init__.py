"""The streaming fact-checking proxy's engine. Importing it first turns off the usage
telemetry of the libraries it loads (``middleware.telemetry``): nothing phones home."""

from middleware.telemetry import disable_telemetry as _disable_telemetry

_disable_telemetry()
