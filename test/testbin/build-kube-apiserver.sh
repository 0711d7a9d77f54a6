#!/usr/bin/env bash
# Builds kube-apiserver (k8s.io/kubernetes $1, default v1.36.3) from Go modules into $2: the seed of the tests.
# k8s.io/kubernetes replaces its staging modules with ./staging, which a dependency cannot use, so a throwaway module
# requires it and replaces every staging module with its published v0.<minor>.<patch> version. Only the Go module proxy
# is used. About 5 minutes on 2 cores; the Makefile caches the result per machine.
set -euo pipefail
version=${1:-v1.36.3}
out=${2:?output directory}
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
  # k8s.io/sample-cli-plugin is not served by the proxy; nothing kube-apiserver builds imports it.
  for m in $(grep '=> ./staging' "$modfile" | awk '{print $1}'); do
    if [ "$m" = k8s.io/sample-cli-plugin ]; then
      mkdir -p stub/sample-cli-plugin && echo "module $m" > stub/sample-cli-plugin/go.mod
      echo "replace $m => ./stub/sample-cli-plugin"
    else
      echo "replace $m => $m $staging"
    fi
  done
} > go.mod
printf '//go:build tools\n\npackage testbin\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' > tools.go
GOFLAGS=-mod=mod go mod tidy
mkdir -p "$out"
minor=${version#v1.}; minor=${minor%%.*}
ldflags="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
ldflags="$ldflags -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
# Built beside the target and renamed, so an interrupted build leaves no binary that looks complete.
GOFLAGS=-mod=mod go build -ldflags "$ldflags" -o "$out/kube-apiserver.partial" k8s.io/kubernetes/cmd/kube-apiserver
mv -f "$out/kube-apiserver.partial" "$out/kube-apiserver"
