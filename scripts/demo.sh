#!/usr/bin/env bash
# Runs the demo on its embedded default, from a fresh machine: set up what is missing, then start it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TURBO_TELEMETRY_DISABLED=1
exec pnpm demo
