#!/usr/bin/env bash
# Run every check: lint (ruff), types (mypy, strict on core/wire/protocols) and the tests.
# Tests that need root (network namespaces, containers) run when this runs as root.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh
echo "== ruff"; ruff check .
echo "== mypy"; mypy daemon/meshsub workload/meshsub_workload firmware-sim/meshsim telemetry/mesheval
# unbuffered, so a CI log shows the test that was running; stdin closed, so no child
# process can wait on a terminal that is not there
export PYTHONUNBUFFERED=1
# Three workers (pytest-xdist): the tests that need root run in order on one of them
# (the virtual-mesh tests mostly wait on real time), Spark's on one JVM, the rest
# beside them (tests/conftest.py). `./test.sh -n 0 ...` runs everything in one process.
# The ten slowest tests at the end: a test that grows shows up here first.
# The long tier (virtual-mesh experiments of several minutes each: rolling upgrades, the
# 20-device HESPER grid, B-SUB's contact cut, GPS under mobility) runs with -m long.
echo "== pytest"; exec python -m pytest -n 3 --dist loadgroup -m "not long" --durations=10 "$@" </dev/null
