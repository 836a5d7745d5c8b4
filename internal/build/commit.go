package build

import (
	"context"
	"io"
	"sync"

	"github.com/sandhold/sandhold/internal/auth"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/sandbox"
	"github.com/sandhold/sandhold/internal/template"
)

// CommitArgs is template.commit's arguments.
type CommitArgs struct {
	ID   string `json:"id" required:"true" maxLength:"64" doc:"the sandbox to commit"`
	Name string `json:"name" required:"true" maxLength:"128" doc:"the new template's name"`
	Tag  string `json:"tag,omitempty" maxLength:"128" doc:"its tag (default latest)"`
}

// Commit makes a template of a template sandbox's writable layer on top of
// its template's layers: what the sandbox installed or changed outside
// /workspace (the workspace is the sandbox's data, not its template). The
// sandbox is frozen while its layer is read.
func (b *Builder) Commit(ctx context.Context, c auth.Caller, a CommitArgs) (template.Template, error) {
	if _, err := template.ParseRef("name", a.Name+":"+tagOr(a.Tag)); err != nil {
		return template.Template{}, err
	}
	s, err := b.sandboxes.Get(sandbox.Caller{KeyID: c.KeyID, Admin: c.IsAdmin()}, a.ID)
	if err != nil {
		return template.Template{}, err
	}
	parent := s.Info().TemplateDigest
	if parent == "" {
		return template.Template{}, fault.New(fault.Invalid, "a host sandbox has no writable root to commit: make it from a template")
	}
	txn := b.store.Begin()
	defer txn.Close()
	m, err := txn.Use(parent)
	if err != nil {
		return template.Template{}, fault.New(fault.Unavailable, "the sandbox's template is no longer in the store")
	}
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	var perr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, perr = s.PackRoot(ctx, pw, b.store.LayerLimits())
		_ = pw.CloseWithError(perr)
	}()
	l, err := txn.AddLayer(ctx, pr, template.LayerSource{})
	_ = pr.CloseWithError(io.ErrClosedPipe)
	wg.Wait()
	if perr != nil {
		return template.Template{}, perr
	}
	if err != nil {
		return template.Template{}, err
	}
	layers := append([]template.Layer(nil), m.Layers...)
	if l.Entries > 0 {
		layers = append(layers, l)
	}
	return txn.Put(template.OwnerOf(c), a.Name, tagOr(a.Tag), template.Manifest{Layers: layers, Config: m.Config,
		Source: template.Source{Kind: "commit", Parent: parent, Sandbox: a.ID}})
}
