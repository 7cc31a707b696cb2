# Sourced by .ci/run and hack/ci-e2e.sh: time each phase of a CI run and print them as a table.
#
#   phase NAME CMD...   runs CMD, appends "NAME<TAB>wall s<TAB>CPU s<TAB>exit code" to $CI_PHASES
#                       and returns CMD's exit code. CPU is user+system of the phase's children
#                       (from /proc/self/stat of this shell, so it counts every process the phase
#                       started and waited for: compilers, test binaries, servers).
#   ci_header           prints "=== ci: commit SHA started TIME" and the cores and load average
#                       (bench/ciphases reads them, with the table, from a saved log).
#   phase_report        prints the table (and the total) from $CI_PHASES, then
#                       "=== ci: finished TIME load average A B C".
#   suite_report LOG... prints the slowest test packages of `go test` logs ("ok  pkg  12.3s").
#
# CI_PHASES defaults to bin/ci-phases.tsv; .ci/run starts it empty and hack/ci-e2e.sh appends.

CI_PHASES="${CI_PHASES:-$PWD/bin/ci-phases.tsv}"
export CI_PHASES
mkdir -p "$(dirname "$CI_PHASES")"

# _ci_cpu prints the CPU seconds (user+system) of this shell's waited-for children so far.
_ci_cpu() {
  local stat ticks
  stat="$(cat "/proc/$$/stat")"
  stat="${stat##*) }" # fields after the command name: state is field 3, cutime 16, cstime 17
  read -r -a f <<<"$stat"
  ticks="$(getconf CLK_TCK)"
  echo $(( (f[13] + f[14]) * 100 / ticks ))
}

ci_header() {
  echo "=== ci: commit $(git rev-parse HEAD 2>/dev/null || echo unknown) started $(date -u +%FT%TZ)"
  echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), GOCACHE $(go env GOCACHE), GOMODCACHE $(go env GOMODCACHE)"
}

phase() {
  local name="$1"; shift
  local start cpu0 rc=0
  start="$(date +%s.%N)"; cpu0="$(_ci_cpu)"
  echo "=== phase: $name ($(date -u +%T) UTC)"
  "$@" || rc=$?
  local wall cpu
  wall="$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}')"
  cpu=$(( $(_ci_cpu) - cpu0 ))
  printf '%s\t%s\t%s.%02d\t%s\n' "$name" "$wall" "$((cpu / 100))" "$((cpu % 100))" "$rc" >>"$CI_PHASES"
  echo "=== phase: $name: exit $rc after ${wall} s"
  return "$rc"
}

phase_report() {
  [[ -s "$CI_PHASES" ]] || return 0
  echo
  echo "CI phases ($(nproc) cores, $(date -u +%FT%TZ)):"
  awk -F'\t' '
    BEGIN { printf "| %-34s | %7s | %8s | %4s |\n|%s|%s|%s|%s|\n", "phase", "wall s", "CPU s", "exit", "---", "---:", "---:", "---:" }
    { printf "| %-34s | %7d | %8.0f | %4s |\n", $1, $2, $3, $4; w += $2; c += $3 }
    END { printf "| %-34s | %7d | %8.0f |      |\n", "total", w, c; printf "(%d min %02d s wall)\n", w / 60, w % 60 }
  ' "$CI_PHASES"
  echo "=== ci: finished $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

suite_report() {
  local logs=()
  for l in "$@"; do [[ -s "$l" ]] && logs+=("$l"); done
  ((${#logs[@]})) || return 0
  echo
  echo "Slowest test packages:"
  grep -hE '^(ok|FAIL)[[:space:]]+[^[:space:]]+[[:space:]]+[0-9.]+s' "${logs[@]}" |
    awk '{ t = $3; sub(/s$/, "", t); printf "%8.1f s  %s %s\n", t, $1, $2 }' | sort -rn | head -15
}
