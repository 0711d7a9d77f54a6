#!/usr/bin/env bash
# Builds and caches the parts of a local seed's node (test/localnode), next to what `make testbin` caches already, and
# links them into BIN-DIR:
#
#   build-node.sh KUBE-VERSION CACHE BIN-DIR
#
# Debian packages what it packages better (runc, the CNI plugins, iptables, conntrack, a static busybox): installed
# with apt-get when missing. The rest are Go programs built from the Go module proxy, each cached under
# CACHE/<part>-<version>: kubelet, kube-proxy, kube-scheduler and kubectl (build-kube.sh), containerd v2 with ctr and
# its runc shim, CoreDNS and local-path-provisioner (build-module.sh). A cold build takes long on 2 cores (kubelet
# about 8 minutes, CoreDNS about 10, the others 1-5 each), so it says which part it builds, how many are done and
# roughly how long is left; a failed part is named with the command that retries it. Cached parts take no time.
set -euo pipefail
kube=${1:?kubernetes version, e.g. v1.36.3}
cache=${2:?cache directory}
bindir=${3:?bin directory}
here=$(cd "$(dirname "$0")" && pwd)
CONTAINERD_VERSION=v2.4.2
COREDNS_VERSION=v1.14.7
LOCAL_PATH_VERSION=v0.0.30

"$here/host-packages.sh"

# name|cached binary|rough cold minutes|command
parts=(
  "kubelet|$cache/kubelet-$kube/kubelet|8|$here/build-kube.sh $kube $cache kubelet"
  "kube-proxy|$cache/kube-proxy-$kube/kube-proxy|3|$here/build-kube.sh $kube $cache kube-proxy"
  "kube-scheduler|$cache/kube-scheduler-$kube/kube-scheduler|3|$here/build-kube.sh $kube $cache kube-scheduler"
  "kubectl|$cache/kubectl-$kube/kubectl|4|$here/build-kube.sh $kube $cache kubectl"
  "containerd|$cache/containerd-$CONTAINERD_VERSION/containerd-shim-runc-v2|4|$here/build-module.sh $cache/containerd-$CONTAINERD_VERSION github.com/containerd/containerd/v2@$CONTAINERD_VERSION -tags no_btrfs,no_devmapper,no_zfs,no_aufs cmd/containerd cmd/ctr cmd/containerd-shim-runc-v2"
  "coredns|$cache/coredns-$COREDNS_VERSION/coredns|10|$here/build-module.sh $cache/coredns-$COREDNS_VERSION github.com/coredns/coredns@$COREDNS_VERSION .=coredns"
  "local-path-provisioner|$cache/local-path-provisioner-$LOCAL_PATH_VERSION/local-path-provisioner|5|$here/build-module.sh $cache/local-path-provisioner-$LOCAL_PATH_VERSION github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION .=local-path-provisioner"
)
total=${#parts[@]}
left=0
for p in "${parts[@]}"; do
  IFS='|' read -r _ bin mins _ <<<"$p"
  [ -x "$bin" ] || left=$((left + mins))
done
done_=0
for p in "${parts[@]}"; do
  IFS='|' read -r name bin mins cmd <<<"$p"
  if [ ! -x "$bin" ]; then
    echo "node part $((done_ + 1))/$total: building $name (about $mins min cold; roughly $left min left in all)"
    start=$SECONDS
    # shellcheck disable=SC2086 # cmd is a word list made above
    if ! $cmd; then
      echo "build-node: building $name failed; retry it with: $cmd" >&2
      exit 1
    fi
    echo "node part $((done_ + 1))/$total: $name built in $((SECONDS - start)) s"
    left=$((left - mins))
  fi
  done_=$((done_ + 1))
done
mkdir -p "$bindir/node"
# The sandbox image's binary is the project's own (deploy/images/pause): rebuilt each time, which Go's cache makes free.
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$bindir/node/pause" ./deploy/images/pause
for p in "${parts[@]}"; do
  IFS='|' read -r _ bin _ _ <<<"$p"
  for f in "$(dirname "$bin")"/*; do
    case $f in *.partial) continue ;; esac
    ln -sfn "$f" "$bindir/node/$(basename "$f")"
  done
done
