#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set up what is missing, then lint, build, typecheck,
# package lint (publint, attw), unit + integration tests (real Redis, real processes, a real browser),
# the chaos suite and the install check. Ends with one line: "Tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --for-tests
export TURBO_TELEMETRY_DISABLED=1
log="$(mktemp -t stampede-test-XXXXXX.log)"
trap 'rm -f "$log"' EXIT
set +e
pnpm run check 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
node scripts/test-summary.mjs "$log"
exit "$status"
