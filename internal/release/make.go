package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MakeOptions configure a release.
type MakeOptions struct {
	Repo      string // git checkout
	Out       string // release directory (emptied first)
	Key       string // ssh private key that signs SHA256SUMS
	CycloneDX string // the cyclonedx-gomod binary
	Version   string // "" = from git describe
	// ImageRootFS, if set, is the Debian root tarball (make image-rootfs)
	// the release's container image is built on; its digest goes into
	// the provenance.
	ImageRootFS string
	Log         io.Writer
}

// git runs a git command in repo and returns its trimmed output.
func git(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...) // #nosec G204 -- fixed git subcommands
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Make builds a release from the commit checked out in opts.Repo: the
// source archive of that commit, binaries built from the unpacked archive
// (so nothing uncommitted can reach them), SBOMs, provenance, SHA256SUMS
// and its signature.
func Make(ctx context.Context, o MakeOptions) error {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			_, _ = fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	commit, err := git(ctx, o.Repo, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return err
	}
	if err := ValidateStamp("v0", commit); err != nil {
		return err
	}
	epochS, err := git(ctx, o.Repo, "log", "-1", "--format=%ct", commit)
	if err != nil {
		return err
	}
	epoch, err := strconv.ParseInt(epochS, 10, 64)
	if err != nil {
		return fmt.Errorf("commit time %q: %w", epochS, err)
	}
	if dirty, _ := git(ctx, o.Repo, "status", "--porcelain", "--untracked-files=no"); dirty != "" {
		logf("note: the checkout has uncommitted changes; they are not in the release (it is built from a clone of %s)", commit)
	}
	if _, err := os.Stat(o.Key); err != nil {
		return fmt.Errorf("signing key: %w", err)
	}

	// The tree the release is built from: a clone checked out at the
	// commit, so nothing uncommitted can reach the binaries, and the
	// SBOM tool sees the real history (tags, commit time).
	work, err := os.MkdirTemp("", "sandhold-release-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	tree := filepath.Join(work, "src")
	if _, err := git(ctx, o.Repo, "clone", "--quiet", "--no-checkout", ".", tree); err != nil {
		return err
	}
	if _, err := git(ctx, tree, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit); err != nil {
		return err
	}

	// The web console, which the binaries embed (console.go).
	consoleLock := ""
	if HasConsole(tree) {
		if consoleLock, err = BuildConsole(ctx, tree, o.Log); err != nil {
			return err
		}
		logf("console  %s/ built offline from its lock file (sha256 %s)", consoleDir, consoleLock)
	}

	// SBOMs first: cyclonedx-gomod names the version of the commit by
	// Go's rules (the vX.Y.Z tag on it, else a pseudo-version after the
	// last tag), and the binaries are stamped with that same version.
	version := ""
	cdxs := map[string]*CycloneDX{}
	for _, arch := range Arches {
		tmp := filepath.Join(work, arch+".cdx.json")
		if err := cycloneDX(ctx, o.CycloneDX, tree, arch, tmp); err != nil {
			return err
		}
		c, err := ReadCycloneDX(tmp)
		if err != nil {
			return err
		}
		if version == "" {
			version = c.MainVersion
		} else if c.MainVersion != version {
			return fmt.Errorf("SBOMs disagree on the version: %s and %s", version, c.MainVersion)
		}
		cdxs[arch] = c
	}
	if o.Version != "" && o.Version != version {
		return fmt.Errorf("the commit's version is %s, not %s (tag the commit %s first)", version, o.Version, o.Version)
	}
	if err := ValidateStamp(version, commit); err != nil {
		return err
	}

	if err := os.RemoveAll(o.Out); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Out, 0o750); err != nil {
		return err
	}
	src := SourceName(version)
	var archive bytes.Buffer
	if err := SourceArchive(ctx, o.Repo, version, commit, &archive); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, src), archive.Bytes(), 0o644); err != nil { // #nosec G306 -- a public release artifact
		return err
	}
	logf("source   %s (%s, %s)", src, commit, time.Unix(epoch, 0).UTC().Format(time.RFC3339))

	toolchain, err := Toolchain(tree)
	if err != nil {
		return err
	}
	prefix := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=<arch>", "go"}
	if toolchain != "" {
		prefix = append([]string{"GOTOOLCHAIN=" + toolchain}, prefix...)
	}
	prov := Provenance{
		Version: version, Commit: commit, SourceDateEpoch: epoch, Source: src,
		BuildCommand: append(prefix, BuildArgs(BuildOptions{Version: version, Commit: commit, Out: "sandhold-linux-<arch>", LeanInit: HasLeanInit(tree)})...),
	}
	if consoleLock != "" {
		prov.ConsoleLock, prov.ConsoleCommands = consoleLock, ConsoleCommands()
	}
	for _, arch := range Arches {
		name := BinaryName(arch)
		bin := filepath.Join(o.Out, name)
		if err := Build(ctx, BuildOptions{SrcDir: tree, Out: bin, Arch: arch, Version: version, Commit: commit}); err != nil {
			return err
		}
		_, _, goVersion, err := BinaryModules(bin)
		if err != nil {
			return err
		}
		prov.GoVersion = goVersion
		prov.Binaries = append(prov.Binaries, name)
		logf("binary   %s", name)

		if err := os.Rename(filepath.Join(work, arch+".cdx.json"), bin+".cdx.json"); err != nil {
			return err
		}
		cdx := cdxs[arch]
		spdx, err := SPDX(SPDXOptions{Binary: bin, FileName: name, Version: version, Commit: commit, Created: time.Unix(epoch, 0), Licenses: cdx.Licenses})
		if err != nil {
			return err
		}
		if err := os.WriteFile(bin+".spdx.json", spdx, 0o644); err != nil { // #nosec G306 -- a public release artifact
			return err
		}
		logf("sbom     %s.cdx.json %s.spdx.json", name, name)
	}
	if o.ImageRootFS != "" {
		if prov.Image, err = releaseImage(ctx, o.Out, o.ImageRootFS, epoch, version, commit); err != nil {
			return fmt.Errorf("container image: %w", err)
		}
		logf("image    %s %s", ImageArchiveName(prov.Image.Arch), prov.Image.Digest)
	}
	pj, err := json.MarshalIndent(prov, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Out, ProvenanceFile), append(pj, '\n'), 0o644); err != nil { // #nosec G306 -- a public release artifact
		return err
	}
	if err := WriteSums(o.Out); err != nil {
		return err
	}
	if err := Sign(ctx, filepath.Join(o.Out, SumsFile), o.Key); err != nil {
		return err
	}
	logf("signed   %s -> %s", SumsFile, SigFile)
	return nil
}

// cycloneDX runs cyclonedx-gomod on the source tree for one arch: the
// modules of the packages linked into cmd/sandhold for linux/arch, with
// licenses detected from the module sources. -noserial and -notimestamp
// keep the document reproducible.
func cycloneDX(ctx context.Context, tool, tree, arch, out string) error {
	if tool == "" {
		return errors.New("no cyclonedx-gomod binary given")
	}
	toolchain, err := Toolchain(tree)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, tool, CycloneDXArgs(out, tree)...) // #nosec G204 -- the pinned tool from .tools, fixed arguments
	cmd.Env = BuildEnv(os.Environ(), arch, toolchain)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cyclonedx-gomod linux/%s: %w\n%s", arch, err, b)
	}
	return nil
}

// CycloneDXArgs is the cyclonedx-gomod command line for the server's
// module graph: the modules of the packages linked into cmd/sandhold
// (GOOS/GOARCH from the environment), with licenses detected from the
// module sources and asserted (not only "evidence").
func CycloneDXArgs(out, tree string) []string {
	return []string{"app", "-json", "-licenses", "-assert-licenses", "-noserial", "-notimestamp", "-main", "cmd/sandhold", "-output", out, tree}
}

// WriteSums writes SHA256SUMS over every file of a release directory.
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != SumsFile && e.Name() != SigFile {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if !sumLine.MatchString(strings.Repeat("0", 64) + "  " + n) {
			return fmt.Errorf("file name %q cannot be listed in %s", n, SumsFile)
		}
		s, err := FileSHA256(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", s, n)
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644) // #nosec G306 -- a public release artifact
}

// SnapshotTree copies the working tree of a checkout (tracked and
// untracked files, ignored ones left out) into a fresh one-commit git
// repository under dir: cyclonedx-gomod needs a plain git repository
// (not a worktree's .git file) and the license gate must see uncommitted
// go.mod changes too.
func SnapshotTree(ctx context.Context, repo, dir string) error {
	list, err := git(ctx, repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	for _, rel := range strings.Split(list, "\x00") {
		if rel == "" {
			continue
		}
		from := filepath.Join(repo, filepath.FromSlash(rel))
		fi, err := os.Lstat(from)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted in the working tree
			}
			return err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		to := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o750); err != nil {
			return err
		}
		b, err := os.ReadFile(from) // #nosec G304 -- a file git lists in the checkout
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil { // #nosec G306 G703 -- the file's own mode, at a name git listed, in a private temp dir
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "--quiet"},
		{"add", "--all"},
		{"-c", "user.name=sandhold", "-c", "user.email=gate@sandhold.invalid", "-c", "commit.gpgsign=false", "commit", "--quiet", "--no-verify", "-m", "snapshot"},
	} {
		if _, err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}

// LicenseCheck runs cyclonedx-gomod on a snapshot of the checkout for
// every release arch and checks the licenses of the linked modules.
// It returns the number of module entries checked.
func LicenseCheck(ctx context.Context, repo, tool string, p LicensePolicy) (int, error) {
	work, err := os.MkdirTemp("", "sandhold-licenses-")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	tree := filepath.Join(work, "src")
	if err := SnapshotTree(ctx, repo, tree); err != nil {
		return 0, err
	}
	var bad []string
	n := 0
	seen := map[string]bool{}
	for _, arch := range Arches {
		out := filepath.Join(work, arch+".cdx.json")
		if err := cycloneDX(ctx, tool, tree, arch, out); err != nil {
			return 0, err
		}
		c, err := ReadCycloneDX(out)
		if err != nil {
			return 0, err
		}
		n += len(c.Modules)
		for _, b := range p.CheckLicenses(c) {
			if !seen[b] {
				seen[b] = true
				bad = append(bad, b)
			}
		}
	}
	if len(bad) > 0 {
		return n, fmt.Errorf("licenses outside the allow list (internal/release/licenses.go):\n  %s", strings.Join(bad, "\n  "))
	}
	return n, nil
}
