#!/usr/bin/env bash
# Build the project's OCI images with Podman, on a machine that cannot pull public images:
#   1. Podman (runc, ulimits) installed and configured: scripts/podman-service.sh install
#   2. the local Debian base image (debootstrap), unless BASE_IMAGE names another base
#   3. the Spark engine image, then the coordinator image (built on it), each tagged with a hash
#      of its build inputs; skipped when that tag already exists (cached), so an unchanged tree
#      costs a second.
#
# Outputs, under images/<engine-spark|coordinator>/.built/ (not committed):
#   image   the exact reference, localhost/odf-engine-spark:<inputs hash>
#   build   "<reference> <SOURCE_DATE_EPOCH> <unix time> <1: no cached layer reused, else 0>" of
#           the last build run (not a cache hit)
#   digest  the image digest (sha256:...), for pinning transforms to the exact engine
#   id      the image ID
#
# Reproducible: the engine's Python dependencies come from lock files with hashes
# (scripts/lock-engine-deps.sh regenerates them), and every build gets SOURCE_DATE_EPOCH (default:
# the time of the last commit) and `--timestamp` with it, so that two builds of one commit on the
# same base image (and Debian mirror state) give the same image digest
# (tests/e2e/test_reproducible_image.py checks it).
#
# Environment: BASE_IMAGE (default localhost/odf-debian-base:bookworm), ENGINE_IMAGE_REPO (default
# localhost/odf-engine-spark), COORDINATOR_IMAGE_REPO (default localhost/odf-coordinator),
# FORCE_BUILD=1 to rebuild even when cached, NO_CACHE=1 to reuse no layer either, ENGINE_NO_CACHE=1
# to reuse no layer for the engine image when it is built (`make test`:
# tests/e2e/test_reproducible_image.py then takes that build as the first of its two builds from
# scratch and runs one, not two), ONLY=engine to build the engine image alone, RECORD_ROOT=DIR to
# write the .built/ records under DIR/images/... instead of the tree, RECORD_RELEASE=1 to record
# the engine image in images/engine-spark/digests.txt (see docs/scale.md), SOURCE_DATE_EPOCH.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${BASE_IMAGE:-localhost/odf-debian-base:bookworm}
ENGINE_REPO=${ENGINE_IMAGE_REPO:-localhost/odf-engine-spark}
COORDINATOR_REPO=${COORDINATOR_IMAGE_REPO:-localhost/odf-coordinator}
ENGINE_DIR=images/engine-spark
COORDINATOR_DIR=images/coordinator
# What each image is built from; keep in step with the Containerfiles' COPY lines.
# The engine's list is also coordinator/engine/image_pin.py's ENGINE_IMAGE_INPUTS.
ENGINE_INPUTS=("$ENGINE_DIR/Containerfile" "$ENGINE_DIR/jks_epoch.py" "$ENGINE_DIR"/*.lock
  .dockerignore pyproject.toml README.md common engine_spark)
COORDINATOR_INPUTS=("$COORDINATOR_DIR/Containerfile" "$ENGINE_DIR/requirements.py" .dockerignore pyproject.toml README.md common engine_spark coordinator)

RECORD_ROOT=${RECORD_ROOT:-.}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
fi
export SOURCE_DATE_EPOCH

bash scripts/podman-service.sh install

# One build at a time on this machine (engineers and CI share it).
exec 9>/var/tmp/odf-py-build-images.lock
flock 9

if [[ $BASE_IMAGE == localhost/odf-debian-base:* ]]; then
  bash images/base/build-base.sh "$BASE_IMAGE"
fi

# The host's CA bundle, offered to the build as a secret for HTTPS downloads (pip); hosts
# whose egress re-signs TLS need it, and nothing of it is kept in the image.
ca_bundle() {
  local f
  for f in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt \
    /etc/pki/tls/certs/ca-bundle.crt; do
    if [ -n "$f" ] && [ -s "$f" ]; then
      echo "$f"
      return
    fi
  done
}

# A hash of the parent image's ID and of the files named after it.
inputs_hash() {
  local parent=$1 parent_id
  shift
  parent_id=$(podman image inspect --format '{{.Id}}' "$parent" 2>/dev/null || echo "$parent")
  {
    echo "parent $parent $parent_id"
    find "$@" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

record() {
  local ref=$1 built=$2
  mkdir -p "$built"
  echo "$ref" >"$built/image"
  podman image inspect --format '{{.Digest}}' "$ref" >"$built/digest"
  podman image inspect --format '{{.Id}}' "$ref" >"$built/id"
}

# build_image NAME REPO DIR PARENT_ARG PARENT INPUTS...: build DIR/Containerfile on PARENT
# (given as build argument PARENT_ARG), unless an image of the same inputs exists.
build_image() {
  local name=$1 repo=$2 dir=$3 parent_arg=$4 parent=$5
  shift 5
  local hash ref ca start log
  hash=$(inputs_hash "$parent" "$@")
  ref=$repo:$hash
  if [ "${FORCE_BUILD:-0}" != 1 ] && podman image exists "$ref"; then
    echo "$name image $ref present (inputs unchanged)"
    record "$ref" "$RECORD_ROOT/$dir/.built"
    return
  fi
  local args=(--network host --layers -f "$dir/Containerfile"
    --build-arg "$parent_arg=$parent" --build-arg "BUILD_INPUTS=$hash"
    --build-arg "SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH" --timestamp "$SOURCE_DATE_EPOCH"
    -t "$ref" -t "$repo:latest" "${EXTRA_BUILD_ARGS[@]}")
  if [ "${NO_CACHE:-0}" = 1 ] || [ "$name:${ENGINE_NO_CACHE:-0}" = engine:1 ]; then
    args+=(--no-cache)
  fi
  ca=$(ca_bundle)
  if [ -n "$ca" ]; then args+=(--secret "id=ca_bundle,src=$ca"); fi
  echo "building $name image $ref"
  start=$(date +%s)
  log=$(mktemp "/var/tmp/odf-$name-build.XXXXXX.log")
  if ! podman build "${args[@]}" . >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "$name image build failed; full log: $log" >&2
    exit 1
  fi
  # Whether this build reused no cached layer (built from scratch, as on a fresh machine).
  local scratch=1
  if grep -q -- '--> Using cache' "$log"; then scratch=0; fi
  rm -f "$log"
  echo "built $ref in $(($(date +%s) - start)) s"
  record "$ref" "$RECORD_ROOT/$dir/.built"
  # This build, not a cached image: its reference, SOURCE_DATE_EPOCH, when it finished and
  # whether it was from scratch (tests/e2e/test_reproducible_image.py compares a build from
  # scratch with it).
  echo "$ref $SOURCE_DATE_EPOCH $(date +%s) $scratch" >"$RECORD_ROOT/$dir/.built/build"
  drop_stale_tags "$repo" "$ref"
}

# Remove images of older inputs (unless a container still uses one); layers shared with the
# new image, and the intermediate images that serve as the layer cache, stay. Only REPO's own
# tags: `podman images REPO` also lists the other names of the images it matches (a build
# reproducing another repository's image byte for byte shares its ID, and that repository's
# tags must stay).
drop_stale_tags() {
  local repo=$1 keep=$2 tag
  podman images --format '{{.Repository}}:{{.Tag}}' "$repo" | while read -r tag; do
    case "$tag" in
      "$keep" | "$repo:latest" | *"<none>"*) ;;
      "$repo":*) podman rmi "$tag" >/dev/null 2>&1 || true ;;
    esac
  done
}

# The engine image's record for pinning without a runtime (coordinator/engine/image_pin.py):
# .built/sources, the sha256 of its inputs' sha256sum listing; with RECORD_RELEASE=1 also a line
# "<that sha256> <repo>@<digest> <image id>" in images/engine-spark/digests.txt (one line per
# sources digest), to commit with a release.
record_engine_sources() {
  local built=$RECORD_ROOT/$ENGINE_DIR/.built sources pinned
  sources=$(find "${ENGINE_INPUTS[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  echo "$sources" >"$built/sources"
  if [ "${RECORD_RELEASE:-0}" = 1 ]; then
    pinned="$ENGINE_REPO@$(cat "$built/digest") $(cat "$built/id")"
    touch "$ENGINE_DIR/digests.txt"
    { grep -v "^$sources " "$ENGINE_DIR/digests.txt" || true; } >"$ENGINE_DIR/digests.txt.new"
    echo "$sources $pinned" >>"$ENGINE_DIR/digests.txt.new"
    mv "$ENGINE_DIR/digests.txt.new" "$ENGINE_DIR/digests.txt"
  fi
}

EXTRA_BUILD_ARGS=()
build_image engine "$ENGINE_REPO" "$ENGINE_DIR" BASE_IMAGE "$BASE_IMAGE" "${ENGINE_INPUTS[@]}"
record_engine_sources
echo "engine image: $(cat "$RECORD_ROOT/$ENGINE_DIR/.built/image")" \
  "$(cat "$RECORD_ROOT/$ENGINE_DIR/.built/digest")"
if [ "${ONLY:-}" = engine ]; then exit 0; fi
# The coordinator image's embedded engine is the engine image's: it pins transforms to that
# image's digest, as the host's embedded engine does (coordinator/engine/version.py).
EXTRA_BUILD_ARGS=(--build-arg "ENGINE_IMAGE_PIN=$ENGINE_REPO@$(cat "$RECORD_ROOT/$ENGINE_DIR/.built/digest")")
build_image coordinator "$COORDINATOR_REPO" "$COORDINATOR_DIR" ENGINE_IMAGE \
  "$(cat "$RECORD_ROOT/$ENGINE_DIR/.built/image")" "${COORDINATOR_INPUTS[@]}"
echo "coordinator image: $(cat "$RECORD_ROOT/$COORDINATOR_DIR/.built/image")"
