#!/usr/bin/env bash
# Makes sure python3 and node are installed: the dev stack's stand-in kubelet
# runs the HTTP handler examples (examples/http-handlers) as local processes.
# From PATH, else from apt when running as root, else a one-line instruction.
set -euo pipefail

missing=()
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "handler-runtimes: ${missing[*]} not found; installing with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  command -v python3 >/dev/null 2>&1 && command -v node >/dev/null 2>&1 && exit 0
fi
echo "handler-runtimes: ${missing[*]} required: run 'sudo apt-get install -y ${missing[*]}' and retry" >&2
exit 1
