#!/usr/bin/env bash
# Makes sure redis-server is installed: from PATH, else from apt when running as
# root, else a one-line instruction. Tests start their own private servers.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "redis: redis-server not found; installing it with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends redis-server >&2
  # The package may start a system service on :6379; dtq never uses it.
  command -v redis-server >/dev/null 2>&1 && exit 0
fi
echo "redis: redis-server (Redis 7) is required: run 'sudo apt-get install -y redis-server' (or your OS's equivalent) and retry" >&2
exit 1
