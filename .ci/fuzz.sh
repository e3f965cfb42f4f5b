#!/usr/bin/env bash
# Fuzzes the REST API with schemathesis against its own description (/openapi.json): a server on
# the embedded store in a new data directory, every operation, every check schemathesis has
# (server errors, status codes, content types, headers and bodies against the description, that
# invalid input is refused and valid input accepted, stateful links). Fails on any failure or
# when fewer than KB_FUZZ_MIN_REQUESTS requests were sent.
#
# schemathesis's own output goes to schemathesis-report/schemathesis.log, not to the terminal: it
# closes with a pytest-style session line ("=== N passed in 60s ==="), and CI takes the last test
# runner summary it sees as the run's count. This script prints one line of its own instead
# (requests, failures, the seed to replay) and, on failure, the failures section of the log.
#
#   .ci/fuzz.sh
#
#   KB_FUZZ_PORT          port of the server under test (default 3917)
#   KB_FUZZ_MAX_EXAMPLES  test cases per operation and phase (default 60)
#   KB_FUZZ_MIN_REQUESTS  fewest requests for a pass (default 1000)
#   KB_FUZZ_SEED          seed, to replay a run
#   KB_CI_CACHE           where schemathesis's virtualenv is kept (see lib-services.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
KB_LOG_TAG=fuzz
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"

schemathesis_version=4.32.5
port=${KB_FUZZ_PORT:-3917}
max_examples=${KB_FUZZ_MAX_EXAMPLES:-60}
min_requests=${KB_FUZZ_MIN_REQUESTS:-1000}

venv="$kb_cache/schemathesis-$schemathesis_version"
if [ ! -x "$venv/bin/schemathesis" ]; then
  log "installing schemathesis $schemathesis_version from PyPI into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --disable-pip-version-check -q "schemathesis==$schemathesis_version" >&2 || die "pip install schemathesis failed"
fi

work=$(mktemp -d)
report="$root/schemathesis-report"
rm -rf "$report"
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# A JWT, not an API key: the fuzzer revokes every key it can list, its own included.
secret=$(node -e "console.log(require('node:crypto').randomBytes(32).toString('hex'))")
log "starting the server on 127.0.0.1:$port (embedded store in $work)"
(
  cd "$root"
  exec env PORT=$port HOST=127.0.0.1 KB_DATA_DIR="$work/data" DATABASE_URL= ELASTICSEARCH_URL= OPENAI_BASE_URL= \
    KB_JWT_SECRET="$secret" node bin/kb.mjs serve
) >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; die "the server exited"; }
  sleep 1
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { cat "$work/server.log" >&2; die "the server did not become ready"; }

admin_key=$(grep -o 'sk_[A-Za-z0-9]*' "$work/server.log" | head -n 1)
[ -n "$admin_key" ] || die "no admin key in the server log"
admin_id=$(curl -fsS -H "Authorization: Bearer $admin_key" "http://127.0.0.1:$port/v1/user/me" | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(JSON.parse(s).id))")
token=$(cd "$root" && node --input-type=module -e "
import { SignJWT } from 'jose';
const scopes = 'user:read user:write kb:read kb:write chat:read chat:write';
console.log(await new SignJWT({ scope: scopes }).setProtectedHeader({ alg: 'HS256' }).setSubject('$admin_id').setIssuedAt().setExpirationTime('3h').sign(new TextEncoder().encode('$secret')));
")

seed_args=()
[ -n "${KB_FUZZ_SEED:-}" ] && seed_args=(--seed "$KB_FUZZ_SEED")
log "running schemathesis ($max_examples examples per operation and phase); its output goes to $report/schemathesis.log"
mkdir -p "$report"
output="$report/schemathesis.log"
status=0
(
  cd "$root"
  "$venv/bin/schemathesis" --config-file "$here/schemathesis.toml" run "http://127.0.0.1:$port/openapi.json" \
    -H "Authorization: Bearer $token" \
    --max-examples "$max_examples" \
    --report ndjson,junit --report-dir "$report" \
    --no-color "${seed_args[@]}"
) >"$output" 2>&1 || status=$?

served=$(grep -c '"msg":"request"' "$work/server.log" || true)
seed=$(sed -n 's/^Seed: *\([0-9][0-9]*\).*/\1/p' "$output" | tail -n 1)
seed=${seed:-${KB_FUZZ_SEED:-unknown}}
failures=$(grep -c '^_\{3,\} .* _\{3,\}$' "$output" || true)
if [ "$status" -ne 0 ]; then
  # The failures section only: the closing summary would read as a test count.
  awk '/^=+ FAILURES =+$/ { show = 1; next } /^=+ [A-Z ]+ =+$/ { show = 0 } show' "$output" | head -n 300 >&2
  tail -n 200 "$work/server.log" | grep -v '"msg":"request"' >&2 || true
  log "schemathesis: $served requests, $failures operations with failures (exit $status), seed $seed (replay: KB_FUZZ_SEED=$seed bash .ci/fuzz.sh); full output in $output"
  exit 1
fi
[ "$served" -ge "$min_requests" ] || die "only $served requests were sent (at least $min_requests wanted); see $output"
if grep -qE '^[0-9T:.-]+Z error ' "$work/server.log"; then grep -E -A8 '^[0-9T:.-]+Z error ' "$work/server.log" | head -n 60 >&2; die "the server logged errors during the run"; fi
log "schemathesis: $served requests, no failures, seed $seed (replay: KB_FUZZ_SEED=$seed bash .ci/fuzz.sh); full output in $output"
