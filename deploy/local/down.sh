#!/usr/bin/env bash
# Stops the local landscape started by `make up`; its data stays in .trellis/local/data.
set -euo pipefail
cd "$(dirname "$0")/../.."
pidfile=.trellis/local/hub.pid
if [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null; then echo "hub stopped"; fi
rm -f "$pidfile"
