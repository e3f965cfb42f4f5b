#!/usr/bin/env bash
# Installs PostgreSQL from Debian (if missing), starts it on 127.0.0.1:5432 and creates the
# test role and database (dropped and made anew with --fresh). Prints the DATABASE_URL to use
# on its last line.
set -euo pipefail
fresh=false
[ "${1:-}" = "--fresh" ] && fresh=true
database=${KB_TEST_DATABASE:-kb_test}
if ! command -v pg_ctlcluster >/dev/null || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -n | tail -1)
if ! pg_lsclusters -h | grep -q "^$version main"; then
  pg_createcluster "$version" main >/dev/null
fi
pg_ctlcluster "$version" main start 2>/dev/null || true
for _ in $(seq 1 30); do
  runuser -u postgres -- pg_isready -q -h 127.0.0.1 && break
  sleep 1
done
runuser -u postgres -- psql -q -v ON_ERROR_STOP=1 <<'SQL' >/dev/null
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kb') THEN
    CREATE ROLE kb LOGIN PASSWORD 'kb' CREATEDB;
  END IF;
END $$;
SQL
if $fresh; then
  runuser -u postgres -- dropdb --if-exists "$database"
fi
if ! runuser -u postgres -- psql -tAc "SELECT 1 FROM pg_database WHERE datname = '$database'" | grep -q 1; then
  runuser -u postgres -- createdb -O kb "$database"
fi
echo "postgresql://kb:kb@127.0.0.1:5432/$database"
