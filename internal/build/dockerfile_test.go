package build

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	src := "# syntax comment\nFROM python:3.12 AS base\nARG V=1\nRUN apt-get update && \\\n    # a comment inside\n    apt-get install -y curl\nRUN [\"python3\", \"-c\", \"print(1)\"]\nCOPY --chown=app:app src/ /app/\nenv A=1 B=\"two words\"\n"
	ins, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(ins))
	for i, in := range ins {
		got[i] = in.Cmd
	}
	if strings.Join(got, " ") != "FROM ARG RUN RUN COPY ENV" {
		t.Fatalf("instructions %v", got)
	}
	if ins[2].Rest != "apt-get update &&  apt-get install -y curl" || ins[2].Line != 4 {
		t.Errorf("continuation: %q line %d", ins[2].Rest, ins[2].Line)
	}
	if !ins[3].JSON || len(ins[3].Args) != 3 {
		t.Errorf("exec form: %+v", ins[3])
	}
	if ins[4].Flags["chown"] != "app:app" || ins[4].Rest != "src/ /app/" {
		t.Errorf("flags: %+v", ins[4])
	}
	kvs, err := keyValues(ins[5], nil, true)
	if err != nil || len(kvs) != 2 || kvs[1] != [2]string{"B", "two words"} {
		t.Errorf("env: %v %v", kvs, err)
	}
}

func TestParseRefusals(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"empty", "# nothing\n", "no instructions"},
		{"heredoc", "FROM x\nRUN <<EOF\necho\nEOF\n", "heredocs"},
		{"too large", strings.Repeat("RUN true\n", MaxDockerfile/9+1), "larger than"},
		{"too many", strings.Repeat("RUN true\n", maxInstructions+1), "at most"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Parse(c.src); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "EMPTY": "", "PATH": "/bin"}
	cases := []struct{ in, want string }{
		{"$A", "x"},
		{"${A}y", "xy"},
		{"${MISSING:-def}", "def"},
		{"${EMPTY:-def}", "def"},
		{"${A:+set}", "set"},
		{"${MISSING:+set}", ""},
		{`\$A`, "$A"},
		{"$PATH:/usr/bin", "/bin:/usr/bin"},
		{"cost $5", "cost $5"},
		{"a$", "a$"},
	}
	for _, c := range cases {
		if got, err := expand(c.in, vars); err != nil || got != c.want {
			t.Errorf("expand(%q) = %q %v, want %q", c.in, got, err, c.want)
		}
	}
	if _, err := expand("${A", vars); err == nil {
		t.Error("an unterminated ${ was accepted")
	}
}

func TestWords(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		bad  bool
	}{
		{`a b  c`, []string{"a", "b", "c"}, false},
		{`k="v w" x='y z'`, []string{"k=v w", "x=y z"}, false},
		{`a\ b`, []string{"a b"}, false},
		{`"unterminated`, nil, true},
	}
	for _, c := range cases {
		got, err := words(c.in)
		if c.bad != (err != nil) || strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("words(%q) = %q %v", c.in, got, err)
		}
	}
}

func TestContextName(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"./src/a.py", "src/a.py", true},
		{"src//b", "src/b", true},
		{"../etc/passwd", "", false},
		{"a/../../b", "", false},
		{"/abs", "", false},
		{`a\b`, "", false},
	}
	for _, c := range cases {
		got, ok := contextName(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("contextName(%q) = %q %v", c.in, got, ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("FROM x\nRUN echo $A ${B:-c}\nCOPY a b\n")
	f.Add("FROM x\\\n\nENV a=\"b\nRUN [\"x\"")
	f.Fuzz(func(t *testing.T, src string) {
		ins, err := Parse(src)
		if err != nil {
			return
		}
		for _, in := range ins {
			_, _ = words(in.Rest)
			_, _ = expand(in.Rest, map[string]string{"A": "a"})
			_, _ = keyValues(in, nil, true)
		}
	})
}
