package xpucmd

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// backendGuide is the guide to writing a backend, whose sections the
// failure lines of `xpu conformance` point to.
const backendGuide = "docs/backend-guide.md"

// guideSections maps the requirement areas of the suite — a case's name
// under its backend, with the space's name dropped from the space and pool
// cases — to the section of the guide that states them; the longest prefix
// wins. An anchor is an explicit <a id> of the guide or a heading's
// GitHub anchor (a test checks that each exists).
var guideSections = []struct{ prefix, anchor string }{
	{"backend/composition", "0-the-shape-every-backend-shares"},
	{"backend/capabilities", "capabilities"},
	{"backend/devices", "capabilities"},
	{"space", "1-memory-memspacespace"},
	{"space/close", "space-close"},
	{"space/no-leak", "prove"},
	{"pool", "1-memory-memspacespace"},
	{"pool/close-live", "space-close"},
	{"pool/no-leak", "prove"},
	{"executor", "2-execution-executorexecutor-parallel-streamer"},
	{"executor/execute/canceled", "context"},
	{"executor/parallel/cancel", "context"},
	{"executor/no-leak", "prove"},
	{"stream", "2-execution-executorexecutor-parallel-streamer"},
	{"stream/synchronize/canceled", "context"},
	{"stream/event/wait-canceled", "context"},
	{"stream/no-leak", "prove"},
	{"transfer", "4-transfers-transferregister"},
	{"transfer/no-leak", "prove"},
	{"comm", "3-communication-commcomm"},
	{"comm/p2p", "comm-matching"},
	{"comm/p2p/truncated", "comm-truncation"},
	{"comm/p2p/cancel", "comm-cancel"},
	{"comm/p2p/wait-timeout", "comm-contexts"},
	{"comm/requests", "comm-requests"},
	{"comm/close", "comm-close"},
	{"comm/close/peer-lost", "comm-peer-lost"},
	{"comm/coll/peer-lost", "comm-revocation"},
	{"comm/context", "comm-contexts"},
	{"comm/flight", "comm-flight"},
	{"comm/onesided", "comm-one-sided"},
	{"comm/onesided/peer-lost", "comm-peer-lost"},
	{"comm/no-leak", "prove"},
}

// guideOther is the section for what no prefix names: a failure outside
// the cases (a backend that does not open, a stale declaration).
const guideOther = "prove"

// suiteAreas are the first names of the cases under a backend; any other
// first name is a space's, followed by space or pool.
var suiteAreas = map[string]bool{"backend": true, "executor": true, "stream": true, "transfer": true, "comm": true}

// guideAnchor returns the guide's anchor for the requirement req (a case's
// name under its backend, parameters dropped), and whether a prefix of
// guideSections named it.
func guideAnchor(req string) (string, bool) {
	parts := strings.Split(req, "/")
	if len(parts) > 1 && !suiteAreas[parts[0]] {
		parts = parts[1:] // the space's name
	}
	path := strings.Join(parts, "/")
	best, anchor := -1, guideOther
	for _, s := range guideSections {
		if (path == s.prefix || strings.HasPrefix(path, s.prefix+"/")) && len(s.prefix) > best {
			best, anchor = len(s.prefix), s.anchor
		}
	}
	return anchor, best >= 0
}

// param is a parameter of a case (n=4, size=1KiB): the same requirement
// checked again, not another one.
var param = regexp.MustCompile(`^[A-Za-z]+=[^/]+$`)

// requirement splits a test's name into its requirement (the name with
// its parameters dropped) and its parameters.
func requirement(name string) (req string, params []string) {
	var keep []string
	for _, p := range strings.Split(name, "/") {
		if param.MatchString(p) {
			params = append(params, p)
		} else {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "/"), params
}

var (
	// logEntry starts a message of t.Log or t.Error in go test -v output.
	logEntry = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: ?(.*)$`)
	// testifyField is a field of testify's failure report.
	testifyField = regexp.MustCompile(`^(Error Trace|Error|Test|Messages):\s*(.*)$`)
	// guideLink is how the suite's rules point to the guide.
	guideLink = regexp.MustCompile(`\s*\(see ` + regexp.QuoteMeta(backendGuide) + `#([\w-]+)\)`)
	spaces    = regexp.MustCompile(`\s+`)
)

// caseLogs splits go test -v output by the test each line belongs to,
// leaving out the framing lines (=== RUN, --- FAIL, …).
func caseLogs(log []string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, line := range log {
		if strings.HasPrefix(line, "=== ") {
			if f := strings.Fields(line); len(f) >= 3 {
				cur = f[2]
			}
			continue
		}
		if resultLine.MatchString(line) || cur == "" || line == "PASS" || line == "FAIL" {
			continue // framing, or the run's last line
		}
		out[cur] = append(out[cur], line)
	}
	return out
}

// entries groups a test's log lines into its messages, each with the
// lines that continue it.
func entries(lines []string) [][]string {
	var out [][]string
	for _, l := range lines {
		if m := logEntry.FindStringSubmatch(l); m != nil {
			out = append(out, []string{m[1]})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], l)
		}
	}
	return out
}

// summary returns an entry as one line: for testify's report its
// Messages and its Error (what was observed against what was expected),
// for any other the message's lines joined; and whether it is testify's.
func summary(e []string) (string, bool) {
	oneLine := func(ls []string) string {
		return strings.TrimSpace(spaces.ReplaceAllString(strings.Join(ls, " "), " "))
	}
	if strings.TrimSpace(e[0]) != "" || len(e) < 2 || !strings.HasPrefix(strings.TrimSpace(e[1]), "Error Trace:") {
		return oneLine(e), false
	}
	fields := map[string][]string{}
	field := ""
	for _, l := range e[1:] {
		l = strings.TrimSpace(l)
		if m := testifyField.FindStringSubmatch(l); m != nil {
			field = m[1]
			l = m[2]
		}
		fields[field] = append(fields[field], l)
	}
	msg, obs := oneLine(fields["Messages"]), oneLine(fields["Error"])
	switch {
	case msg == "":
		return obs, true
	case obs == "" || obs == "Should be true" || obs == "Should be false":
		return msg, true
	}
	return msg + ": " + obs, true
}

// firstFailure picks the message that says why a test failed: testify's
// first report, or else the first message that links to the guide (a
// rule's), or else its first message (the suite's notes, logged with
// t.Logf, look the same in go test's output).
func firstFailure(es [][]string) string {
	first, linked := "", ""
	for _, e := range es {
		s, testify := summary(e)
		if testify {
			return s
		}
		if linked == "" && guideLink.MatchString(s) {
			linked = s
		}
		if first == "" {
			first = s
		}
	}
	if linked != "" {
		return linked
	}
	return first
}

// failure is a failed requirement of one backend.
type failure struct {
	name     string   // backend/requirement
	params   []string // the parameters it failed at
	message  string   // the first failure's, one line
	messages int      // of every failed test of the requirement
}

// failures returns the failed requirements of rs, in the order of their
// first failure: each failed test with no subtests, and each failed test
// that reports a failure of its own (outside its cases), by requirement.
func failures(log []string, rs []result) []failure {
	logs := caseLogs(log)
	isLeaf := map[string]bool{}
	for _, r := range leaves(rs) {
		isLeaf[r.name] = true
	}
	var out []*failure
	byName := map[string]*failure{}
	for _, r := range rs {
		if r.status != "FAIL" {
			continue
		}
		es := entries(logs[r.name])
		if !isLeaf[r.name] && len(es) == 0 {
			continue // failed because a subtest did
		}
		req, params := requirement(r.name)
		f := byName[req]
		if f == nil {
			f = &failure{name: req, message: firstFailure(es)}
			byName[req] = f
			out = append(out, f)
		}
		f.params = append(f.params, params...)
		f.messages += len(es)
	}
	res := make([]failure, len(out))
	for i, f := range out {
		res[i] = *f
	}
	return res
}

// printFailures prints one line per failed requirement: its name, the
// parameters it failed at, the first failure's message, and the section
// of the guide that states the requirement.
func printFailures(w io.Writer, fs []failure) {
	for _, f := range fs {
		msg, anchor := f.message, ""
		if m := guideLink.FindStringSubmatch(msg); m != nil {
			anchor = m[1] // the rule the case quotes
			msg = strings.TrimSpace(guideLink.ReplaceAllString(msg, ""))
		} else {
			_, req, _ := strings.Cut(f.name, "/")
			anchor, _ = guideAnchor(req)
		}
		if msg == "" {
			msg = "failed without a message"
		}
		line := "FAIL " + f.name
		if len(f.params) > 0 {
			line += " [" + strings.Join(f.params, " ") + "]"
		}
		line += ": " + msg
		if more := f.messages - 1; more > 0 {
			line += fmt.Sprintf(" (and %d more)", more)
		}
		fmt.Fprintf(w, "%s (see %s#%s)\n", line, backendGuide, anchor)
	}
}
