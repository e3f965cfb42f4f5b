#!/usr/bin/env bash
# Debian's Chromium for the console's end-to-end tests (playwright-core drives it and downloads
# no browser). About 15 s from the Debian mirror; nothing to do when it is already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "chromium: $(chromium --version 2>/dev/null || echo present)"
  exit 0
fi
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "chromium: $(chromium --version 2>/dev/null)"
