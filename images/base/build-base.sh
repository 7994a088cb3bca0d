#!/usr/bin/env bash
# Build a local Debian base image with debootstrap, for machines that cannot pull public images.
#
#   images/base/build-base.sh [IMAGE]    (default localhost/odf-debian-base:bookworm)
#
# The Debian mirror is the one this machine's apt already uses (read from /etc/apt at build
# time), so no host name lives in the repository. Does nothing when IMAGE already exists.
set -euo pipefail

IMAGE=${1:-localhost/odf-debian-base:bookworm}
SUITE=${DEBIAN_SUITE:-bookworm}

# Print the first mirror URI that serves $SUITE, from deb822 .sources and one-line .list files.
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      function flush() {
        if (uri != "" && (" " suites " ") ~ (" " suite " ")) { print uri; found = 1; exit }
        uri = ""; suites = ""
      }
      /^[[:space:]]*$/ { flush(); next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { $1 = ""; suites = $0 }
      END { if (!found) flush() }
    ' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit }
      }
    ' "$f"
  done
}

if podman image exists "$IMAGE"; then
  echo "base image $IMAGE present"
  exit 0
fi

MIRROR=$(debian_mirror | head -n 1)
if [ -z "$MIRROR" ]; then
  echo "no apt source for Debian $SUITE found under /etc/apt; cannot debootstrap" >&2
  exit 1
fi

WORK=$(mktemp -d /var/tmp/odf-base.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
echo "debootstrap $SUITE from $MIRROR"
start=$(date +%s)
debootstrap --variant=minbase "$SUITE" "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
  tail -n 30 "$WORK/debootstrap.log" >&2
  exit 1
}
rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
tar -C "$WORK/rootfs" -c . | podman import \
  --change 'CMD ["/bin/bash"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --quiet - "$IMAGE" >/dev/null
echo "built $IMAGE in $(($(date +%s) - start)) s"
