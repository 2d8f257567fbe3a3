#!/usr/bin/env bash
# Compares the exported API of every public package of the Go SDK (the modules
# pkg/ and pkg/kubeauth) with the previous release
# (test/upgrade/previous-release) using apidiff, and fails on an incompatible
# change that pkg/apidiff-accepted.txt does not list, on a listed one apidiff
# no longer reports, and on a listed one whose symbol CHANGELOG.md does not
# name (docs/sdk.md, "API stability"). Packages new since the release are
# listed as new. The release's export data is cached under bin/apidiff/<commit>.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
apidiff=${APIDIFF:?set APIDIFF to the apidiff binary (make verify builds it into bin/)}
accepted=$root/pkg/apidiff-accepted.txt
base=$(awk '/^commit /{print $2}' "$root/test/upgrade/previous-release")
cache=$root/bin/apidiff/$base
log() { echo "apidiff: $*" >&2; }

if [[ ! -d $cache/src ]]; then
  mkdir -p "$cache/src.tmp"
  git -C "$root" archive "$base" | tar -x -C "$cache/src.tmp"
  mv "$cache/src.tmp" "$cache/src"
fi

# The SDK is two modules: pkg/ and pkg/kubeauth (a pattern does not cross a
# module's boundary, so each is listed from its own directory).
declare -A moddir
pkgs=()
for m in pkg pkg/kubeauth; do
  while IFS= read -r p; do
    pkgs+=("$p")
    moddir[$p]=$root/$m
  done < <(cd "$root/$m" && go list ./... | grep -v -e '/internal/' -e '/internal$')
done

found=$(mktemp)
trap 'rm -f "$found"' EXIT
# A public package of the release that the SDK no longer has is a break too.
for p in $(cd "$cache/src" && go list github.com/dtq-dev/dtq/pkg/... | grep -v -e '/internal/' -e '/internal$'); do
  if ! printf '%s\n' "${pkgs[@]}" | grep -qxF -- "$p"; then
    echo "$p: package: removed" >>"$found"
  fi
done
for p in "${pkgs[@]}"; do
  old=$cache/$(echo "$p" | tr / _).export
  if [[ ! -f $old ]]; then
    if ! (cd "$cache/src" && go list "$p" >/dev/null 2>&1); then
      log "$p: new since the previous release ($base)"
      continue
    fi
    (cd "$cache/src" && "$apidiff" -w "$old.tmp" "$p") && mv "$old.tmp" "$old"
  fi
  (cd "${moddir[$p]}" && "$apidiff" -incompatible "$old" "$p") | sed -n 's/^- /'"${p//\//\\/}"': /p' >>"$found"
done

fail=0
while IFS= read -r line; do
  if ! grep -qxF -- "$line" <(grep -v '^#' "$accepted" 2>/dev/null); then
    log "incompatible change not accepted: $line"
    fail=1
  fi
done <"$found"
while IFS= read -r line; do
  [[ -z $line || $line == \#* ]] && continue
  if ! grep -qxF -- "$line" "$found"; then
    log "listed in pkg/apidiff-accepted.txt but no longer reported (remove it): $line"
    fail=1
  fi
  # The symbol: "(*Server).Registry: removed" -> Registry, "Config.Tracer: ..." -> Config.Tracer.
  sym=$(echo "$line" | sed -E 's/^[^:]+: //; s/: .*$//; s/^\(\*?([A-Za-z0-9_]+)\)/\1/')
  if ! grep -qF -- "$sym" "$root/CHANGELOG.md"; then
    log "accepted change not in CHANGELOG.md (name $sym there): $line"
    fail=1
  fi
done < <(cat "$accepted" 2>/dev/null)

if [[ $fail != 0 ]]; then
  log "a breaking change to the SDK must be deliberate: list it in pkg/apidiff-accepted.txt and describe it in CHANGELOG.md"
  exit 1
fi
log "$(wc -l <"$found") incompatible change(s) since $base, all accepted and changelogged; ${#pkgs[@]} packages compared"
