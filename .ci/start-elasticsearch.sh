#!/usr/bin/env bash
# Starts a single-node Elasticsearch 8.19.21 for the test matrix and prints its URL on the last
# line of stdout (everything else goes to stderr). The server is Maven Central's integ-test-zip
# distribution (no bundled JDK, sha256 pinned below) run on Temurin 25, as a non-root user, on
# 127.0.0.1, security off, 1 GiB heap. Idempotent: a running server is reused.
#
#   .ci/start-elasticsearch.sh [--fresh]   --fresh stops it and wipes its data and logs
#   .ci/stop-elasticsearch.sh
#
#   KB_ES_PORT      HTTP port (default 9201; 'auto' takes the first free one from 9201); fails
#                   when the port is taken by someone else
#   KB_ES_DIR       config, data, logs and pidfile (default $KB_CI_CACHE/elasticsearch)
#   KB_ES_HEAP      heap size (default 1g)
#   KB_ES_TIMEOUT   seconds to wait for the cluster to turn yellow (default 90)
#   ES_JAVA_HOME    JDK (default /usr/lib/jvm/temurin-25-jdk-amd64)
#   KB_CI_CACHE, KB_CI_USER: see .ci/lib-services.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=elasticsearch
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"
# shellcheck source=lib-elasticsearch.sh
. "$here/lib-elasticsearch.sh"

read_fresh_flag "$@"

run=${KB_ES_DIR:-$kb_cache/elasticsearch}
pidfile=$run/elasticsearch.pid
heap=${KB_ES_HEAP:-1g}
timeout=${KB_ES_TIMEOUT:-90}
cluster=kb-ci

cd /
lock elasticsearch
ensure_user

# The process in the pidfile, when it is alive and is Elasticsearch.
running_pid() {
  local pid
  pid=$(cat "$pidfile" 2>/dev/null) || return 1
  [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
    grep -q "org.elasticsearch.*-Djava.io.tmpdir=$run/tmp " || return 1
  echo "$pid"
}

healthy() {
  curl -fsS -o /dev/null --max-time 10 \
    "http://127.0.0.1:$1/_cluster/health?wait_for_status=yellow&timeout=5s" 2>/dev/null
}


# Waits until DEADLINE (in $SECONDS) for the cluster to turn yellow; on timeout prints the log's
# tail, stops the server and fails.
wait_healthy() {
  local port=$1 pid=$2 deadline=$3
  until healthy "$port"; do
    if ! alive "$pid"; then
      tail -n 60 "$run/logs/$cluster.log" >&2 2>/dev/null || true
      die "Elasticsearch (pid $pid) exited during startup; log: $run/logs/$cluster.log"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 60 "$run/logs/$cluster.log" >&2 2>/dev/null || true
      "$here/stop-elasticsearch.sh" 9>&- || true
      die "no yellow cluster on port $port within ${timeout}s; log: $run/logs/$cluster.log"
    fi
    sleep 1
  done
}

if $fresh && running_pid >/dev/null; then
  "$here/stop-elasticsearch.sh" 9>&-
fi

if pid=$(running_pid); then
  port=$(cat "$run/http.port")
  log "already running on port $port (pid $pid)"
  if [ -n "${KB_ES_PORT:-}" ] && [ "$KB_ES_PORT" != auto ] && [ "$KB_ES_PORT" != "$port" ]; then
    die "the running Elasticsearch listens on port $port, not $KB_ES_PORT: run .ci/stop-elasticsearch.sh first"
  fi
  wait_healthy "$port" "$pid" $((SECONDS + timeout))
  echo "http://127.0.0.1:$port"
  exit 0
fi

install_elasticsearch

# Instance directory: its own config (copied from the distribution), data, logs and tmp.
port=$(choose_port "${KB_ES_PORT:-9201}" 9201 KB_ES_PORT)
rm -f "$pidfile"
if $fresh; then
  log "wiping $run/data and $run/logs"
  rm -rf "$run/data" "$run/logs"
fi
mkdir -p "$run/data" "$run/logs" "$run/tmp"
rm -rf "$run/config"
cp -r "$install/config" "$run/config"
cat >"$run/config/elasticsearch.yml" <<YAML
cluster.name: $cluster
node.name: $cluster
path.data: $run/data
path.logs: $run/logs
discovery.type: single-node
network.host: 127.0.0.1
http.port: $port
xpack.security.enabled: false
cluster.routing.allocation.disk.threshold_enabled: false
YAML
echo "$port" >"$run/http.port"
chown -R "$kb_user": "$run"

log "starting Elasticsearch $es_version on 127.0.0.1:$port (log $run/logs/$cluster.log)"
# (The server's JVM runs in path.logs, where jvm.options' relative gc.log and hs_err files land.)
cd "$run"
deadline=$((SECONDS + timeout))
if ! as_user env ES_JAVA_HOME="$java_home" ES_JAVA_OPTS="-Xms$heap -Xmx$heap" \
  ES_PATH_CONF="$run/config" ES_TMPDIR="$run/tmp" \
  timeout "$timeout" "$install/bin/elasticsearch" -d -p "$pidfile" >"$run/startup.out" 2>&1; then
  # (-q cannot go with -d: the launcher's console copy of the log goes to startup.out instead.)
  tail -n 60 "$run/startup.out" >&2 || true
  cd /
  "$here/stop-elasticsearch.sh" 9>&- || true
  die "Elasticsearch did not start"
fi
cd /
for _ in $(seq 1 50); do
  pid=$(running_pid) && break
  sleep 0.2
done
[ -n "${pid:-}" ] || die "Elasticsearch started but wrote no pidfile at $pidfile"
wait_healthy "$port" "$pid" "$deadline"
log "ready (pid $pid)"
echo "http://127.0.0.1:$port"
