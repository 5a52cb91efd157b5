#!/usr/bin/env bash
# The otel-agent example, offline: start the instrumented agent (agent.py), run evalgate against it with
# the trace receiver on, and gate on the tool trajectory read from its spans.
#   bash examples/otel-agent/run.sh               → exit 0
#   BREAK=order bash examples/otel-agent/run.sh   → exit 1: the agent books before it searches
#   RESULTS_DIR=DIR keeps results.json (its cases' answer.trace holds the span summaries) in DIR
# Needs evalgate (pip install evalgate-action) and opentelemetry-sdk + opentelemetry-exporter-otlp-proto-http.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'kill "$agent" 2>/dev/null || true; rm -rf "$work"' EXIT

# a free port for evalgate's receiver, given to both sides (evalgate listens, the agent exports there)
traces_port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export EVALGATE_TRACES_PORT="$traces_port"
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$traces_port"

"$python" "$here/agent.py" --port 0 --port-file "$work/port" &
agent=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
export EVALGATE_TARGET_URL="http://127.0.0.1:$(cat "$work/port")/chat"

cd "$work"
status=0
"$python" -m evalgate run --config "$here/evalgate.yaml" --dataset "$here/cases.yaml" --progress none \
  --output-dir "${RESULTS_DIR:-$work/results}" || status=$?
echo "evalgate exited with $status"
exit "$status"
