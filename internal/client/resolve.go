package client

import (
	"context"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A sandbox is named on the command line as Docker names containers: by
// its id, a unique prefix of its id (with or without the "sb"), or its
// unique name. A full id is used as it is; anything else is looked up in
// the caller's list (admins: every sandbox), exact id first, then an exact
// name, then an id prefix. A reference more than one sandbox answers to is
// refused with the candidates, never guessed.

// fullID is a sandbox id (internal/sandbox newID: "sb" and 16 hex digits).
var fullID = regexp.MustCompile(`^sb[0-9a-f]{16}$`)

// maxCandidates bounds the ids an ambiguity error names.
const maxCandidates = 5

// Resolve returns the id of the sandbox ref names.
func (c *Client) Resolve(ctx context.Context, ref string) (string, error) {
	if fullID.MatchString(ref) {
		return ref, nil
	}
	if strings.TrimSpace(ref) == "" {
		return "", &Error{Status: http.StatusBadRequest, Message: "an empty sandbox name: give its name or id (see `sandhold ls`)"}
	}
	sbs, err := c.List(ctx)
	if err != nil {
		return "", err
	}
	return resolveIn(sbs, ref)
}

// resolveIn picks ref's sandbox from sbs.
func resolveIn(sbs []Sandbox, ref string) (string, error) {
	var named, prefixed []string
	for _, s := range sbs {
		switch {
		case s.ID == ref:
			return s.ID, nil
		case s.Name == ref:
			named = append(named, s.ID)
		case strings.HasPrefix(s.ID, ref) || strings.HasPrefix(s.ID, "sb"+ref):
			prefixed = append(prefixed, s.ID)
		}
	}
	switch {
	case len(named) == 1:
		return named[0], nil
	case len(named) > 1:
		return "", ambiguous(ref, "are named", named)
	case len(prefixed) == 1:
		return prefixed[0], nil
	case len(prefixed) > 1:
		return "", ambiguous(ref, "have ids starting with", prefixed)
	}
	return "", &Error{Status: http.StatusNotFound, Resource: "sandbox " + Escape(ref),
		Message: "no sandbox of yours has this name or an id starting with it"}
}

func ambiguous(ref, how string, ids []string) error {
	sort.Strings(ids)
	n, more := len(ids), ""
	if n > maxCandidates {
		more = ", …"
		ids = ids[:maxCandidates]
	}
	return &Error{Status: http.StatusConflict, Message: strconv.Itoa(n) + " sandboxes " + how + " " + Escape(ref) +
		" (" + strings.Join(ids, ", ") + more + "): give more of the id"}
}
