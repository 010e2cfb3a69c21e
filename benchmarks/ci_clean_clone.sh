#!/usr/bin/env bash
# CI as it runs after a submission: a clean clone of this repository's HEAD (committed work
# only) with shared/ beside it, then `bash .ci/run` there (as root: it makes the ordinary CI
# user and starts SLURM). The clone is removed afterwards; .ci/run's summary lines go to stdout.
#   make ci-time NOTE=quiet      # records docs/measurements/results/ci/<UTC time>.json
# RETRACE_SHARED: the shared/ folder to put beside the clone (default: ../shared of this repo).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
shared="${RETRACE_SHARED:-$(cd "$repo/.." && pwd -P)/shared}"
[[ -d "$shared/data" ]] || { echo "ci_clean_clone: no $shared/data (set RETRACE_SHARED)" >&2; exit 2; }
dir="$(mktemp -d "${TMPDIR:-/tmp}/retrace-ci.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
git clone -q "$repo" "$dir/main"
ln -s "$shared" "$dir/shared"
cd "$dir/main"
echo "CI commit: $(git rev-parse --short=12 HEAD)"
bash .ci/run
