#!/usr/bin/env bash
# Calibrate a judge against human labels, then let it gate (docs/judge-calibration.md, "Calibration").
#
#   ./run.sh                # the scripted demo judge agrees with the labels (κ ≥ 0.6): it gates, the run passes (exit 0)
#   JUDGE=random ./run.sh   # a judge that scores at random: κ near 0, and under `calibration: required` the run
#                           # fails (exit 1) naming the metric, κ and the number of labels
#
# Needs evalgate-action installed (PYTHON=path/to/python to choose the interpreter). Nothing leaves 127.0.0.1.
set -euo pipefail
PYTHON=$(command -v "${PYTHON:-python3}")
case "$PYTHON" in /*) ;; *) PYTHON="$PWD/$PYTHON" ;; esac
cd "$(dirname "$0")"
JUDGE=${JUDGE:-scripted}
OUT=$(mktemp -d)
JUDGE_PID=
cleanup() { if [ -n "$JUDGE_PID" ]; then kill "$JUDGE_PID" 2>/dev/null || true; fi; rm -rf "$OUT"; }
trap cleanup EXIT

# 1. the judge: evalgate's scripted demo judge, or the same server scoring at random
"$PYTHON" -m evalgate.demo.judge --port 0 --mode "$JUDGE" >"$OUT/judge.log" 2>&1 &
JUDGE_PID=$!
for _ in $(seq 100); do grep -q "listening on" "$OUT/judge.log" && break; sleep 0.1; done
URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$OUT/judge.log")
[ -n "$URL" ] || { echo "the demo judge did not start:"; cat "$OUT/judge.log"; exit 2; }

export LOCAL_JUDGE_API_KEY=unused EVALGATE_JUDGE_BASE_URL="$URL/v1" EVALGATE_JUDGE_MODEL="$JUDGE-judge"
export EVALGATE_CALIBRATION_FILE="$OUT/judge-calibration.json"   # keep the shipped calibration file untouched

# 2. calibrate: κ, Spearman, Kendall, the confusion matrix and the worst disagreements per metric
"$PYTHON" -m evalgate calibrate -c evalgate.yaml -o "$OUT" || true   # exit 1 = below the floor: the run decides

# 3. the run: the judged metrics gate only if their judge was calibrated above the floor
set +e
"$PYTHON" -m evalgate run -c evalgate.yaml -o "$OUT" --progress none
status=$?
set -e
echo "run.sh: evalgate run exited $status (judge: $JUDGE)"
exit $status
