#!/usr/bin/env bash
# Brings up a local landscape under .trellis/local: a hub on embedded etcd (127.0.0.1:8443) and Gardener's example
# resources. Writes .trellis/local/env for `. .trellis/local/env && bin/trellisctl get shoots -n garden-dev`.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=.trellis/local
mkdir -p "$dir"
if [ -f "$dir/hub.pid" ] && kill -0 "$(cat "$dir/hub.pid")" 2>/dev/null; then
  echo "hub already running (pid $(cat "$dir/hub.pid")); 'make down' stops it"
else
  nohup bin/trellis-hub --data-dir "$dir/data" --listen 127.0.0.1:8443 >"$dir/hub.log" 2>&1 &
  echo $! >"$dir/hub.pid"
fi
for _ in $(seq 1 100); do
  [ -f "$dir/data/admin-token" ] && curl -sf --cacert "$dir/data/pki/ca.crt" https://127.0.0.1:8443/readyz >/dev/null && break
  sleep 0.1
done
cat >"$dir/env" <<ENV
export TRELLIS_HUB=https://127.0.0.1:8443
export TRELLIS_CA=$PWD/$dir/data/pki/ca.crt
export TRELLIS_TOKEN=$(cat "$dir/data/admin-token")
ENV
. "$dir/env"
examples=../shared/gardener/examples
if [ -d "$examples" ]; then
  # Gardener's examples, with their placeholders filled for the local provider.
  work="$dir/examples"
  mkdir -p "$work"
  for f in 00-namespace-garden-dev 05-project-dev 30-cloudprofile 70-secret-provider 80-credentialsbinding 80-secretbinding 90-shoot; do
    sed -e 's/<some-provider-name>/local/; s/<provider-name>/local/' \
        -e 's/<some-provider-specific-[a-z-]*>/{apiVersion: local.provider.extensions.gardener.cloud\/v1alpha1, kind: Config}/' \
        -e 's/<some-image-name>/gardenlinux/; s/<some-image-version>/15.4.20220818/; s/<some-network-extension-name>/calico/' \
        "$examples/$f.yaml" >"$work/$f.yaml"
  done
  bin/trellisctl apply -f "$work"
fi
echo
echo "hub: $TRELLIS_HUB (log: $dir/hub.log)"
echo "try: . $dir/env && bin/trellisctl get shoots -n garden-dev"
