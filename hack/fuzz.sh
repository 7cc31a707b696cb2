#!/usr/bin/env bash
# Runs each Go fuzz target of the given packages for FUZZTIME (default 30s).
# Usage: hack/fuzz.sh ./internal/store/etcd [more packages...]
#
# A new failing input is written to the package's testdata/fuzz/<target>/ and fails the run;
# commit it (it becomes a seed that `make test` replays) after fixing the bug. Go 1.26's fuzz
# coordinator can end a duration-limited run with a bare "context deadline exceeded" under CPU
# contention and no failing input (go.dev/issue/75804, fixed in Go 1.27): that is reported as
# such and not counted as a failure.
set -uo pipefail
FUZZTIME=${FUZZTIME:-30s}
fail=0
for pkg in "$@"; do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
    dir="$pkg/testdata/fuzz/$target"
    before=$(ls "$dir" 2>/dev/null | sort)
    echo "== $pkg $target ($FUZZTIME)"
    # ETCD_BIN is unset: the package's TestMain then starts no etcd server for the workers.
    out=$(env -u ETCD_BIN go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel "${FUZZ_PARALLEL:-2}" 2>&1)
    rc=$?
    echo "$out" | tail -n 4
    after=$(ls "$dir" 2>/dev/null | sort)
    if [ $rc -ne 0 ]; then
      if [ "$before" == "$after" ] && echo "$out" | grep -q 'context deadline exceeded'; then
        echo "   (no failing input: Go fuzz coordinator deadline race, go.dev/issue/75804)"
      else
        echo "   FAILED: new input(s) in $dir:"; comm -13 <(echo "$before") <(echo "$after"); fail=1
      fi
    fi
  done
done
exit $fail
