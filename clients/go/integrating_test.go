package cuzk

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
)

// snippets returns the "// snippet: NAME" … "// end" blocks of example_test.go, each with
// the indentation of its first line removed.
func snippets(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	name, indent := "", ""
	var body []string
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "// snippet: "):
			name = strings.TrimPrefix(trimmed, "// snippet: ")
			indent = line[:len(line)-len(strings.TrimLeft(line, "\t"))]
			body = nil
		case name != "" && trimmed == "// end":
			out[name] = strings.Join(body, "\n")
			name = ""
		case name != "":
			body = append(body, strings.Replace(strings.TrimPrefix(line, indent), "\t", "    ", -1))
		}
	}
	return out
}

// docSnippets returns the ```go blocks of docs/integrating.md that follow a
// "<!-- snippet: NAME -->" line.
func docSnippets(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	lines := strings.Split(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "<!-- snippet: ") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(l, "<!-- snippet: "), " -->")
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```go" {
			t.Fatalf("snippet %s: no ```go block after its marker", name)
		}
		var body []string
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		out[name] = strings.Join(body, "\n")
	}
	return out
}

// Every Go snippet of docs/integrating.md is a compiled example of example_test.go, verbatim
// (tabs as four spaces), and every example snippet is in the document.
func TestIntegratingSnippetsAreTheExamples(t *testing.T) {
	code, doc := snippets(t), docSnippets(t)
	if len(code) < 4 {
		t.Fatalf("only %d snippets in example_test.go", len(code))
	}
	for name, body := range code {
		d, ok := doc[name]
		if !ok {
			t.Errorf("snippet %s of example_test.go is not in docs/integrating.md", name)
			continue
		}
		if d != body {
			t.Errorf("snippet %s differs:\n--- docs/integrating.md\n%s\n--- example_test.go\n%s", name, d, body)
		}
	}
	for name := range doc {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/integrating.md has snippet %s that example_test.go does not", name)
		}
	}
}
