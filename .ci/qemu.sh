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
bash "$(dirname "$0")/apt_install.sh" qemu-user
echo "qemu.sh: $(qemu-x86_64 --version | head -1)" >&2
