// Command doccheck fails when a relative link or an #anchor in README.md, bench/README.md or
// docs/**/*.md does not resolve: the linked file or directory must exist, and an anchor must
// be one of the target document's headings (GitHub's slug: lower case, punctuation dropped,
// spaces to hyphens, "-1", "-2" … for repeats) or an explicit <a name="…"> / id="…". Links
// with a scheme (https:, mailto:) are not checked; an anchor into a file that is not markdown
// (a line of source, #L10) is not checked either. Text in fenced code blocks and code spans
// is not a link. `make lint` runs it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

func main() {
	root := flag.String("root", ".", "Repository root.")
	flag.Parse()
	problems, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "doccheck: %d broken links\n", len(problems))
		os.Exit(1)
	}
}

// docs lists README.md, bench/README.md and every docs/**/*.md under root, slash-separated
// and relative.
func docs(root string) ([]string, error) {
	var out []string
	for _, f := range []string{"README.md", "bench/README.md"} {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err == nil {
			out = append(out, f)
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// check returns one line per broken link, "file:line: message".
func check(root string) ([]string, error) {
	files, err := docs(root)
	if err != nil {
		return nil, err
	}
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := anchorCache[rel]; ok {
			return a, nil
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		a := anchors(string(data))
		anchorCache[rel] = a
		return a, nil
	}
	var problems []string
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		for _, l := range links(string(data)) {
			if msg := resolve(root, f, l.target, anchorsOf); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", f, l.line, msg))
			}
		}
	}
	return problems, nil
}

// resolve checks one link target of the document doc; it returns what is wrong, or "".
func resolve(root, doc, target string, anchorsOf func(string) (map[string]bool, error)) string {
	if target == "" || hasScheme(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	p, frag, _ := strings.Cut(target, "#")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	file := doc
	if p != "" {
		if strings.HasPrefix(p, "/") {
			file = path.Clean(strings.TrimPrefix(p, "/"))
		} else {
			file = path.Clean(path.Join(path.Dir(doc), p))
		}
		if file == ".." || strings.HasPrefix(file, "../") {
			return fmt.Sprintf("%s: outside the repository", target)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
			return fmt.Sprintf("%s: %s does not exist", target, file)
		}
	}
	if frag == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	if u, err := url.PathUnescape(frag); err == nil {
		frag = u
	}
	a, err := anchorsOf(file)
	if err != nil {
		return fmt.Sprintf("%s: %v", target, err)
	}
	if !a[frag] {
		return fmt.Sprintf("%s: no heading or anchor #%s in %s", target, frag, file)
	}
	return ""
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func hasScheme(s string) bool { return scheme.MatchString(s) }

// link is a link target and the line it is on.
type link struct {
	line   int
	target string
}

var (
	fence      = regexp.MustCompile("^\\s{0,3}(```+|~~~+)")
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	htmlHref   = regexp.MustCompile(`<(?:a|img)\s[^>]*?(?:href|src)="([^"]*)"`)
	codeSpan   = regexp.MustCompile("(`+)[^`]*?(`+)")
)

// fences follows fenced code blocks line by line.
type fences struct{ open string } // the fence's first three characters while inside one

// skip reports whether line is a fence or inside a fenced block.
func (f *fences) skip(line string) bool {
	if m := fence.FindStringSubmatch(line); m != nil {
		switch mark := m[1][:3]; f.open {
		case "":
			f.open = mark
		case mark:
			f.open = ""
		}
		return true
	}
	return f.open != ""
}

// links returns the link targets of a markdown document, outside code.
func links(doc string) []link {
	var out []link
	var code fences
	for i, line := range strings.Split(doc, "\n") {
		if code.skip(line) {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		add := func(t string) {
			t = strings.TrimSuffix(strings.TrimPrefix(t, "<"), ">")
			out = append(out, link{line: i + 1, target: t})
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			add(m[1])
		}
		for _, m := range htmlHref.FindAllStringSubmatch(line, -1) {
			add(m[1])
		}
	}
	return out
}

var (
	atxHeading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	explicit   = regexp.MustCompile(`<[^>]*\s(?:name|id)="([^"]+)"`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// anchors returns every anchor a document defines: its headings' slugs and explicit names.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	var code fences
	lines := strings.Split(doc, "\n")
	for i, line := range lines {
		if code.skip(line) {
			continue
		}
		for _, m := range explicit.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		text, ok := "", false
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			text, ok = m[2], true
		} else if i+1 < len(lines) && strings.TrimSpace(line) != "" && isSetextUnderline(lines[i+1]) && !strings.HasPrefix(strings.TrimSpace(line), "|") {
			text, ok = strings.TrimSpace(line), true
		}
		if !ok {
			continue
		}
		s := Slug(text)
		n := seen[s]
		seen[s] = n + 1
		if n > 0 {
			s = fmt.Sprintf("%s-%d", s, n)
		}
		out[s] = true
	}
	return out
}

func isSetextUnderline(l string) bool {
	t := strings.TrimSpace(l)
	if len(t) < 1 {
		return false
	}
	return strings.Trim(t, "=") == "" || (strings.Trim(t, "-") == "" && len(t) >= 3)
}

// Slug is GitHub's anchor of a heading: the rendered text (links as their text, no HTML tags,
// no code or emphasis marks) in lower case, every character that is not a letter, a digit, a
// space, a hyphen or an underscore dropped, and each space turned into a hyphen.
func Slug(heading string) string {
	t := mdLink.ReplaceAllString(heading, "$1")
	t = htmlTag.ReplaceAllString(t, "")
	t = strings.ToLower(t)
	var b strings.Builder
	for _, r := range t {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
