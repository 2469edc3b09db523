#!/usr/bin/env bash
# CUDA checks on a lent GPU machine (no Node.js, no node_modules, no network there), in two halves:
#   here:  scripts/gpu-check.sh pack    → .gpu/ gets Node (../shared/gpu/prepare-carry.sh), a bundle of test:gpu and
#                                         bench cuda (esbuild), the assets the bundle reads, and node-addon-api's headers
#   there: scripts/gpu-check.sh run     → builds the addon with cmake, runs test:gpu then bench cuda; logs in $OUT
# Device call: carry [".gpu"], command "bash scripts/gpu-check.sh run". es-en does not fit the carry limit, so the
# GPU run checks the synthetic opus-base shape (generated there) and reports es-en as not present.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

pack() {
  ../shared/gpu/prepare-carry.sh
  local esb=node_modules/@esbuild/linux-x64/bin/esbuild b=.gpu/bundle
  rm -rf "$b" && mkdir -p "$b/kernels"
  local banner="import { createRequire as __cr } from 'module'; const require = __cr(import.meta.url);"
  "$esb" test/gpu/cuda.ts --bundle --platform=node --format=esm --target=node20 --outfile="$b/gpu-test.mjs" \
    --external:onnxruntime-node --banner:js="$banner" --log-level=warning
  echo "import { benchCuda } from './bench/cuda.ts'; await benchCuda();" | "$esb" --bundle --platform=node --format=esm \
    --target=node20 --sourcefile=gpu-bench.ts --outfile="$b/gpu-bench.mjs" \
    --external:onnxruntime-node --banner:js="$banner" --log-level=warning
  cp compiler/plan/plan.proto "$b/"
  cp codegen/cuda/kernels/*.cuh "$b/kernels/"
  rm -rf .gpu/node-addon-api && cp -r node_modules/node-addon-api .gpu/node-addon-api
  du -sh .gpu
}

run() {
  local out=${OUT:-/tmp/planc-gpu-out}
  mkdir -p "$out"
  [ -d .gpu/bin ] || tar xJf .gpu/node.tar.xz -C .gpu
  export PATH=$PWD/.gpu/bin:$PATH
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
  cmake -S native -B native/build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPLANC_NODE_API_INC="$PWD/.gpu/include/node" -DPLANC_NODE_ADDON_API_INC="$PWD/.gpu/node-addon-api" >"$out/build.log" 2>&1
  cmake --build native/build/gpu >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  export PLANC_NATIVE_ADDON=$PWD/native/build/gpu/planc_native.node PLANC_BENCH_OUT=$out/cuda.jsonl
  local rc=0
  node .gpu/bundle/gpu-test.mjs 2>&1 | tee "$out/test-gpu.log" || rc=1
  node .gpu/bundle/gpu-bench.mjs 2>&1 | tee "$out/bench-cuda.log" || rc=1
  exit $rc
}

case "$mode" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh pack|run" >&2; exit 2 ;;
esac
