package main

import (
	"context"
	"errors"
)

type serveCmd struct{}

func (serveCmd) Run(context.Context) error { return errors.New("serve: not built yet") }

type keysCmd struct{}

func (keysCmd) Run(context.Context) error { return errors.New("keys: not built yet") }

type auditCmd struct{}

func (auditCmd) Run(context.Context) error { return errors.New("audit: not built yet") }

type doctorCmd struct{}

func (doctorCmd) Run(context.Context) error { return errors.New("doctor: not built yet") }
