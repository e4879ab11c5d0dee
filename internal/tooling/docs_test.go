package tooling_test

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// mdFile is one markdown file of the docs, read.
type mdFile struct {
	rel   string   // slash path from the module root
	lines []string // its lines, as written
}

// readDocs reads README.md and every markdown file below docs/.
func readDocs(t *testing.T, root string) []mdFile {
	t.Helper()
	var out []mdFile
	read := func(rel string) {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		require.NoError(t, err)
		out = append(out, mdFile{rel: rel, lines: strings.Split(string(b), "\n")})
	}
	read("README.md")
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err == nil {
			read(filepath.ToSlash(rel))
		}
		return err
	})
	require.NoError(t, err)
	return out
}

// prose returns f's lines with fenced code blocks blanked and inline code
// spans removed, so that code that looks like a link (`Alloc[T](space, n)`)
// is not taken for one; line numbers are kept.
func (f mdFile) prose() []string {
	out := make([]string, len(f.lines))
	fence := ""
	span := regexp.MustCompile("`+[^`]*`+")
	for i, l := range f.lines {
		trim := strings.TrimSpace(l)
		switch {
		case fence != "":
			if strings.HasPrefix(trim, fence) {
				fence = ""
			}
		case strings.HasPrefix(trim, "```"), strings.HasPrefix(trim, "~~~"):
			fence = trim[:3]
		default:
			out[i] = span.ReplaceAllString(l, "")
		}
	}
	return out
}

// anchors returns the anchors a markdown file offers: those of its
// headings, as GitHub makes them (lower case, punctuation dropped, spaces
// to hyphens, "-1", "-2" after repeats), and its explicit <a id> and
// <a name> tags.
func (f mdFile) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	explicit := regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	for i, l := range f.prose() {
		for _, m := range explicit.FindAllStringSubmatch(f.lines[i], -1) {
			out[m[1]] = true
		}
		if !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(f.lines[i], "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestDocsLinks: every relative link of README.md and docs/ leads to a file
// or directory of the repository, and its anchor, if any, to a heading or
// an <a id> of the markdown file it names.
func TestDocsLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	docs := readDocs(t, root)
	byRel := map[string]mdFile{}
	for _, f := range docs {
		byRel[f.rel] = f
	}
	link := regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	var problems []string
	checked := 0
	for _, f := range docs {
		for i, l := range f.prose() {
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				rel := f.rel
				if file != "" {
					rel = path.Clean(path.Join(path.Dir(f.rel), file))
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
						problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file or directory", f.rel, i+1, target))
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(rel, ".md") {
					continue
				}
				to, ok := byRel[rel]
				if !ok {
					b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
					require.NoError(t, err)
					to = mdFile{rel: rel, lines: strings.Split(string(b), "\n")}
				}
				if !to.anchors()[anchor] {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: %s has no heading or <a id> %q", f.rel, i+1, target, rel, anchor))
				}
			}
		}
	}
	require.NotZero(t, checked, "no relative link found: the pattern is broken")
	if len(problems) > 0 {
		t.Errorf("%d dead links in the docs:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// registered returns the names the drivers of backends/ register (a file
// calling xpu.Register with a constant of its package) and the aliases
// they register beside them (xpu.RegisterAlias), sorted.
func registered(t *testing.T, root string) (names, aliases []string) {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(root, "backends"))
	require.NoError(t, err)
	constant := regexp.MustCompile(`(?m)^\s*(?:const\s+)?(\w+)\s*=\s*"([^"]+)"`)
	reg := regexp.MustCompile(`xpu\.(Register|RegisterAlias)\((\w+),`)
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, "backends", d.Name(), "*.go"))
		require.NoError(t, err)
		var src strings.Builder
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			src.Write(b)
			src.WriteString("\n")
		}
		consts := map[string]string{}
		for _, m := range constant.FindAllStringSubmatch(src.String(), -1) {
			consts[m[1]] = m[2]
		}
		for _, m := range reg.FindAllStringSubmatch(src.String(), -1) {
			name, ok := consts[m[2]]
			require.True(t, ok, "backends/%s registers %s, which is no string constant of its package", d.Name(), m[2])
			if m[1] == "Register" {
				names = append(names, name)
			} else {
				aliases = append(aliases, name)
			}
		}
	}
	slices.Sort(names)
	slices.Sort(aliases)
	return names, aliases
}

// paragraph returns the paragraph of f (its lines up to a blank one) that
// holds marker, "" when none does.
func (f mdFile) paragraph(marker string) string {
	var para []string
	for _, l := range append(f.prose(), "") {
		if strings.TrimSpace(l) == "" {
			if p := strings.Join(para, " "); strings.Contains(p, marker) {
				return p
			}
			para = para[:0]
			continue
		}
		para = append(para, l)
	}
	return ""
}

// TestDocsBackendLists: the docs' lists of this repository's backends name
// every backend its drivers register, and no doc but an ADR (a record of
// its time) says that one of them is still to come.
func TestDocsBackendLists(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	names, aliases := registered(t, root)
	require.Contains(t, names, "cpu", "the walk of backends/ found no driver")
	docs := readDocs(t, root)
	byRel := map[string]mdFile{}
	for _, f := range docs {
		byRel[f.rel] = f
	}
	var problems []string
	for _, list := range []struct {
		file, marker string
		aliases      bool // whether the list names the aliases too
	}{
		{"README.md", "Backends:", false},
		{"docs/backend-guide.md", "The names of this repository are", true},
	} {
		// The code spans are what prose drops: read the paragraph as written.
		f := byRel[list.file]
		f.lines = slices.Clone(f.lines)
		for i, l := range f.lines {
			f.lines[i] = strings.ReplaceAll(l, "`", "\x00")
		}
		p := strings.ReplaceAll(f.paragraph(list.marker), "\x00", "`")
		if p == "" {
			problems = append(problems, fmt.Sprintf("%s: no paragraph with %q, the list of backends", list.file, list.marker))
			continue
		}
		want := names
		if list.aliases {
			want = append(slices.Clone(names), aliases...)
		}
		for _, n := range want {
			if !strings.Contains(p, "`"+n+"`") {
				problems = append(problems, fmt.Sprintf("%s: the list of backends (%q…) does not name `%s`", list.file, list.marker, n))
			}
		}
	}

	soon := regexp.MustCompile(`(?i)\b(to come|coming|planned|not yet (?:implemented|available|landed)|yet to land)\b`)
	sentenceEnd := regexp.MustCompile(`[.;:!?](\s|$)`)
	for _, f := range docs {
		if strings.HasPrefix(f.rel, "docs/adr/") {
			continue
		}
		for _, line := range strings.Split(strings.Join(f.lines, "\n"), "\n\n") {
			for _, s := range sentenceEnd.Split(strings.ReplaceAll(line, "\n", " "), -1) {
				if !soon.MatchString(s) {
					continue
				}
				var landed []string
				for _, n := range append(slices.Clone(names), aliases...) {
					if regexp.MustCompile(`\b` + regexp.QuoteMeta(n) + `\b`).MatchString(s) {
						landed = append(landed, n)
					}
				}
				if len(landed) > 0 {
					problems = append(problems, fmt.Sprintf("%s: %q says %q of %s, registered in backends/",
						f.rel, strings.TrimSpace(s), soon.FindString(s), strings.Join(landed, ", ")))
				}
			}
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d stale backend lists in the docs:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// TestDocsTablesWhole: no table of the docs is split by a blank line,
// which ends a markdown table and prints its remaining rows as text: a
// row after a blank line that follows a row must begin a new table (a
// header row followed by its |---| line).
func TestDocsTablesWhole(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	sep := regexp.MustCompile(`^\s*\|?\s*:?-{3,}`)
	var problems []string
	for _, f := range readDocs(t, root) {
		lines := f.prose()
		lastRow := -10 // the index of the last table row, before blank lines only
		for i, l := range lines {
			trim := strings.TrimSpace(l)
			switch {
			case trim == "":
				continue
			case strings.HasPrefix(trim, "|"):
				gap := i-lastRow > 1
				newTable := i+1 < len(lines) && sep.MatchString(lines[i+1])
				if lastRow >= 0 && gap && !newTable {
					problems = append(problems, fmt.Sprintf("%s:%d: a blank line splits the table of line %d", f.rel, i+1, lastRow+1))
				}
				lastRow = i
			default:
				lastRow = -10
			}
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d tables split in the docs:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
