#!/usr/bin/env bash
# Multi-turn conversations against a small local agent with a memory (docs/conversations.md).
#   bash examples/multi-turn/run.sh                  exit 0: the agent remembers earlier turns
#   BREAK=forget bash examples/multi-turn/run.sh     exit 1: it forgets, and the report names the turn
# Offline; needs evalgate installed in $PYTHON (default python3). Results go to $OUT_DIR (default: a temp dir).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
out="${OUT_DIR:-$(mktemp -d)}"
mkdir -p "$out"

"$python" "$here/agent.py" --port 0 > "$out/agent.port" &
agent=$!
trap 'kill "$agent" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$out/agent.port" ] && break; sleep 0.1; done
port="$(head -n 1 "$out/agent.port")"

EVALGATE_TARGET_URL="http://127.0.0.1:$port/chat" "$python" -m evalgate run --config "$here/evalgate.yaml" \
  --dataset "$here/conversations.yaml" --output-dir "$out/results" --progress none
