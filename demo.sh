#!/usr/bin/env bash
# Run the demo: a simulated mesh running a protocol under a workload, and what happened.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/bootstrap.sh
exec python -m meshsim.demo "$@"
