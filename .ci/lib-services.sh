# Shared by .ci/start-*.sh, .ci/stop-*.sh and .ci/install-*.sh (sourced, not run): cache directory, the
# non-root service user, checksum-verified downloads, locks and port checks.
#
#   KB_CI_CACHE  downloads, unpacked servers and their data (default /var/cache/kb-ci as root,
#                ~/.cache/kb-ci otherwise; as root it must be readable by the service user,
#                so not under /root, which is mode 700)
#   KB_CI_USER   the user the servers run as when started by root (default kbci; PostgreSQL
#                and Elasticsearch both refuse to run as root)

log() { printf '[%s] %s\n' "${KB_LOG_TAG:-ci}" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# Sets `fresh` from a start script's arguments: true with --fresh, which is the only one taken.
read_fresh_flag() {
  fresh=false
  local arg
  for arg in "$@"; do
    case $arg in
      --fresh) fresh=true ;;
      *) die "usage: $0 [--fresh]" ;;
    esac
  done
}

if [ "$(id -u)" = 0 ]; then
  kb_root=true
  kb_cache=${KB_CI_CACHE:-/var/cache/kb-ci}
  kb_user=${KB_CI_USER:-kbci}
else
  kb_root=false
  kb_cache=${KB_CI_CACHE:-$HOME/.cache/kb-ci}
  kb_user=$(id -un)
fi
mkdir -p "$kb_cache/downloads"
chmod 755 "$kb_cache" "$kb_cache/downloads" 2>/dev/null || true

# Runs a command as the service user (directly when we are not root), without the lock's file
# descriptor: a server started from here would otherwise inherit it and hold the lock forever.
as_user() {
  if $kb_root; then
    runuser -u "$kb_user" -- "$@" 9>&-
  else
    "$@" 9>&-
  fi
}

# Creates the system user the servers run as, when root and it does not exist yet.
ensure_user() {
  $kb_root || return 0
  id -u "$kb_user" >/dev/null 2>&1 && return 0
  log "creating system user $kb_user"
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$kb_user" 2>/dev/null || id -u "$kb_user" >/dev/null 2>&1 ||
    die "could not create user $kb_user"
}

# Fails unless the service user can reach and execute FILE (e.g. KB_CI_CACHE under /root).
check_user_can_exec() {
  as_user test -x "$1" ||
    die "user $kb_user cannot execute $1: put KB_CI_CACHE somewhere all users can enter (not under /root)"
}

# Holds an exclusive lock on NAME until the calling script exits (two CI runs sharing a cache).
# Uses file descriptor 9; start servers through as_user, which closes it.
lock() {
  exec 9>"$kb_cache/.$1.lock"
  flock -w "${KB_CI_LOCK_TIMEOUT:-900}" 9 || die "timed out waiting for the lock $kb_cache/.$1.lock"
}

sha256_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# Downloads URL to FILE unless FILE already has the SHA256; fails on a checksum mismatch.
fetch_checked() {
  local url=$1 file=$2 sha=$3
  sha256_ok "$file" "$sha" && return 0
  log "downloading $url"
  curl -fL --retry 3 --retry-delay 2 --connect-timeout 20 -sS -o "$file.part" "$url" ||
    die "download failed: $url"
  if ! sha256_ok "$file.part" "$sha"; then
    rm -f "$file.part"
    die "checksum mismatch for $url (expected sha256 $sha)"
  fi
  mv "$file.part" "$file"
}

# True when something listens on 127.0.0.1:PORT or on any address with that port.
port_busy() {
  if command -v ss >/dev/null; then
    [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

# Prints the first free port from START upwards.
free_port_from() {
  local p=$1
  while port_busy "$p"; do p=$((p + 1)); done
  echo "$p"
}

# Prints the port to start on: WANTED, or a free one when WANTED is "auto" (searching from
# DEFAULT); fails when a fixed port is taken by someone else.
choose_port() {
  local wanted=$1 default=$2 variable=$3
  if [ "$wanted" = auto ]; then
    free_port_from "$default"
    return
  fi
  case $wanted in '' | *[!0-9]*) die "$variable must be a port number or 'auto', not '$wanted'" ;; esac
  if port_busy "$wanted"; then
    die "port $wanted is already in use by another process: set $variable to a free port, or to 'auto'"
  fi
  echo "$wanted"
}

# A live process: its /proc entry exists and it is not a zombie (PID 1 may be slow to reap one).
alive() { [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# stop_process PID SECONDS: SIGTERM, then SIGKILL every 30 s once SECONDS have passed, until it has exited.
stop_process() {
  local pid=$1 timeout=$2
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + timeout))
  while alive "$pid"; do
    if [ $SECONDS -ge $deadline ]; then
      log "still running after ${timeout} s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 30))
    fi
    sleep 0.2
  done
}

# Installs Debian packages (as root, or through sudo), quietly.
apt_install() {
  local as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
