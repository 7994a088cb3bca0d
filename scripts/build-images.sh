#!/usr/bin/env bash
# Build the project's OCI images with Podman, on a machine that cannot pull public images:
#   1. Podman (runc, ulimits) installed and configured: scripts/podman-service.sh install
#   2. the local Debian base image (debootstrap), unless BASE_IMAGE names another base
#   3. the Spark engine image, tagged with a hash of its build inputs; skipped when that tag
#      already exists (cached), so an unchanged tree costs a second.
#
# Outputs, under images/engine-spark/.built/ (not committed):
#   image   the exact reference, localhost/odf-engine-spark:<inputs hash>
#   digest  the image digest (sha256:...), for pinning transforms to the exact engine
#   id      the image ID
#
# Environment: BASE_IMAGE (default localhost/odf-debian-base:bookworm), ENGINE_IMAGE_REPO
# (default localhost/odf-engine-spark), FORCE_BUILD=1 to rebuild even when cached.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${BASE_IMAGE:-localhost/odf-debian-base:bookworm}
ENGINE_REPO=${ENGINE_IMAGE_REPO:-localhost/odf-engine-spark}
ENGINE_DIR=images/engine-spark
BUILT=$ENGINE_DIR/.built
# What the engine image is built from; keep in step with the Containerfile's COPY lines.
ENGINE_INPUTS=("$ENGINE_DIR/Containerfile" "$ENGINE_DIR/requirements.py" .dockerignore pyproject.toml README.md common engine_spark)

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

inputs_hash() {
  local base_id
  base_id=$(podman image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || echo "$BASE_IMAGE")
  {
    echo "base $BASE_IMAGE $base_id"
    find "${ENGINE_INPUTS[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}

record() {
  local ref=$1
  mkdir -p "$BUILT"
  echo "$ref" >"$BUILT/image"
  podman image inspect --format '{{.Digest}}' "$ref" >"$BUILT/digest"
  podman image inspect --format '{{.Id}}' "$ref" >"$BUILT/id"
}

build_engine() {
  local hash ref ca start
  hash=$(inputs_hash)
  ref=$ENGINE_REPO:$hash
  if [ "${FORCE_BUILD:-0}" != 1 ] && podman image exists "$ref"; then
    echo "engine image $ref present (inputs unchanged)"
    record "$ref"
    return
  fi
  local args=(--network host --layers -f "$ENGINE_DIR/Containerfile"
    --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "BUILD_INPUTS=$hash"
    -t "$ref" -t "$ENGINE_REPO:latest")
  ca=$(ca_bundle)
  if [ -n "$ca" ]; then args+=(--secret "id=ca_bundle,src=$ca"); fi
  echo "building engine image $ref"
  start=$(date +%s)
  local log
  log=$(mktemp /var/tmp/odf-engine-build.XXXXXX.log)
  if ! podman build "${args[@]}" . >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "engine image build failed; full log: $log" >&2
    exit 1
  fi
  rm -f "$log"
  echo "built $ref in $(($(date +%s) - start)) s"
  record "$ref"
  drop_stale_tags "$ref"
}

# Remove engine images of older inputs (unless a container still uses one); layers shared
# with the new image, and the intermediate images that serve as the layer cache, stay.
drop_stale_tags() {
  local keep=$1 tag
  podman images --format '{{.Repository}}:{{.Tag}}' "$ENGINE_REPO" | while read -r tag; do
    case "$tag" in
      "$keep" | "$ENGINE_REPO:latest" | *"<none>"*) ;;
      *) podman rmi "$tag" >/dev/null 2>&1 || true ;;
    esac
  done
}

build_engine
echo "engine image: $(cat "$BUILT/image") $(cat "$BUILT/digest")"
