package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const benchJSON = `{"kind":"bench","date":"2026-11-30T23:59:00Z","commit":"0123456789abcdef0123456789abcdef01234567","command":"make bench",
 "machine":{"cores":2,"cpu_model":"x","mem_gib":4,"load_before":[1,2,3],"load_after":[4,5,6]},"runs":[],
 "tables":[{"id":"t1","title":"Lags","columns":["","a|b","c"],"rows":[["p99","1","2"],["short"]],"notes":["n1"]}]}`

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestRenderCheckAndIdempotence(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "docs/bench/b.json"), benchJSON)
	write(t, filepath.Join(root, "docs/bench/no-tables.json"), `{"kind":"xds","runs":[1],"machine":[{"nproc":2}]}`)
	write(t, filepath.Join(root, "README.md"), "# R\n<!-- bench:t1 -->\nold\n<!-- /bench:t1 -->\ntail\n")
	write(t, filepath.Join(root, "docs/perf.md"), "x <!-- bench:t1 --><!-- /bench:t1 --> <!-- bench:gone -->keep<!-- /bench:gone -->\n")
	warn, _ := os.CreateTemp(t.TempDir(), "warn")

	stale, err := run(root, true, warn)
	if err != nil || len(stale) != 2 {
		t.Fatalf("check on stale docs: %v, %v; want both files stale", stale, err)
	}
	if !strings.Contains(read(t, filepath.Join(root, "README.md")), "old") {
		t.Fatal("-check wrote a file")
	}
	if _, err := run(root, false, warn); err != nil {
		t.Fatal(err)
	}
	readme := read(t, filepath.Join(root, "README.md"))
	for _, want := range []string{
		"<!-- bench:t1 -->\n**Lags**\n\n|  | a\\|b | c |\n| --- | ---: | ---: |\n| p99 | 1 | 2 |\n| short |  |  |\n\n- n1\n",
		"Source: [docs/bench/b.json](docs/bench/b.json) — `make bench`, 2026-11-30T23:59:00Z, commit 0123456789ab, 2 cores, load average 1.00 / 2.00 / 3.00 before, 4.00 / 5.00 / 6.00 after.\n<!-- /bench:t1 -->\ntail\n",
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README lacks %q:\n%s", want, readme)
		}
	}
	if strings.Contains(readme, "old") {
		t.Error("old content kept")
	}
	perf := read(t, filepath.Join(root, "docs/perf.md"))
	if !strings.Contains(perf, "](bench/b.json)") || !strings.Contains(perf, "<!-- bench:gone -->keep<!-- /bench:gone -->") {
		t.Errorf("docs/perf.md: %s", perf)
	}
	w := read(t, warn.Name())
	if !strings.Contains(w, `"gone"`) {
		t.Errorf("no warning for the unknown id: %q", w)
	}
	if stale, err := run(root, true, warn); err != nil || len(stale) != 0 {
		t.Errorf("after rendering: stale %v, %v; want none", stale, err)
	}
	// A changed number makes the rendered table stale again.
	write(t, filepath.Join(root, "docs/bench/b.json"), strings.Replace(benchJSON, `"p99","1"`, `"p99","7"`, 1))
	if stale, _ := run(root, true, warn); len(stale) != 2 {
		t.Errorf("after a JSON change: stale %v, want both files", stale)
	}
}

func TestErrors(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "docs/bench/b.json"), benchJSON)
	write(t, filepath.Join(root, "README.md"), "<!-- bench:t1 --> never closed\n")
	if _, err := run(root, true, os.Stderr); err == nil || !strings.Contains(err.Error(), "no closing") {
		t.Errorf("unclosed marker: %v", err)
	}
	write(t, filepath.Join(root, "README.md"), "")
	write(t, filepath.Join(root, "docs/bench/c.json"), benchJSON)
	if _, err := run(root, true, os.Stderr); err == nil || !strings.Contains(err.Error(), "in both") {
		t.Errorf("duplicate id: %v", err)
	}
}

func TestRelLink(t *testing.T) {
	for _, tt := range []struct{ dir, path, want string }{
		{".", "docs/bench/a.json", "docs/bench/a.json"},
		{"docs", "docs/bench/a.json", "bench/a.json"},
		{"docs/sub", "docs/bench/a.json", "../../docs/bench/a.json"},
	} {
		if got := relLink(tt.dir, tt.path); got != tt.want {
			t.Errorf("relLink(%q, %q) = %q, want %q", tt.dir, tt.path, got, tt.want)
		}
	}
}

func TestUnrendered(t *testing.T) {
	root := t.TempDir()
	second := strings.Replace(benchJSON, `"id":"t1"`, `"id":"t2"`, 1)
	write(t, filepath.Join(root, "docs/bench/rendered.json"), benchJSON)
	write(t, filepath.Join(root, "docs/bench/history.json"), second)
	write(t, filepath.Join(root, "docs/bench/orphan.json"), strings.Replace(benchJSON, `"id":"t1"`, `"id":"t3"`, 1))
	write(t, filepath.Join(root, "docs/bench/listed.json"), `{"kind":"old","runs":[1]}`)
	write(t, filepath.Join(root, "docs/bench/unlisted.json"), `{"kind":"old","runs":[1]}`)
	write(t, filepath.Join(root, "README.md"), "<!-- bench:t1 --><!-- /bench:t1 -->\n")
	write(t, filepath.Join(root, "docs/bench/HISTORY.md"), "<!-- bench:t2 --><!-- /bench:t2 -->\n- [listed.json](listed.json): what it is\n")
	got, err := unrendered(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docs/bench/orphan.json", "docs/bench/unlisted.json"}
	if !slices.Equal(got, want) {
		t.Errorf("unrendered = %q, want %q", got, want)
	}
	// docs/bench/HISTORY.md is rendered like any page.
	if _, err := run(root, false, os.Stderr); err != nil {
		t.Fatal(err)
	}
	if h := read(t, filepath.Join(root, "docs/bench/HISTORY.md")); !strings.Contains(h, "Source: [docs/bench/history.json](history.json)") {
		t.Errorf("HISTORY.md not rendered: %s", h)
	}
}
