#!/usr/bin/env bash
# Install Debian's chromium and chromium-driver for the browser tests (tests/adapters/ui/test_ui_browser.py)
# when /usr/bin/chromium is missing. The tests drive it with Playwright's Python client
# (no browser download: they launch /usr/bin/chromium directly).
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    echo "chromium.sh: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed" >&2
    exit 0
fi
echo "chromium.sh: installing chromium and chromium-driver" >&2
bash "$(dirname "$0")/apt_install.sh" chromium chromium-driver
echo "chromium.sh: $(/usr/bin/chromium --version 2>/dev/null)" >&2
