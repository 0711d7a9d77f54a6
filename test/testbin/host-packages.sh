#!/usr/bin/env bash
# Installs, with apt-get, the Debian packages a local seed's node needs when one is missing: runc, the CNI plugins
# (/usr/lib/cni), iptables and conntrack (kubelet, kube-proxy), busybox-static (the tools image, local-path-provisioner's
# helper) and iproute2 (the node's network namespace). Does nothing when all are there; needs root.
set -euo pipefail
need=()
[ -x /usr/sbin/runc ] || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v ip >/dev/null || need+=(iproute2)
command -v nsenter >/dev/null || need+=(util-linux)
[ ${#need[@]} -gt 0 ] || exit 0
echo "installing Debian packages for the local node: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
