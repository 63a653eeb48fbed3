#!/usr/bin/env bash
# Install everything the project needs, idempotently; quick when already done.
# Sourced by ./demo.sh and ./test.sh. Leaves .venv/bin first on PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '[bootstrap] %s\n' "$*" >&2; }

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo "$@"; else
      log "need root to run: $*"; exit 1; fi
  else "$@"; fi
}

# 1. Debian packages: install only the ones dpkg does not report installed.
mapfile -t PKGS < <(grep -v '^\s*#' scripts/apt-packages.txt | grep -v '^\s*$')
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  # tshark's wireshark-common asks whether non-root users may capture: answer no, up front.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | need_root debconf-set-selections
  need_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# qemu-user's binfmt handlers (arm64/armhf devices of the virtual mesh): the kernel's
# binfmt_misc may not be mounted where systemd did not start the machine.
if [ -d /proc/sys/fs/binfmt_misc ] && [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
  need_root mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null \
    || log "binfmt_misc cannot be mounted here: no arm64/armhf devices (amd64 ones work)"
fi
if [ -e /proc/sys/fs/binfmt_misc/status ] && [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] \
   && command -v update-binfmts >/dev/null 2>&1; then
  need_root update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
  need_root update-binfmts --enable qemu-arm >/dev/null 2>&1 || true
fi
# Packages whose services must not run on the host by default (tests start their own).
for svc in mosquitto gpsd gpsd.socket; do
  if systemctl is-enabled "$svc" >/dev/null 2>&1; then
    need_root systemctl disable --now "$svc" >/dev/null 2>&1 || true
  fi
done

# 2. The venv with the three distributions of this checkout in editable mode: the
# field daemon (daemon/: `meshsub`, all a device installs), the virtual devices'
# workload agent (workload/: `meshsub-workload`) and the workstation's tools with the
# dev extras (simulator, virtual mesh, evaluation, test tools: `meshsub-tools`).
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.meshsub-installed
want="$(cat pyproject.toml daemon/pyproject.toml workload/pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "installing meshsub, meshsub-workload and meshsub-tools (editable) with dev extras"
  # the single distribution of earlier checkouts left its metadata at the top level,
  # where `python` run from here would find a second, stale `meshsub` before the venv's
  rm -rf meshsub.egg-info
  # pip's warnings (one per package for every configured index) would bury the test
  # output in a CI log: keep them in a file and show it only if the install fails
  if ! { .venv/bin/python -m pip install -q --upgrade pip \
         && .venv/bin/python -m pip install -q -e ./daemon -e ./workload -e '.[dev]'; } >.venv/pip.log 2>&1; then
    cat .venv/pip.log >&2; log "pip install failed (log: .venv/pip.log)"; exit 1
  fi
  echo "$want" > "$stamp"
fi
export PATH="$ROOT/.venv/bin:$PATH"
export VIRTUAL_ENV="$ROOT/.venv"
