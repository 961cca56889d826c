#!/usr/bin/env bash
# Install Debian packages quietly, with sudo where not root; everything goes to stderr:
#   bash .ci/apt_install.sh PACKAGE...
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq "$@" >&2
