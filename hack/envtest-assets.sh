#!/usr/bin/env bash
# Prints the folder holding kube-apiserver, etcd and kubectl for envtest, making it
# first when needed: setup-envtest's download where the network allows it, otherwise
# a build from the Go module proxy (see ../shared/ENVIRONMENT.md). The result is
# cached under bin/k8s/<version>-<os>-<arch>, so only the first run pays.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
STAGING_VERSION=${STAGING_VERSION:-0.37.2}
ETCD_MODULE_VERSION=${ETCD_MODULE_VERSION:-}
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/bin/k8s/${K8S_VERSION}-$(go env GOOS)-$(go env GOARCH)"
log() { echo "envtest-assets: $*" >&2; }

if [[ -x "$dir/kube-apiserver" && -x "$dir/etcd" && -x "$dir/kubectl" ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$dir"

# 1. The normal download. It fails fast where only the module proxy is reachable.
if [[ "${ENVTEST_SKIP_DOWNLOAD:-}" != 1 ]]; then
  log "trying setup-envtest download of ${K8S_VERSION}"
  if GOBIN="$root/bin" go install sigs.k8s.io/controller-runtime/tools/setup-envtest@latest >/dev/null 2>&1 &&
    got=$(timeout 60 "$root/bin/setup-envtest" use "$K8S_VERSION" --bin-dir "$root/bin/download" -p path 2>/dev/null) &&
    [[ -x "$got/kube-apiserver" ]]; then
    cp "$got"/* "$dir/"
    echo "$dir"
    exit 0
  fi
  log "download unavailable; building kube-apiserver and etcd from the Go module proxy (about 5 minutes, once)"
fi

# 2. Build from source in a throwaway module that pins kubernetes and its staging repos.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
staging="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller streaming"
{
  echo "module envtestbuild"
  echo
  echo "go 1.26"
  echo
  echo "require k8s.io/kubernetes v${K8S_VERSION}"
  for m in $staging; do echo "replace k8s.io/$m => k8s.io/$m v${STAGING_VERSION}"; done
} >"$work/go.mod"
cat >"$work/tools.go" <<'EOF'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
EOF
cd "$work"
GOFLAGS=-mod=mod go mod tidy >&2
minor=${K8S_VERSION#*.}
minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION}"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v${K8S_VERSION}"
log "building etcd"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3
log "building kube-apiserver"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
log "building kubectl"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl
for b in etcd kube-apiserver kubectl; do mv "$dir/$b.tmp" "$dir/$b"; done
log "cached in $dir"
echo "$dir"
