#!/usr/bin/env bash
# LiteLLM's proxy for the load comparison, in its own virtualenv (never the project's):
# pinned to 1.82.6, the last release before the compromised 1.82.7/1.82.8.
set -euo pipefail
VENV="${1:-${FACTCHECK_HOME:-$HOME/.cache/factcheck}/litellm-venv}"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet 'litellm[proxy]==1.82.6'
echo "$VENV/bin/litellm"
