// Command benchdoc renders the tables of the committed measurements (docs/bench/*.json, the
// envelope with a "tables" array) into the docs: the text between <!-- bench:<id> --> and
// <!-- /bench:<id> --> in README.md and docs/**/*.md becomes the table with that id and a
// source line (file, command, date, commit, cores, load average before and after). `make docs`
// runs it; with -check it changes nothing and fails when a rendered table is stale (make
// verify-generated) or when a docs/bench/*.json is rendered by no page (make lint): a file is
// rendered when a marker of some page names one of its tables; a file without tables counts
// when docs/bench/HISTORY.md links it. A marker whose id no JSON file has is reported and left
// as it is.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/registrar-dev/registrar/bench/benchfmt"
)

// envelope is a measurement file; benchdoc reads its facts and tables, not its runs.
type envelope = benchfmt.Envelope[json.RawMessage]

// source is a table with the file it came from.
type source struct {
	path string // slash-separated, relative to the repository root
	env  *envelope
	t    benchfmt.Table
}

func main() {
	root := flag.String("root", ".", "Repository root.")
	check := flag.Bool("check", false, "Change nothing; fail when a rendered table differs from its JSON.")
	flag.Parse()
	stale, err := run(*root, *check, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
	orphans, err := unrendered(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
	for _, o := range orphans {
		fmt.Fprintf(os.Stderr, "benchdoc: %s: no page renders a table of it (render it in docs/bench/HISTORY.md, or link it there when it has no tables)\n", o)
	}
	if *check && len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "benchdoc: stale bench tables in %s: run 'make docs' and commit the result\n", strings.Join(stale, ", "))
	}
	if *check && (len(stale) > 0 || len(orphans) > 0) {
		os.Exit(1)
	}
}

// historyPage is the page of superseded measurements; linking a JSON without tables from it
// counts as publishing that file.
const historyPage = "docs/bench/HISTORY.md"

// docPages lists README.md and every docs/**/*.md under root (absolute paths).
func docPages(root string) ([]string, error) {
	out := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return out, err
}

// tableID is the id of a table, all that unrendered reads of it.
type tableID struct {
	ID string `json:"id"`
}

// unrendered returns the docs/bench/*.json files (slash-separated, relative to root) that no
// page renders: none of their tables has a marker in README.md or docs/**/*.md, or, for a file
// without tables, docs/bench/HISTORY.md does not link it.
func unrendered(root string) ([]string, error) {
	pages, err := docPages(root)
	if err != nil {
		return nil, err
	}
	marked := map[string]bool{}
	history := ""
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, m := range openMarker.FindAllStringSubmatch(string(data), -1) {
			marked[m[1]] = true
		}
		if rel, _ := filepath.Rel(root, p); filepath.ToSlash(rel) == historyPage {
			history = string(data)
		}
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "bench", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var probe struct {
			Tables []tableID `json:"tables"`
		}
		if err := json.Unmarshal(data, &probe); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		rendered := slices.ContainsFunc(probe.Tables, func(t tableID) bool { return marked[t.ID] })
		if len(probe.Tables) == 0 {
			rendered = strings.Contains(history, "]("+filepath.Base(f)+")")
		}
		if !rendered {
			rel, _ := filepath.Rel(root, f)
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out, nil
}

// run renders every marker of README.md and docs/**/*.md under root and returns the files
// whose content changed (or, with check, would change).
func run(root string, check bool, warn *os.File) ([]string, error) {
	sources, err := loadSources(root)
	if err != nil {
		return nil, err
	}
	docs, err := docPages(root)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, doc)
		out, unknown, err := render(string(data), filepath.ToSlash(filepath.Dir(rel)), sources)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		for _, id := range unknown {
			fmt.Fprintf(warn, "benchdoc: %s: no docs/bench/*.json has a table %q; left as it is\n", rel, id)
		}
		if out == string(data) {
			continue
		}
		stale = append(stale, rel)
		if !check {
			if err := os.WriteFile(doc, []byte(out), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

// loadSources reads the tables of every docs/bench/*.json; a table id may appear once.
func loadSources(root string) (map[string]source, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "bench", "*.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]source{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var probe struct {
			Tables json.RawMessage `json:"tables"`
		}
		if err := json.Unmarshal(data, &probe); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(probe.Tables) == 0 {
			continue // a measurement without rendered tables (older envelopes)
		}
		var env envelope
		if err := json.Unmarshal(data, &env); err != nil {
			return nil, fmt.Errorf("%s: tables need the envelope (kind, date, commit, command, machine): %w", f, err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, t := range env.Tables {
			if t.ID == "" {
				return nil, fmt.Errorf("%s: a table without an id", rel)
			}
			if prev, ok := out[t.ID]; ok {
				return nil, fmt.Errorf("table %q is in both %s and %s", t.ID, prev.path, rel)
			}
			out[t.ID] = source{path: filepath.ToSlash(rel), env: &env, t: t}
		}
	}
	return out, nil
}

var openMarker = regexp.MustCompile(`<!-- bench:([A-Za-z0-9_.-]+) -->`)

// render replaces the text between each pair of markers of doc (a file in directory dir,
// relative to the root) with its table; it returns the ids without a source.
func render(doc, dir string, sources map[string]source) (string, []string, error) {
	var b strings.Builder
	var unknown []string
	rest := doc
	for {
		loc := openMarker.FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			return b.String(), unknown, nil
		}
		id := rest[loc[2]:loc[3]]
		b.WriteString(rest[:loc[1]])
		rest = rest[loc[1]:]
		closing := "<!-- /bench:" + id + " -->"
		end := strings.Index(rest, closing)
		if end < 0 {
			return "", nil, fmt.Errorf("<!-- bench:%s --> has no closing %s", id, closing)
		}
		src, ok := sources[id]
		if !ok {
			unknown = append(unknown, id)
			b.WriteString(rest[:end])
		} else {
			b.WriteString("\n" + renderTable(src, dir))
		}
		b.WriteString(closing)
		rest = rest[end+len(closing):]
	}
}

// renderTable is the markdown of a table and its source line.
func renderTable(src source, dir string) string {
	t := src.t
	var b strings.Builder
	if t.Title != "" {
		fmt.Fprintf(&b, "**%s**\n\n", cell(t.Title))
	}
	head := make([]string, len(t.Columns))
	sep := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		head[i], sep[i] = cell(c), "---"
		if i > 0 {
			sep[i] = "---:"
		}
	}
	fmt.Fprintf(&b, "| %s |\n| %s |\n", strings.Join(head, " | "), strings.Join(sep, " | "))
	for _, r := range t.Rows {
		cells := make([]string, len(t.Columns))
		for i := range cells {
			if i < len(r) {
				cells[i] = cell(r[i])
			}
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
	}
	if len(t.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range t.Notes {
			fmt.Fprintf(&b, "- %s\n", cell(n))
		}
	}
	e := src.env
	link := relLink(dir, src.path)
	sha, dirty, _ := strings.Cut(e.Commit, "-") // keep a "-dirty" suffix
	commit := sha[:min(len(sha), 12)]
	if dirty != "" {
		commit += "-" + dirty
	}
	fmt.Fprintf(&b, "\nSource: [%s](%s) — `%s`, %s, commit %s, %d cores, load average %s before, %s after.\n",
		src.path, link, e.Command, e.Date, commit, e.Machine.Cores, load(e.Machine.LoadBefore), load(e.Machine.LoadAfter))
	return b.String()
}

func load(l [3]float64) string { return fmt.Sprintf("%.2f / %.2f / %.2f", l[0], l[1], l[2]) }

// cell escapes what would break a table row.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// relLink is the link from a document in dir to path (both relative to the root).
func relLink(dir, path string) string {
	if dir == "." || dir == "" {
		return path
	}
	up := strings.Repeat("../", len(slices.DeleteFunc(strings.Split(dir, "/"), func(s string) bool { return s == "" })))
	if strings.HasPrefix(path, dir+"/") {
		return strings.TrimPrefix(path, dir+"/")
	}
	return up + path
}
