# OCI images of the project, for `docker buildx bake` on machines with Docker and a registry.
# On machines without them, scripts/build-images.sh builds the same Containerfiles with Podman
# on a local debootstrapped base (and caches the result by a hash of the build inputs).
#
#   docker buildx bake                                  # all images
#   docker buildx bake engine-spark --set '*.platform=linux/amd64'
#   BASE_IMAGE=debian:bookworm-slim TAG=0.1.0 docker buildx bake
#   CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt docker buildx bake   # egress that re-signs TLS

variable "BASE_IMAGE" {
  # Our local debootstrap base; on a normal machine any Debian bookworm image works.
  default = "localhost/odf-debian-base:bookworm"
}

variable "REGISTRY" {
  default = "localhost"
}

variable "TAG" {
  default = "latest"
}

variable "CA_BUNDLE" {
  # Optional path to a CA bundle for HTTPS downloads during the build (never kept in the image).
  default = ""
}

group "default" {
  targets = ["engine-spark", "coordinator"]
}

target "_common" {
  context = "."
  args = {
    BASE_IMAGE = BASE_IMAGE
  }
  secret = CA_BUNDLE != "" ? ["id=ca_bundle,src=${CA_BUNDLE}"] : []
}

target "engine-spark" {
  inherits   = ["_common"]
  dockerfile = "images/engine-spark/Containerfile"
  tags       = ["${REGISTRY}/odf-engine-spark:${TAG}"]
}

# The coordinator daemon (odf serve) with its embedded engine: built on the engine image.
target "coordinator" {
  inherits   = ["_common"]
  dockerfile = "images/coordinator/Containerfile"
  contexts   = { engine = "target:engine-spark" }
  args       = { ENGINE_IMAGE = "engine" }
  tags       = ["${REGISTRY}/odf-coordinator:${TAG}"]
}
