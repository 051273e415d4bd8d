#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set up what is missing, then lint, build, typecheck,
# unit + integration tests (real Redis), package lint (publint, attw) and the install check.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --for-tests
export TURBO_TELEMETRY_DISABLED=1
pnpm run check
