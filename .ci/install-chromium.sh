#!/usr/bin/env bash
# Debian's Chromium for the console's end-to-end tests (playwright-core drives it and downloads
# no browser). About 15 s from the Debian mirror; nothing to do when it is already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium: $(chromium --version 2>/dev/null || echo present)"
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"
apt_install chromium
echo "chromium: $(chromium --version 2>/dev/null)"
