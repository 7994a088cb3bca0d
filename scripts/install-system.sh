#!/usr/bin/env bash
# System packages a fresh machine needs: a Java 17+ runtime for Spark, the Mosquitto MQTT
# broker the MQTT source's tests run against, and Chromium with its driver (the web UI's
# browser tests drive Debian's build; no browser is ever downloaded by a test tool).
# (Container tooling is installed by scripts/build-images.sh, only where tests need it.)
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
updated=0
apt_install() {
  if [ "$updated" = 0 ]; then
    $SUDO apt-get update -qq
    updated=1
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ]; then
  echo "mosquitto present"
else
  echo "installing the Mosquitto MQTT broker (for the MQTT source's tests)"
  apt_install mosquitto
fi

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  echo "chromium present"
else
  echo "installing Chromium and its driver (for the web UI's browser tests)"
  apt_install chromium chromium-driver
fi

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]; exit}'
}

if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ]; then
  echo "java $(java_major) present"
  exit 0
fi

echo "installing a Java 17 runtime for Spark"
apt_install openjdk-17-jre-headless
