#!/usr/bin/env bash
# Runs Maven for the project's Java pieces (test/interop/app, and whatever else builds a jar)
# with a local repository of the project's own, so a fresh machine fetches the artefacts once
# from Maven Central and later runs fetch nothing:
#
#   hack/maven.sh -f test/interop/app/pom.xml -DskipTests package
#
# MAVEN_REPO   the local repository (default ${XDG_CACHE_HOME:-$HOME/.cache}/registrar/maven);
#              like the Go module cache, it is outside the work tree and shared by clones.
# MVN          the Maven command (default mvn; when it is missing, apt installs Debian's maven).
# MAVEN_OFFLINE=1  never touch the network (-o); by default Maven goes online only for what the
#              repository lacks, so a filled repository makes no request at all.
# Every artefact and plugin comes from Maven Central (hack/maven-settings.xml mirrors '*' to it).
# The first run of the interop caller downloads about 90 MB (Spring Boot 4.0.7, Spring Cloud
# 2025.1.4, the Maven plugins).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MAVEN_REPO="${MAVEN_REPO:-${XDG_CACHE_HOME:-$HOME/.cache}/registrar/maven}"
MVN="${MVN:-mvn}"

if ! command -v "$MVN" >/dev/null 2>&1 && [[ "$MVN" == mvn ]] && command -v apt-get >/dev/null 2>&1; then
  echo "[maven] installing maven and openjdk-17-jdk-headless (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y --no-install-recommends maven openjdk-17-jdk-headless ||
    { apt-get update && apt-get install -y --no-install-recommends maven openjdk-17-jdk-headless; }; } >/dev/null 2>&1 || true
fi
if ! command -v "$MVN" >/dev/null 2>&1; then
  echo "hack/maven.sh: $MVN not found: install Maven 3.8+ and a JDK 17+ (Debian: apt-get install maven openjdk-17-jdk-headless)" >&2
  exit 1
fi
mkdir -p "$MAVEN_REPO"

args=(-B -ntp -Dstyle.color=never -s "$ROOT/hack/maven-settings.xml" "-Dmaven.repo.local=$MAVEN_REPO")
if [[ "${MAVEN_OFFLINE:-0}" == 1 ]]; then
  args+=(-o)
fi
exec "$MVN" "${args[@]}" "$@"
