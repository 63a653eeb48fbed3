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
# Four workers (pytest-xdist) on CI's two cores: the virtual-mesh tests on two of them,
# each with a session fleet of its own (they mostly wait on real time), the other tests
# that need root in order on a third, Spark's on one JVM on the fourth, the rest beside
# them as workers run out of grouped work (tests/conftest.py).
# `./test.sh -n 0 ...` runs everything in one process (one fleet).
# The ten slowest tests at the end: a test that grows shows up here first.
# The long tier (virtual-mesh experiments of several minutes each: rolling upgrades, the
# 20-device HESPER grid, B-SUB's contact cut, GPS under mobility) runs with -m long.
echo "== pytest"; exec python -m pytest -n 4 --dist loadgroup -m "not long" --durations=10 "$@" </dev/null
