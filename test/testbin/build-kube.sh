#!/usr/bin/env bash
# Builds Kubernetes binaries (k8s.io/kubernetes/cmd/<name>) of one version from Go modules: the seed of the tests.
#
#   build-kube.sh VERSION CACHE NAME...
#
# Each NAME (kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubelet, kubectl) is built into
# CACHE/NAME-VERSION/NAME; a NAME whose binary is already there is skipped, so a cache holding only kube-apiserver
# gets the controller-manager without rebuilding the apiserver. k8s.io/kubernetes replaces its staging modules with ./staging, which a dependency cannot use, so a
# throwaway module requires it and replaces every staging module with its published v0.<minor>.<patch> version; one
# `go mod tidy` serves every binary. Only the Go module proxy is used. About 5 minutes per binary on 2 cores.
set -euo pipefail
version=${1:?version, e.g. v1.36.3}
cache=${2:?cache directory}
shift 2
[ $# -gt 0 ] || { echo "usage: $0 VERSION CACHE NAME..." >&2; exit 2; }
names=()
for name in "$@"; do
  case $name in
    kube-apiserver | kube-controller-manager | kube-scheduler | kube-proxy | kubelet | kubectl) ;;
    *) echo "$0: unknown binary $name" >&2; exit 2 ;;
  esac
  if [ ! -x "$cache/$name-$version/$name" ]; then names+=("$name"); fi
done
[ ${#names[@]} -gt 0 ] || exit 0
echo "building ${names[*]} $version into $cache"
staging=v0.${version#v1.}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
go mod download -json "k8s.io/kubernetes@$version" >/dev/null
modfile=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod
{
  echo "module trellis.local/testbin"
  echo
  echo "go $(go env GOVERSION | sed 's/^go//')"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  # k8s.io/sample-cli-plugin is not served by the proxy; none of the binaries built here imports it.
  for m in $(grep '=> ./staging' "$modfile" | awk '{print $1}'); do
    if [ "$m" = k8s.io/sample-cli-plugin ]; then
      mkdir -p stub/sample-cli-plugin && echo "module $m" > stub/sample-cli-plugin/go.mod
      echo "replace $m => ./stub/sample-cli-plugin"
    else
      echo "replace $m => $m $staging"
    fi
  done
} > go.mod
{
  printf '//go:build tools\n\npackage testbin\n\nimport (\n'
  for name in "${names[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$name"; done
  printf ')\n'
} > tools.go
GOFLAGS=-mod=mod go mod tidy
minor=${version#v1.}; minor=${minor%%.*}
ldflags="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
ldflags="$ldflags -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
for name in "${names[@]}"; do
  out=$cache/$name-$version
  mkdir -p "$out"
  start=$SECONDS
  # Built beside the target and renamed, so an interrupted build leaves no binary that looks complete.
  GOFLAGS=-mod=mod go build -ldflags "$ldflags" -o "$out/$name.partial" "k8s.io/kubernetes/cmd/$name"
  mv -f "$out/$name.partial" "$out/$name"
  echo "built $out/$name in $((SECONDS - start))s"
done
