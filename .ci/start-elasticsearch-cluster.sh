#!/usr/bin/env bash
# Starts a three-node Elasticsearch cluster on 127.0.0.1 for the test of the service on a cluster
# (test/elasticsearch-cluster.test.ts) and prints the nodes' URLs, comma-separated, on the last
# line of stdout (everything else goes to stderr). The same distribution as
# .ci/start-elasticsearch.sh; each node has its own directory, 512 MB heap (KB_ES_HEAP), security off.
# Idempotent: nodes that run are kept, nodes that were killed (the test kills one) start again,
# and it waits until all three have joined and the cluster is green.
#
#   .ci/start-elasticsearch-cluster.sh [--fresh]   --fresh stops the nodes and wipes their data
#   .ci/stop-elasticsearch-cluster.sh
#
#   KB_ES_CLUSTER_DIR      the nodes' directories (default $KB_CI_CACHE/elasticsearch-cluster)
#   KB_ES_CLUSTER_PORT     HTTP port of the first node (default 9211; the others follow, and
#                          transport ports are 100 above)
#   KB_ES_TIMEOUT          seconds to wait for a green cluster (default 120)
#   KB_ES_HEAP             heap of each node (default 512m), for nodes started by this call
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=elasticsearch-cluster
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"
# shellcheck source=lib-elasticsearch.sh
. "$here/lib-elasticsearch.sh"

read_fresh_flag "$@"

root=${KB_ES_CLUSTER_DIR:-$kb_cache/elasticsearch-cluster}
first_port=${KB_ES_CLUSTER_PORT:-9211}
timeout=${KB_ES_TIMEOUT:-120}
heap=${KB_ES_HEAP:-512m}
cluster=kb-ci-cluster
nodes=(1 2 3)

cd /
lock elasticsearch-cluster
ensure_user
if $fresh; then
  "$here/stop-elasticsearch-cluster.sh" 9>&-
  rm -rf "$root"
fi
install_elasticsearch

seeds=$(printf '"127.0.0.1:%s",' $((first_port + 100)) $((first_port + 101)) $((first_port + 102)))
urls=$(printf 'http://127.0.0.1:%s,' "$first_port" $((first_port + 1)) $((first_port + 2)))
deadline=$((SECONDS + timeout))
for n in "${nodes[@]}"; do
  run=$root/node-$n
  port=$((first_port + n - 1))
  if pid=$(elasticsearch_pid_in "$run"); then
    log "node-$n already running on port $port (pid $pid)"
    continue
  fi
  port_busy "$port" && die "port $port is in use by another process: set KB_ES_CLUSTER_PORT"
  mkdir -p "$run/data" "$run/logs" "$run/tmp"
  rm -rf "$run/config"
  cp -r "$install/config" "$run/config"
  cat >"$run/config/elasticsearch.yml" <<YAML
cluster.name: $cluster
node.name: node-$n
path.data: $run/data
path.logs: $run/logs
network.host: 127.0.0.1
http.port: $port
transport.port: $((port + 100))
discovery.seed_hosts: [${seeds%,}]
cluster.initial_master_nodes: ["node-1", "node-2", "node-3"]
xpack.security.enabled: false
cluster.routing.allocation.disk.threshold_enabled: false
YAML
  chown -R "$kb_user": "$run"
  log "starting node-$n on 127.0.0.1:$port (log $run/logs/$cluster.log)"
  cd "$run"
  if ! as_user env ES_JAVA_HOME="$java_home" ES_JAVA_OPTS="-Xms${heap} -Xmx${heap}" \
    ES_PATH_CONF="$run/config" ES_TMPDIR="$run/tmp" \
    timeout "$timeout" "$install/bin/elasticsearch" -d -p "$run/elasticsearch.pid" >"$run/startup.out" 2>&1; then
    tail -n 60 "$run/startup.out" >&2 || true
    cd /
    die "node-$n did not start"
  fi
  cd /
done

until curl -fsS -o /dev/null --max-time 10 \
  "http://127.0.0.1:$first_port/_cluster/health?wait_for_status=green&wait_for_nodes=3&timeout=5s" 2>/dev/null; do
  if [ $SECONDS -ge $deadline ]; then
    for n in "${nodes[@]}"; do tail -n 20 "$root/node-$n/logs/$cluster.log" >&2 2>/dev/null || true; done
    die "no green cluster of three nodes within ${timeout}s; logs: $root/node-*/logs"
  fi
  sleep 1
done
log "ready: three nodes, green"
echo "${urls%,}"
