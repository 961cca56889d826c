#!/usr/bin/env bash
# Install Debian's qemu-user when qemu-x86_64 is missing: tests/middleware/runtime/test_cpu.py runs
# a runtime session under `qemu-x86_64 -cpu Haswell-v4`, an AVX2-only CPU (no AVX-512, no VNNI),
# whose int8 kernel must get the exact-products switch (issue 47; about 30 s).
set -euo pipefail

if command -v qemu-x86_64 >/dev/null 2>&1; then
    echo "qemu.sh: $(qemu-x86_64 --version | head -1) already installed" >&2
    exit 0
fi
echo "qemu.sh: installing qemu-user" >&2
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq qemu-user >&2
echo "qemu.sh: $(qemu-x86_64 --version | head -1)" >&2
