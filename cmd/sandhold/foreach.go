package main

import "fmt"

// forEach runs act on each of refs (rm's arguments), printing the line it
// answers or its error; a failure does not stop the rest, and the exit
// status says how many failed ("2 of 3 <failed>").
func forEach(e *env, refs []string, failed string, act func(ref string) (string, error)) error {
	n := 0
	for _, ref := range refs {
		line, err := act(ref)
		if err != nil {
			_, _ = fmt.Fprintf(e.stderr, "sandhold: %v\n", err)
			n++
			continue
		}
		_, _ = fmt.Fprintln(e.stdout, line)
	}
	if n > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d %s", n, len(refs), failed)}
	}
	return nil
}
