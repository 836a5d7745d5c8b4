// Command releasetool makes and verifies sandhold releases and runs the
// license gate; the Makefile's release, verify-release and licenses
// targets call it (go run ./internal/release/releasetool ...).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/sandhold/sandhold/internal/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "releasetool: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: releasetool make|verify|licenses|image [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "make":
		var o release.MakeOptions
		fs.StringVar(&o.Repo, "repo", ".", "git checkout to release (its HEAD)")
		fs.StringVar(&o.Out, "out", "dist", "release directory (emptied first)")
		fs.StringVar(&o.Key, "key", "", "ssh private key that signs SHA256SUMS")
		fs.StringVar(&o.CycloneDX, "cyclonedx", "", "cyclonedx-gomod binary")
		fs.StringVar(&o.Version, "version", "", "version (default: git describe, see CHANGELOG.md)")
		fs.StringVar(&o.ImageRootFS, "image-rootfs", "", "Debian root tarball (make image-rootfs): build the container image into the release")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		o.Log = os.Stdout
		if err := release.Make(ctx, o); err != nil {
			return err
		}
		fmt.Printf("release in %s\n", o.Out)
		return nil
	case "verify":
		var o release.VerifyOptions
		fs.StringVar(&o.Dir, "dir", "dist", "release directory")
		fs.StringVar(&o.PubKey, "pubkey", "", "the release signer's OpenSSH public key (from a trusted channel)")
		fs.StringVar(&o.Repo, "repo", ".", "git checkout holding the release's commit")
		fs.StringVar(&o.Commit, "commit", "", "commit the release must be of (optional)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		o.Log = os.Stdout
		if err := release.Verify(ctx, o); err != nil {
			return fmt.Errorf("release in %s does NOT verify:\n%w", o.Dir, err)
		}
		fmt.Printf("release in %s verifies\n", o.Dir)
		return nil
	case "image":
		var o release.ImageOptions
		epoch := fs.Int64("epoch", 0, "SOURCE_DATE_EPOCH: every time in the image")
		fs.StringVar(&o.RootFS, "rootfs", "", "root file system tarball (mmdebstrap --format=tar)")
		fs.StringVar(&o.Binary, "binary", "bin/sandhold", "static sandhold binary")
		fs.StringVar(&o.Arch, "arch", "amd64", "the binary's architecture")
		fs.StringVar(&o.Version, "version", "dev", "version label")
		fs.StringVar(&o.Commit, "commit", "", "commit label")
		fs.StringVar(&o.Ref, "ref", "ghcr.io/sandhold/sandhold:dev", "repository:tag in the docker-load tarball")
		fs.StringVar(&o.Out, "out", "dist/image", "output directory")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		o.Created = time.Unix(*epoch, 0)
		info, err := release.BuildImage(o)
		if err != nil {
			return err
		}
		fmt.Printf("image %s\n  digest  %s (helm: --set image.digest=%s)\n  id      %s (docker load < %s/%s)\n  layout  %s/%s\n",
			info.Ref, info.Digest, info.Digest, info.ConfigDigest, o.Out, release.ImageTarName, o.Out, release.ImageLayout)
		return nil
	case "licenses":
		tool := fs.String("cyclonedx", "", "cyclonedx-gomod binary")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return licenses(ctx, *tool)
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// licenses checks the licenses of every module linked into the server,
// for each release arch, against the allow list.
func licenses(ctx context.Context, tool string) error {
	n, err := release.LicenseCheck(ctx, ".", tool, release.DefaultLicensePolicy())
	if err != nil {
		return err
	}
	fmt.Printf("licenses: %d module entries (linux/%s) all on the allow list\n", n, strings.Join(release.Arches, ", linux/"))
	return nil
}
