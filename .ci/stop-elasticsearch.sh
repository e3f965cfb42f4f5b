#!/usr/bin/env bash
# Stops the Elasticsearch started by .ci/start-elasticsearch.sh (by its pidfile: SIGTERM, then
# SIGKILL after KB_ES_STOP_TIMEOUT seconds, default 60) and waits for it to exit. Keeps its data.
# Does nothing when it is not running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=elasticsearch
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"

run=${KB_ES_DIR:-$kb_cache/elasticsearch}
pidfile=$run/elasticsearch.pid
stop_timeout=${KB_ES_STOP_TIMEOUT:-60}

is_ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q "org.elasticsearch.*-Djava.io.tmpdir=$run/tmp "; }

pid=$(cat "$pidfile" 2>/dev/null || true)
# Only a live process that is this Elasticsearch: the pid may have been reused since. Without a
# usable pidfile (killed during startup), look for the JVM by its tmpdir, which is ours alone.
if [ -z "$pid" ] || ! is_ours "$pid"; then
  pid=
  for dir in /proc/[0-9]*; do
    if is_ours "${dir#/proc/}"; then
      pid=${dir#/proc/}
      break
    fi
  done
fi
if [ -z "$pid" ]; then
  log "not running"
  rm -f "$pidfile"
  exit 0
fi
log "stopping Elasticsearch (pid $pid)"
stop_process "$pid" "$stop_timeout"
rm -f "$pidfile"
log "stopped"
