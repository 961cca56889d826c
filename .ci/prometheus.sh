#!/usr/bin/env bash
# Install Prometheus (Debian's package) for the dashboard test that evaluates every Grafana
# panel query against a real Prometheus scraping the proxy on loopback. The test starts and
# stops its own Prometheus; this only makes the binary available.
set -euo pipefail
if ! command -v prometheus >/dev/null 2>&1; then
    echo "prometheus.sh: installing prometheus" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends prometheus >&2
fi
