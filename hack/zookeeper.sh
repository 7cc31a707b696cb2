#!/usr/bin/env bash
# Makes sure Debian's ZooKeeper (the server the tests of internal/store/zookeeper start) is
# installed: apt-get install zookeeper when its jar is missing, nothing otherwise. Only the
# jars are needed (the package starts no service; zookeeperd would). Prints the jar path.
set -euo pipefail

JAR="${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"
log() { echo "[zookeeper] $*" >&2; }

if [[ ! -f "$JAR" ]]; then
  command -v apt-get >/dev/null || { log "no $JAR and no apt-get to install it"; exit 1; }
  command -v java >/dev/null || log "no java yet: apt installs the package's Java runtime dependency"
  log "installing zookeeper (apt)"
  logfile="$(mktemp)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends zookeeper >"$logfile" 2>&1 ||
    { apt-get update >>"$logfile" 2>&1 && apt-get install -y --no-install-recommends zookeeper >>"$logfile" 2>&1; } ||
    { tail -20 "$logfile" >&2; log "apt-get install zookeeper failed"; exit 1; }
  rm -f "$logfile"
  [[ -f "$JAR" ]] || { log "zookeeper installed but $JAR is missing"; exit 1; }
fi
log "$JAR present"
echo "$JAR"
