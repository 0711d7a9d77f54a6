#!/usr/bin/env bash
# Stops the local landscape that `make up` (bin/landscape) left running: SIGTERM to the process in
# .trellis/local/landscape.pid, which stops its provider-locals, agents, seeds and hub in order; SIGKILL after 90 s
# (its children die with it). The data stays in .trellis/local for the next `make up`. Also stops the processes of
# the earlier shell version of `make up` (hub.pid, seed.pid, agent.pid).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${TRELLIS_LOCAL_DIR:-.trellis/local}
pidfile=$dir/landscape.pid
if [ -f "$pidfile" ]; then
  pid=$(cat "$pidfile")
  if kill -TERM "$pid" 2>/dev/null; then
    echo "stopping the landscape (pid $pid)"
    for _ in $(seq 1 900); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "the landscape did not stop within 90s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "landscape stopped"
  else
    echo "no landscape runs (stale $pidfile)"
  fi
  rm -f "$pidfile"
else
  echo "no landscape runs ($pidfile does not exist)"
fi
for c in agent seed hub; do
  f=$dir/$c.pid
  if [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; then echo "$c stopped (started by the old up.sh)"; fi
  rm -f "$f"
done
