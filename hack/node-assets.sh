#!/usr/bin/env bash
# Prints the folder holding the parts of a real Kubernetes node for test/node,
# making it first when needed (see docs/install.md, "A real node"):
#   - kubelet, kube-scheduler and kube-controller-manager built from k8s.io/kubernetes
#     at the envtest version, as hack/envtest-assets.sh builds kube-apiserver;
#   - containerd 2.x, containerd-shim-runc-v2 and ctr built from the Go module proxy
#     (CGO_ENABLED=0, tags no_btrfs no_devmapper no_zfs);
#   - runc and the CNI plugins (bridge, host-local, loopback) from Debian's apt;
#   - a sandbox ("pause") image built here (hack/pause), as an OCI archive for
#     `ctr images import`.
# The result is cached under bin/node/<version>-<os>-<arch>, so only the first run pays.
# Exits non-zero with a message naming the step when one cannot run.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
STAGING_VERSION=${STAGING_VERSION:-0.37.2}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-2.2.9}
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/bin/node/${K8S_VERSION}-$(go env GOOS)-$(go env GOARCH)"
log() { echo "node-assets: $*" >&2; }
fail() { echo "node-assets: $*" >&2; exit 1; }

k8s_bins="kubelet kube-scheduler kube-controller-manager"
ctrd_bins="containerd containerd-shim-runc-v2 ctr"
have_all() {
  for b in $k8s_bins $ctrd_bins; do [[ -x "$dir/$b" ]] || return 1; done
  [[ -f "$dir/pause.tar" ]] || return 1
  command -v runc >/dev/null && [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]]
}
if have_all; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"

# 1. Debian packages: runc and the CNI plugins.
if ! command -v runc >/dev/null || [[ ! -x /usr/lib/cni/bridge ]]; then
  log "installing runc and containernetworking-plugins with apt-get"
  if [[ $(id -u) != 0 ]]; then
    fail "runc and containernetworking-plugins are missing and this is not root; install them (apt-get install runc containernetworking-plugins) and rerun"
  fi
  { apt-get install -y --no-install-recommends runc containernetworking-plugins >&2 ||
    { apt-get update >&2 && apt-get install -y --no-install-recommends runc containernetworking-plugins >&2; }; } ||
    fail "apt-get could not install runc and containernetworking-plugins; install them by hand and rerun"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 2. kubelet, kube-scheduler, kube-controller-manager, in a throwaway module that
# pins kubernetes and its staging repos (the same module as hack/envtest-assets.sh).
need_k8s=0
for b in $k8s_bins; do [[ -x "$dir/$b" ]] || need_k8s=1; done
if [[ $need_k8s == 1 ]]; then
  staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller streaming"
  mkdir -p "$work/k8s"
  {
    echo "module nodebuild"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    for m in $staging; do echo "replace k8s.io/$m => k8s.io/$m v${STAGING_VERSION}"; done
  } >"$work/k8s/go.mod"
  cat >"$work/k8s/tools.go" <<'EOT'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOT
  minor=${K8S_VERSION#*.}
  minor=${minor%%.*}
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v${K8S_VERSION}"
  (cd "$work/k8s" && GOFLAGS=-mod=mod go mod tidy >&2) || fail "go mod tidy of k8s.io/kubernetes v${K8S_VERSION} failed (is the Go module proxy reachable?)"
  for b in $k8s_bins; do
    [[ -x "$dir/$b" ]] && continue
    log "building $b v${K8S_VERSION}"
    (cd "$work/k8s" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$b.tmp" "k8s.io/kubernetes/cmd/$b") ||
      fail "building $b failed"
    mv "$dir/$b.tmp" "$dir/$b"
  done
fi

# 3. containerd 2.x, its runc shim and ctr.
need_ctrd=0
for b in $ctrd_bins; do [[ -x "$dir/$b" ]] || need_ctrd=1; done
if [[ $need_ctrd == 1 ]]; then
  mkdir -p "$work/ctrd"
  printf 'module ctrdbuild\n\ngo 1.26\n\nrequire github.com/containerd/containerd/v2 v%s\n' "$CONTAINERD_VERSION" >"$work/ctrd/go.mod"
  cat >"$work/ctrd/tools.go" <<'EOT'
//go:build tools

package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
EOT
  (cd "$work/ctrd" && GOFLAGS=-mod=mod go mod tidy >&2) || fail "go mod tidy of containerd v${CONTAINERD_VERSION} failed (is the Go module proxy reachable?)"
  ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=v${CONTAINERD_VERSION}"
  for b in $ctrd_bins; do
    [[ -x "$dir/$b" ]] && continue
    log "building $b v${CONTAINERD_VERSION}"
    (cd "$work/ctrd" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ldflags" \
      -o "$dir/$b.tmp" "github.com/containerd/containerd/v2/cmd/$b") || fail "building $b failed"
    mv "$dir/$b.tmp" "$dir/$b"
  done
fi

# 4. The sandbox image.
if [[ ! -f "$dir/pause.tar" ]]; then
  log "building the pause image"
  (cd "$root" && go run ./hack/pause -out "$dir/pause.tar.tmp") || fail "building the pause image failed"
  mv "$dir/pause.tar.tmp" "$dir/pause.tar"
fi
log "cached in $dir"
echo "$dir"
