#!/usr/bin/env bash
# Prints the folder holding the previous release's images and Helm chart for the
# real-node upgrade (test/node, docs/upgrade-node.md), building them first when needed:
#   - test/upgrade/previous-release names the release, one line `commit <sha>` and one
#     `version <semver>`;
#   - the images come from that commit's own `make images`, run in a detached git
#     worktree of it, tagged <version>-<first 7 hex digits of the commit>, a tag no
#     build of another commit gives;
#   - the chart is that commit's dist/chart.
# The result is cached under bin/previous-release/<commit>/ (images/<name> OCI layouts,
# chart/), so only the first run per commit builds. Exits non-zero with a message when
# the file or the commit is missing (a shallow clone lacks the history).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
file="$root/test/upgrade/previous-release"
log() { echo "previous-images: $*" >&2; }
fail() { echo "previous-images: $*" >&2; exit 1; }

[[ -f $file ]] || fail "$file is missing; it names the previous release (lines 'commit <sha>' and 'version <semver>')"
commit=$(awk '$1 == "commit" {print $2}' "$file")
version=$(awk '$1 == "version" {print $2}' "$file")
[[ -n $commit && -n $version ]] || fail "$file needs a line 'commit <sha>' and a line 'version <semver>'"
sha=$(git -C "$root" rev-parse --verify --quiet "$commit^{commit}") ||
  fail "the previous release's commit $commit (test/upgrade/previous-release) is not in this repository's history; fetch it (git fetch --unshallow, or fetch the release's tag) and rerun"

dir="$root/bin/previous-release/$sha"
if [[ -f $dir/complete ]]; then
  echo "$dir"
  exit 0
fi
tag="$version-${sha:0:7}"
work=$(mktemp -d)
cleanup() {
  git -C "$root" worktree remove --force "$work/src" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
log "building the images of $version ($sha) with its own make images, tag $tag"
git -C "$root" worktree add --detach "$work/src" "$sha" >&2 || fail "git worktree add of $sha failed"
rm -rf "$dir"
mkdir -p "$dir"
make -C "$work/src" images LOCALBIN="$dir" IMAGE_TAG="$tag" >&2 || fail "make images of $sha failed"
cp -R "$work/src/dist/chart" "$dir/chart"
touch "$dir/complete"
log "cached in $dir"
echo "$dir"
