#!/usr/bin/env bash
# Builds commands of one Go module at one version from its own source (its go.mod, with its replace directives, which
# `go install module@version` would refuse): the node's parts that are Go programs (containerd, CoreDNS,
# local-path-provisioner).
#
#   build-module.sh CACHE-DIR MODULE@VERSION [-tags TAGS] PKG[=NAME]...
#
# Each PKG (a package path inside MODULE, "." for its root) is built statically (CGO_ENABLED=0) into CACHE-DIR/NAME
# (NAME defaults to the package's last element); a NAME already there is skipped. Built beside the target and renamed,
# so an interrupted build never leaves a binary that looks complete. Only the Go module proxy is used.
set -euo pipefail
out=${1:?cache directory, e.g. ~/.cache/trellis/testbin/containerd-v2.4.2}
modver=${2:?module@version}
shift 2
tags=
if [ "${1:-}" = -tags ]; then tags=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 CACHE-DIR MODULE@VERSION [-tags TAGS] PKG[=NAME]..." >&2; exit 2; }
todo=()
for spec in "$@"; do
  pkg=${spec%%=*}; name=${spec#*=}
  [ "$name" != "$spec" ] || name=$(basename "$pkg")
  case $name in . | "" | */*) echo "$0: $spec: give the binary a name, PKG=NAME" >&2; exit 2 ;; esac
  if [ ! -x "$out/$name" ]; then todo+=("$pkg=$name"); fi
done
[ ${#todo[@]} -gt 0 ] || exit 0
echo "building $modver (${todo[*]}) into $out"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$modver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -n "$dir" ] || { echo "$0: go mod download $modver gave no directory" >&2; exit 1; }
cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
cd "$work/src"
mkdir -p "$out"
for spec in "${todo[@]}"; do
  pkg=${spec%%=*}; name=${spec#*=}
  start=$SECONDS
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags "$tags" -ldflags '-s -w' -o "$out/$name.partial" "./$pkg"
  mv -f "$out/$name.partial" "$out/$name"
  echo "built $out/$name in $((SECONDS - start))s"
done
