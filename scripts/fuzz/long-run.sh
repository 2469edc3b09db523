#!/usr/bin/env bash
# The committed long fuzz run (issue 26): rounds of cases per target, each round a `npm run fuzz -- T --from I --n N
# --record` (one line in bench/results/fuzz.jsonl each), until the rounds are done or OUT/STOP exists. One process at
# a time, nice -n 19. PLANC: the planc entry the cases run (default this checkout's bin/planc.js; a built snapshot's
# bin/planc.js runs the compiled dist/, about 4x faster per case than the sources through tsx). SPECS: the targets and
# cases per round (default "feeds:250 plan:250 folder:250 onnx:250 cli:100").
# usage: scripts/fuzz/long-run.sh [SEED (26)] [ROUNDS (8)] [OUT (.scratch/fuzz-long)] [FIRST_ROUND (0)]
set -u
cd "$(dirname "$0")/../.."
seed=${1:-26}; rounds=${2:-8}; out=${3:-.scratch/fuzz-long}; first=${4:-0}
planc=${PLANC:-bin/planc.js}
specs=${SPECS:-feeds:250 plan:250 folder:250 onnx:250 cli:100}
mkdir -p "$out"
for ((k = first; k < rounds; k++)); do
  for spec in $specs; do
    t=${spec%%:*}; n=${spec##*:}
    [ -e "$out/STOP" ] && { echo "stopped before round $k $t"; exit 0; }
    echo "== round $k $t (cases $((k * n))..$((k * n + n - 1))) $(date -u +%H:%M:%S)"
    nice -n 19 node --import tsx scripts/fuzz/main.ts "$t" --seed "$seed" --from $((k * n)) --n "$n" --out "$out/$t-r$k" \
      --planc "$planc" --record --quiet --fail-on ''
  done
done
