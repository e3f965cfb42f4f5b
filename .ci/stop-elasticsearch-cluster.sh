#!/usr/bin/env bash
# Stops the nodes started by .ci/start-elasticsearch-cluster.sh (SIGTERM, then SIGKILL after
# KB_ES_STOP_TIMEOUT seconds, default 60) and waits for them to exit. Keeps their data.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=elasticsearch-cluster
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"
# shellcheck source=lib-elasticsearch.sh
. "$here/lib-elasticsearch.sh"

root=${KB_ES_CLUSTER_DIR:-$kb_cache/elasticsearch-cluster}
for n in 1 2 3; do
  if pid=$(elasticsearch_pid_in "$root/node-$n"); then
    log "stopping node-$n (pid $pid)"
    stop_process "$pid" "${KB_ES_STOP_TIMEOUT:-60}"
  fi
done
