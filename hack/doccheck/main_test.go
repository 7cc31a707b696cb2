package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Performance", "performance"},
		{"The benchmark (`make bench`, `make bench-large`)", "the-benchmark-make-bench-make-bench-large"},
		{"Why the floor moved from 125 ms to 7 s", "why-the-floor-moved-from-125-ms-to-7-s"},
		{"Rechecks when a write ends; what the 5,000-pod RSS is made of (2026-12-02, 08:26–09:55)", "rechecks-when-a-write-ends-what-the-5000-pod-rss-is-made-of-2026-12-02-08260955"}, // an en dash is punctuation: dropped
		{"Go's pacing: GOGC 50 by default (2026-12-02)", "gos-pacing-gogc-50-by-default-2026-12-02"},
		{"Benchmark (`make bench-xds`)", "benchmark-make-bench-xds"},
		{"Owned records changed behind registrar's back are repaired", "owned-records-changed-behind-registrars-back-are-repaired"},
		{"A [linked](x.md) *emphasis* and <code>tag</code>", "a-linked-emphasis-and-tag"},
		{"snake_case stays", "snake_case-stays"},
		{"Größe & Ünïcode", "größe--ünïcode"},
	} {
		if got := Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	doc := "# Title\n## Repeat\n### Repeat\n```\n# not a heading\n```\nSetext\n======\n" +
		"<a name=\"explicit\"></a>\n<h2 id=\"by-id\">x</h2>\n| a |\n| --- |\n## Repeat\n"
	got := anchors(doc)
	for _, want := range []string{"title", "repeat", "repeat-1", "repeat-2", "setext", "explicit", "by-id"} {
		if !got[want] {
			t.Errorf("anchor %q missing from %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "a"} {
		if got[not] {
			t.Errorf("anchor %q should not be there", not)
		}
	}
}

func TestLinks(t *testing.T) {
	doc := "see [a](a.md#x) and ![img](b.png \"title\") and `[code](no.md)`\n" +
		"```\n[fenced](no.md)\n```\n[ref]: ref.md#y\n<a href=\"h.md\">h</a> [web](https://example.com) [<sp>](<s p.md>)\n"
	var got []string
	for _, l := range links(doc) {
		got = append(got, l.target)
	}
	want := []string{"a.md#x", "b.png", "ref.md#y", "https://example.com", "s p.md", "h.md"} // per line: inline links, definitions, then HTML
	if !slices.Equal(got, want) {
		t.Errorf("links = %q, want %q", got, want)
	}
}

func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("internal/pkg/a.go", "package pkg\n")
	write("README.md", "# Readme\n[ok](docs/a.md#section-one) [top](#readme) [dir](internal/pkg) [src](internal/pkg/a.go#L1)\n"+
		"[bad file](docs/missing.md) [bad anchor](docs/a.md#nope) [self bad](#nothing) [web](https://x.invalid/y)\n")
	write("docs/a.md", "# A\n## Section one\n[up](../README.md#readme) [bench](bench/HISTORY.md#2026-12-02-run)\n[out](../../etc/passwd)\n")
	write("docs/bench/HISTORY.md", "# History\n## 2026-12-02: run\n[back](../a.md#section-one) [json](x.json) [gone](../a.md#gone)\n")
	write("docs/bench/x.json", "{}")
	write("bench/README.md", "# Benchmarks\n[ok](../docs/a.md#section-one) [json](../docs/bench/x.json)\n[bad](../docs/a.md#nope)\n")

	problems, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	wantSub := []string{
		"README.md:3: docs/missing.md: docs/missing.md does not exist",
		"README.md:3: docs/a.md#nope: no heading or anchor #nope in docs/a.md",
		"README.md:3: #nothing: no heading or anchor #nothing in README.md",
		"docs/a.md:4: ../../etc/passwd: outside the repository",
		"docs/bench/HISTORY.md:3: ../a.md#gone: no heading or anchor #gone in docs/a.md",
		"bench/README.md:3: ../docs/a.md#nope: no heading or anchor #nope in docs/a.md",
	}
	if len(problems) != len(wantSub) {
		t.Errorf("got %d problems, want %d:\n%s", len(problems), len(wantSub), strings.Join(problems, "\n"))
	}
	for _, w := range wantSub {
		if !slices.Contains(problems, w) {
			t.Errorf("missing problem %q in:\n%s", w, strings.Join(problems, "\n"))
		}
	}
}
