#!/usr/bin/env bash
# Stops the llama.cpp server started by .ci/start-llama.sh (by its pid file: SIGTERM, then
# SIGKILL after 30 s) and waits for it to exit. Does nothing when it is not running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=llama
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"

run=${KB_LLAMA_DIR:-$kb_cache/llama}
pidfile=$run/llama.pid
model=$kb_cache/gemma-3-270m-q4_k_m.gguf

pid=$(sed -n 1p "$pidfile" 2>/dev/null || true)
# Only a live process that is this server: the pid may have been reused since.
if [ -z "$pid" ] || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "llama-server.py --model $model "; then
  log "not running"
  rm -f "$pidfile"
  exit 0
fi
log "stopping the llama.cpp server (pid $pid)"
stop_process "$pid" 30
rm -f "$pidfile"
log "stopped"
