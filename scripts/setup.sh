#!/usr/bin/env bash
# Set-up on a fresh machine: Debian build tools when missing (as root), npm packages from the lockfile, the native addon.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "node $(node --version), npm $(npm --version), $(nproc) cores"

# cmake, g++ and OpenBLAS for the native addon: apt only when one is missing, and only as root.
missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
if command -v dpkg >/dev/null 2>&1 && ! dpkg -s libopenblas-dev >/dev/null 2>&1; then missing+=(libopenblas-dev); fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]}"
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends cmake g++ libopenblas-dev
  else
    echo "warning: ${missing[*]} missing and cannot be installed here (not root or no apt-get); install them and re-run"
  fi
fi

# Debian's chromium for the browser tests (test/helpers/browser.ts drives it with playwright-core, which never
# downloads a browser): apt only when missing, and only as root; without it those tests skip.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium"
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-dejavu-core
  else
    echo "warning: chromium missing and cannot be installed here (not root or no apt-get); the browser tests will skip"
  fi
fi

# Debian's redis-server for the job queue's tests (test/queue.test.ts starts private ones; planc worker / submit need
# one somewhere): apt only when missing, and only as root; without it those tests skip (in CI they fail).
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server"
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server
    # the package starts a system instance on 6379; planc's tests use their own on free ports
  else
    echo "warning: redis-server missing and cannot be installed here (not root or no apt-get); the queue tests will skip"
  fi
fi

# onnxruntime-node's install script would download CUDA binaries: package.json's allowScripts denies it (npm ≥ 11),
# and ONNXRUNTIME_NODE_INSTALL=skip (read by the script itself) covers older npm
ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
npm run build:native
