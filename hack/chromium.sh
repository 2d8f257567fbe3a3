#!/usr/bin/env bash
# Makes sure a headless Chromium is installed for the console's browser tests
# (test/e2e TestConsole): from PATH, else from apt when running as root, else
# a one-line instruction. The tests start their own browser.
set -euo pipefail

have() {
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1
}
if have; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium: no Chromium found; installing Debian's chromium with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium >&2
  have && exit 0
fi
echo "chromium: the console's browser tests need Chromium: run 'sudo apt-get install -y chromium' (or install Chrome) and retry" >&2
exit 1
