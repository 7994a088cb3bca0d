#!/usr/bin/env bash
# System packages a fresh machine needs: a Java 17+ runtime for Spark.
# (Container tooling is installed by scripts/build-images.sh, only where tests need it.)
set -euo pipefail

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]; exit}'
}

if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ]; then
  echo "java $(java_major) present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing a Java 17 runtime for Spark"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
