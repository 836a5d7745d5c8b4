package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sandhold/sandhold/internal/client"
	"github.com/sandhold/sandhold/internal/config"
)

type clientCpCmd struct {
	Src       string `arg:"" name:"src" help:"./local/file or SB:/path/in/sandbox (:/path for the default sandbox)."`
	Dst       string `arg:"" name:"dst" help:"SB:/path/in/sandbox (a directory with a trailing /; :/path for the default sandbox) or ./local/path."`
	LimitRate string `name:"limit-rate" help:"Cap the transfer rate, e.g. 20MiB (per second)."`
	Quiet     bool   `short:"q" help:"No progress report."`
}

// splitRemote reads "SB:PATH", or ":PATH" for the default sandbox. A
// local path that holds a colon can be written ./a:b (anything with a
// slash before the colon is local).
func splitRemote(s string) (sb, p string, ok bool) {
	i := strings.IndexByte(s, ':')
	if i < 0 || strings.ContainsAny(s[:i], `/\`) {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func (cp *clientCpCmd) Run(ctx context.Context, e *env) error {
	srcSB, srcPath, srcRemote := splitRemote(cp.Src)
	dstSB, dstPath, dstRemote := splitRemote(cp.Dst)
	if srcRemote == dstRemote {
		return &exitError{code: 2, err: errors.New("one side of cp must be SB:PATH and the other a local path (sandhold cp ./f SB:/workspace/ or sandhold cp SB:/workspace/f ./)")}
	}
	o := client.CopyOptions{Log: e.stderr}
	if !cp.Quiet {
		o.Progress, o.TTY = e.stdout, isTTY(e.stdout)
	}
	if cp.LimitRate != "" {
		sz, err := config.ParseSize(cp.LimitRate)
		if err != nil || sz.Bytes() <= 0 {
			return &exitError{code: exitUsage, err: fmt.Errorf("--limit-rate: %q is not a size like 20MiB", cp.LimitRate)}
		}
		o.LimitRate = sz.Bytes()
	}
	c, cfg, err := connect()
	if err != nil {
		return err
	}
	if dstRemote {
		dstSB, err = sandboxOf(ctx, c, dstSB, cfg)
	} else {
		srcSB, err = sandboxOf(ctx, c, srcSB, cfg)
	}
	if err != nil {
		return err
	}
	var res client.CopyResult
	if dstRemote {
		res, err = c.Upload(ctx, dstSB, cp.Src, dstPath, o)
	} else {
		res, err = c.Download(ctx, srcSB, srcPath, cp.Dst, o)
	}
	if err != nil {
		if ctx.Err() != nil {
			if dstRemote {
				return &exitError{code: 130, err: errors.New("interrupted: run the same command again to resume (the bytes sent so far wait in the sandbox's /workspace/.artifacts/.uploads, counted against its disk quota, until then)")}
			}
			return &exitError{code: 130, err: errors.New("interrupted: run the same command again to resume")}
		}
		return err
	}
	where := client.Escape(res.Path)
	if dstRemote {
		where = client.Escape(dstSB) + ":" + where
	}
	_, err = fmt.Fprintf(e.stdout, "copied %d bytes to %s, sha256 %s (checked)\n", res.Bytes, where, res.SHA256)
	return err
}
