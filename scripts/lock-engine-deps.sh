#!/usr/bin/env bash
# Regenerate the engine image's Python lock files from pyproject.toml:
#   images/engine-spark/build-requirements.lock   the build system (setuptools, wheel)
#   images/engine-spark/requirements.lock         the dependencies and the `engine` extra
#
#   bash scripts/lock-engine-deps.sh               (PYTHON=... to resolve with another pip)
#
# Each line pins one distribution to a version and the sha256 of its archive; the image
# installs with `pip install --require-hashes` from these files only. Resolution runs on this
# host's Python, which must match the image's (CPython 3.11, glibc x86_64: Debian bookworm), so
# that the chosen wheels are the ones the image can install. Run it after changing the
# dependencies in pyproject.toml, and commit the locks with that change.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
DIR=images/engine-spark
version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$version" != 3.11 ]; then
  echo "lock-engine-deps: $PYTHON is Python $version; the image runs 3.11 (set PYTHON=)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

lock() {
  local what=$1 out=$2
  "$PYTHON" "$DIR/requirements.py" pyproject.toml "$what" >"$work/$what.txt"
  "$PYTHON" -m pip install -q --dry-run --ignore-installed --no-warn-conflicts \
    --report "$work/$what.json" -r "$work/$what.txt" 2>"$work/$what.log" || {
    cat "$work/$what.log" >&2
    exit 1
  }
  "$PYTHON" "$DIR/requirements.py" lock "$work/$what.json" >"$out"
  echo "$out: $(grep -vc '^#' "$out") distributions"
}

lock build "$DIR/build-requirements.lock"
lock engine "$DIR/requirements.lock"
