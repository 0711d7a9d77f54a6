#!/usr/bin/env bash
# Brings up a local landscape under .trellis/local: a hub on embedded etcd (127.0.0.1:8443), a seed (a real
# kube-apiserver from bin/testbin) with its trellis-agent registered as Seed "local", and Gardener's example resources.
# Writes .trellis/local/env for `. .trellis/local/env && bin/trellisctl get shoots -n garden-dev`.
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

# The seed and its agent.
running() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }
if ! running seed; then
  rm -f "$dir/seed/kubeconfig"
  nohup bin/localseed --dir "$dir/seed" >"$dir/seed.log" 2>&1 &
  echo $! >"$dir/seed.pid"
fi
for _ in $(seq 1 600); do grep -q "ready in" "$dir/seed.log" 2>/dev/null && break; sleep 0.1; done
grep -q "ready in" "$dir/seed.log" || { echo "the seed did not start; see $dir/seed.log"; exit 1; }
if ! running agent; then
  # The DNS credentials the seed's spec references.
  bin/trellisctl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Secret
metadata:
  name: dns-local
  namespace: garden
type: Opaque
stringData:
  provider: local
YAML
  token_file="$dir/agent/bootstrap-token"
  mkdir -p "$dir/agent"
  # A first start bootstraps with a token; later starts reuse the credentials the agent stored in the seed.
  [ -s "$token_file" ] || bin/trellisctl seed bootstrap-token create local --validity 1h >"$token_file"
  cat >"$dir/agent/config.yaml" <<CFG
apiVersion: agent.trellis.dev/v1alpha1
kind: AgentConfiguration
hubClientConnection:
  address: 127.0.0.1:8444
  caFile: $PWD/$dir/data/pki/ca.crt
  bootstrapTokenFile: $PWD/$token_file
seedClientConnection:
  kubeconfig: $PWD/$dir/seed/kubeconfig
seedConfig:
  metadata:
    name: local
  spec:
    provider:
      type: local
      region: local
    ingress:
      domain: ingress.local.seed.local.gardener.cloud
      controller:
        kind: nginx
    dns:
      provider:
        type: local
        credentialsRef:
          apiVersion: v1
          kind: Secret
          namespace: garden
          name: dns-local
    networks:
      nodes: 172.18.0.0/16
      pods: 10.1.0.0/16
      services: 10.2.0.0/16
    settings:
      scheduling:
        visible: true
CFG
  nohup bin/trellis-agent --config "$dir/agent/config.yaml" --log-format text >"$dir/agent.log" 2>&1 &
  echo $! >"$dir/agent.pid"
fi
for _ in $(seq 1 300); do
  bin/trellisctl get seeds local -o json 2>/dev/null | grep -q '"GardenletReady"' && break
  sleep 0.1
done

echo
echo "hub: $TRELLIS_HUB (log: $dir/hub.log)"
echo "seed: $dir/seed/kubeconfig (log: $dir/seed.log); agent log: $dir/agent.log"
echo "try: . $dir/env && bin/trellisctl get shoots -n garden-dev"
