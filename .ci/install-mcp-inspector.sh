#!/usr/bin/env bash
# The MCP Inspector (its command-line mode drives /mcp in test/mcp.test.ts) with the Node 22 it
# needs, both from the npm registry (the Node binary as the node-<platform>-<arch> package), in
# the CI cache. About 20 s the first time; nothing to do afterwards. Its last line is the
# command to run the Inspector with (`--cli ...` follows).
set -euo pipefail
cd "$(dirname "$0")/.."
KB_LOG_TAG=mcp-inspector
# shellcheck source=lib-services.sh
source .ci/lib-services.sh

inspector_version=2.12.0
node_version=22.23.5
platform=$(node -p 'process.platform + "-" + process.arch')
prefix="$kb_cache/mcp-inspector-$inspector_version-node-$node_version"
node_bin="$prefix/node_modules/node-$platform/bin/node"
launcher="$prefix/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"

lock mcp-inspector
if [ ! -x "$node_bin" ] || [ ! -f "$launcher" ]; then
  log "installing @modelcontextprotocol/inspector@$inspector_version and node-$platform@$node_version"
  mkdir -p "$prefix"
  # The Inspector's postinstall only builds its clients in a source checkout: not needed here.
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error \
    "node-$platform@$node_version" "@modelcontextprotocol/inspector@$inspector_version" >&2
fi
"$node_bin" --version >/dev/null || die "the Node $node_version binary of node-$platform does not run here"
echo "$node_bin $launcher"
