package daemon

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/sandhold/sandhold/internal/build"
	"github.com/sandhold/sandhold/internal/template"
	"github.com/sandhold/sandhold/internal/template/layer"
	"github.com/sandhold/sandhold/internal/template/oci"
)

// gcEvery is how often unused template layers are collected besides the
// collection after each removal: a sandbox's delete may free its
// template's last use.
const gcEvery = 10 * time.Minute

// openTemplates opens the template store in the data dir.
func (d *Daemon) openTemplates() (*template.Store, error) {
	opts := template.Options{Layer: layer.DefaultLimits(), MaxBytes: d.cfg.TemplateMaxSize.Bytes(), Log: d.log}
	st, err := template.Open(filepath.Join(d.cfg.DataDir, "templates"), opts)
	if err != nil {
		return nil, fmt.Errorf("template store: %w", err)
	}
	return st, nil
}

// startTemplates wires the store to the sandbox manager (what sandboxes
// use is kept; the disk budget bounds the layers, which the disk guard
// counts with the workspace images), registers its tools and routes and
// starts the collector.
func (d *Daemon) startTemplates(budget int64) error {
	st := d.templates
	st.SetInUse(d.sandboxes.TemplatesInUse)
	st.SetRoom(func() int64 {
		if budget <= 0 {
			return math.MaxInt64
		}
		// The guard's last reading counts the images and the layers.
		images, _, _ := d.sandboxes.DiskGuard()
		return budget - images
	})
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	done := make(chan struct{})
	gc := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(gcEvery)
		defer t.Stop()
		for {
			if n, freed, err := st.GC(ctx); err != nil && ctx.Err() == nil {
				d.log.Error("template store: collect unused layers", "err", err)
			} else if n > 0 {
				d.log.Info("template store: collected unused layers", "layers", n, "bytes", freed)
			}
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-t.C:
			}
		}
	}()
	d.closers = append(d.closers, func() error { cancel(); <-done; return nil })
	for _, t := range template.Tools(st, gc) {
		d.dispatch.MustRegister(t)
	}
	d.api.TemplateRoutes(d.dispatch)
	puller, err := oci.NewPuller(st, oci.PullerOptions{Registries: d.cfg.Registries, AuthFile: d.cfg.RegistryAuthFile})
	if err != nil {
		return err
	}
	if len(d.cfg.Registries) > 0 {
		d.log.Info("templates may be pulled from", "registries", d.cfg.Registries, "credentials", d.cfg.RegistryAuthFile != "")
	}
	for _, t := range oci.Tools(puller, oci.NewImporter(st, st.StagingDir(), d.cfg.TemplateMaxSize.Bytes())) {
		d.dispatch.MustRegister(t)
	}
	builder := build.NewBuilder(st, d.sandboxes, d.dispatch, puller, d.cfg.TemplateMaxSize.Bytes(), d.log)
	for _, t := range build.Tools(builder) {
		d.dispatch.MustRegister(t)
	}
	d.api.TemplateSourceRoutes(d.dispatch)
	return nil
}
