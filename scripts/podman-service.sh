#!/usr/bin/env bash
# Container runtime plumbing: Podman with runc, and its Docker-compatible API socket.
#
#   scripts/podman-service.sh install   install and configure Podman (idempotent)
#   scripts/podman-service.sh start     install, configure, and start the API service (default)
#   scripts/podman-service.sh socket    print the API socket URL (unix://...)
#
# The configuration is a containers.conf drop-in: runc (crun fails on hybrid cgroups in some
# sandboxes) and fixed ulimits (the defaults cannot always be raised). The API service runs
# `podman system service --time=0` in the background; starting it twice is harmless.
set -euo pipefail

CONF_DIR=/etc/containers/containers.conf.d
CONF_FILE=$CONF_DIR/50-odf-py.conf

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

socket_path() {
  if [ "$(id -u)" -eq 0 ]; then
    echo /run/podman/podman.sock
  else
    echo "${XDG_RUNTIME_DIR:-/run/user/$(id -u)}/podman/podman.sock"
  fi
}

install_podman() {
  local missing=()
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

configure_podman() {
  local want
  want=$(printf '%s\n' \
    '# written by odf-py scripts/podman-service.sh' \
    '[containers]' \
    'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]' \
    '[engine]' \
    'runtime = "runc"')
  if [ -f "$CONF_FILE" ] && [ "$(cat "$CONF_FILE")" = "$want" ]; then
    return
  fi
  as_root mkdir -p "$CONF_DIR"
  printf '%s\n' "$want" | as_root tee "$CONF_FILE" >/dev/null
}

service_answers() {
  timeout 5 podman --remote --url "unix://$1" version >/dev/null 2>&1
}

start_service() {
  local sock log
  sock=$(socket_path)
  if [ -S "$sock" ] && service_answers "$sock"; then
    echo "unix://$sock"
    return
  fi
  mkdir -p "$(dirname "$sock")"
  rm -f "$sock"
  log=$(dirname "$sock")/odf-py-service.log
  # From `/`: conmon inherits the service's working directory and fails ("write child: broken
  # pipe") once that directory is deleted, e.g. a test's temporary directory.
  (cd / && setsid nohup podman system service --time=0 "unix://$sock" >"$log" 2>&1 </dev/null &)
  for _ in $(seq 1 100); do
    if [ -S "$sock" ] && service_answers "$sock"; then
      echo "unix://$sock"
      return
    fi
    sleep 0.1
  done
  echo "podman API service did not answer on $sock within 10 s; see $log" >&2
  exit 1
}

case "${1:-start}" in
  install)
    install_podman
    configure_podman
    ;;
  start)
    install_podman
    configure_podman
    start_service
    ;;
  socket)
    echo "unix://$(socket_path)"
    ;;
  *)
    echo "usage: $0 [install|start|socket]" >&2
    exit 2
    ;;
esac
