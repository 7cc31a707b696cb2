#!/usr/bin/env bash
# Makes sure the Debian packages the tests of internal/store/zookeeper use are installed:
# zookeeper (the server they start; the package starts no service, zookeeperd would),
# libcurator-discovery-java (Apache Curator 5, the JVM caller that reads the instances back)
# and a JDK (javac compiles that reader). Installs only what is missing, so a second run costs
# nothing. Prints the ZooKeeper jar.
set -euo pipefail

JAR="${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"
CURATOR_JAR=/usr/share/java/curator-x-discovery.jar
log() { echo "[zookeeper] $*" >&2; }

missing=()
[[ -f "$JAR" ]] || missing+=(zookeeper)
[[ -f "$CURATOR_JAR" ]] || missing+=(libcurator-discovery-java)
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)

if ((${#missing[@]} > 0)); then
  command -v apt-get >/dev/null || { log "missing ${missing[*]} and no apt-get to install them"; exit 1; }
  log "installing ${missing[*]} (apt)"
  logfile="$(mktemp)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >"$logfile" 2>&1 ||
    { apt-get update >>"$logfile" 2>&1 && apt-get install -y --no-install-recommends "${missing[@]}" >>"$logfile" 2>&1; } ||
    { tail -20 "$logfile" >&2; log "apt-get install ${missing[*]} failed"; exit 1; }
  rm -f "$logfile"
  [[ -f "$JAR" && -f "$CURATOR_JAR" ]] && command -v javac >/dev/null ||
    { log "packages installed but $JAR, $CURATOR_JAR or javac is still missing"; exit 1; }
fi
log "ZooKeeper, Curator and javac present"
echo "$JAR"
