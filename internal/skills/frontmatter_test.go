package skills

import "testing"

func TestSplitFrontMatter(t *testing.T) {
	for _, tc := range []struct {
		name, in, body, desc string
		ok                   bool
	}{
		{"plain", "---\ndescription: d\n---\nbody\n", "body\n", "d", true},
		{"crlf-bom", "\ufeff---\r\ndescription: d\r\n---\r\n\r\nbody\r\n", "body\n", "d", true},
		{"no-front-matter", "# Title\n", "# Title\n", "", true},
		{"only-front-matter", "---\ndescription: d\n---", "", "d", true},
		{"unclosed", "---\ndescription: d\nbody\n", "", "", false},
		{"not-a-mapping", "---\n- a\n- b\n---\nx", "", "", false},
		{"bad-yaml", "---\na: [x\n---\n", "", "", false},
		{"alias-bomb", "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n---\n", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm, body, err := splitFrontMatter([]byte(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("err %v", err)
			}
			if !tc.ok {
				return
			}
			if body != tc.body {
				t.Errorf("body %q", body)
			}
			if d, _ := fm["description"].(string); d != tc.desc {
				t.Errorf("description %q", d)
			}
		})
	}
}
