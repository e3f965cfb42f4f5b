#!/usr/bin/env bash
# Debian's HAProxy, the load balancer `npm run bench:cluster` puts in front of the API processes
# (docs/deployment.md shows its configuration). Nothing to do when it is already installed.
set -euo pipefail
if command -v haproxy >/dev/null 2>&1; then
  haproxy -v | sed -n 1p
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"
apt_install haproxy
haproxy -v | sed -n 1p
