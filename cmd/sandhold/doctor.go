package main

import (
	"fmt"
	"strings"

	"github.com/sandhold/sandhold/internal/posture"
)

type doctorCmd struct{}

func (doctorCmd) Run(e *env) error {
	r := posture.Probe()
	if err := r.Write(e.stdout); err != nil {
		return err
	}
	if !r.Ready() {
		return &exitError{code: 1, err: fmt.Errorf("required isolation features missing: %s", strings.Join(r.Missing(), ", "))}
	}
	_, err := fmt.Fprintln(e.stdout, "\nall required isolation layers are available")
	return err
}
