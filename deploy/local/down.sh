#!/usr/bin/env bash
# Stops the local landscape started by `make up` (agent, seed, hub); the hub's data stays in .trellis/local/data and
# the seed's in .trellis/local/seed.
set -euo pipefail
cd "$(dirname "$0")/../.."
for c in agent seed hub; do
  pidfile=.trellis/local/$c.pid
  if [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null; then echo "$c stopped"; fi
  rm -f "$pidfile"
done
