package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Entry is one line of the skip log: a test that skipped (or ran with a stand-in)
// because a need was missing.
type Entry struct {
	Package  string `json:"package"`
	Test     string `json:"test"`
	Need     string `json:"need"`
	Install  string `json:"install"`
	What     string `json:"what"` // "skipped" or "ran without it"
	Reason   string `json:"reason"`
	Expected bool   `json:"expected,omitempty"`
}

// marshal is the entry as one JSON line.
func (e Entry) marshal() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // strings and a bool always marshal
	}
	return append(b, '\n')
}

// ReadLog reads a skip log; a missing file is an empty log (nothing skipped). Lines
// that are not entries are errors: a torn log would hide skips.
func ReadLog(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("testenv: %s line %d is not a skip entry: %w", path, n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Report writes the summary make test prints at the end: every skip, grouped by what
// was missing, with how to install it; the needs a machine without a GPU lacks by
// design are listed last and marked as expected. Duplicates (a child process
// re-running a test) are listed once.
func Report(w io.Writer, entries []Entry) {
	type key struct{ pkg, test, reason, what string }
	groups := map[string][]key{}
	seen := map[string]map[key]bool{}
	info := map[string]Entry{}
	for _, e := range entries {
		k := key{e.Package, e.Test, firstLine(e.Reason), e.What}
		if seen[e.Need] == nil {
			seen[e.Need] = map[key]bool{}
			info[e.Need] = e
		}
		if !seen[e.Need][k] {
			seen[e.Need][k] = true
			groups[e.Need] = append(groups[e.Need], k)
		}
	}
	if len(groups) == 0 {
		fmt.Fprintln(w, "make test: no check was skipped.")
		return
	}
	needs := make([]string, 0, len(groups))
	for n := range groups {
		needs = append(needs, n)
	}
	sort.Slice(needs, func(i, j int) bool {
		a, b := info[needs[i]], info[needs[j]]
		if a.Expected != b.Expected {
			return !a.Expected
		}
		return needs[i] < needs[j]
	})
	total, expected := 0, 0
	for _, n := range needs {
		total += len(groups[n])
		if info[n].Expected {
			expected += len(groups[n])
		}
	}
	fmt.Fprintf(w, "make test: %d checks skipped or ran without what they need (%d of them expected on a machine without a GPU):\n", total, expected)
	for _, n := range needs {
		e := info[n]
		tag := ""
		if e.Expected {
			tag = " [expected without a GPU]"
		}
		fmt.Fprintf(w, "\n  missing %s%s — %s\n", n, tag, e.Install)
		// Tests of one package skipped for one reason share a line.
		type line struct{ pkg, what, reason string }
		var lines []line
		tests := map[line][]string{}
		for _, k := range groups[n] {
			l := line{k.pkg, k.what, k.reason}
			if tests[l] == nil {
				lines = append(lines, l)
			}
			tests[l] = append(tests[l], k.test)
		}
		sort.Slice(lines, func(i, j int) bool {
			if lines[i].pkg != lines[j].pkg {
				return lines[i].pkg < lines[j].pkg
			}
			return lines[i].reason < lines[j].reason
		})
		for _, l := range lines {
			ts := tests[l]
			sort.Strings(ts)
			fmt.Fprintf(w, "    %s %s %s: %s\n", l.pkg, strings.Join(ts, ", "), l.what, l.reason)
		}
	}
}

// firstLine is s up to its first newline, at most 200 bytes, so one skip is one line.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
