package release

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
)

// File names inside a release directory.
const (
	SumsFile       = "SHA256SUMS"
	SigFile        = "SHA256SUMS.sig"
	ProvenanceFile = "provenance.json"
	// SigNamespace is the ssh-keygen -Y namespace of release signatures:
	// a signature made for another purpose (git commits, files) with the
	// same key does not verify as a release signature.
	SigNamespace = "sandhold-release"
)

// Provenance records what a release was built from and how.
type Provenance struct {
	Version         string   `json:"version"`
	Commit          string   `json:"commit"`
	SourceDateEpoch int64    `json:"source_date_epoch"`
	GoVersion       string   `json:"go_version"`
	Source          string   `json:"source"` // the git archive of Commit
	BuildCommand    []string `json:"build_command"`
	Binaries        []string `json:"binaries"`
	// ConsoleLock is the SHA-256 of web/package-lock.json the embedded
	// web console was installed from (npm ci --offline), and
	// ConsoleCommands how it was built (console.go); empty for a module
	// without a console.
	ConsoleLock     string     `json:"console_lock_sha256,omitempty"`
	ConsoleCommands [][]string `json:"console_build_commands,omitempty"`
	// Image is the container image of the amd64 binary (image.go), when
	// the release was made with a root tarball (make release after make
	// image-rootfs); its OCI archive is ImageArchiveName(Image.Arch).
	Image *ImageInfo `json:"image,omitempty"`
}

// BinaryName is the file name of the binary for one arch.
func BinaryName(arch string) string { return "sandhold-linux-" + arch }

// SourceName is the file name of the source archive of a version.
func SourceName(version string) string { return "sandhold-" + version + "-src.tar.gz" }

// VerifyOptions say what to check a release directory against.
type VerifyOptions struct {
	Dir string
	// PubKey is the operator's public key (OpenSSH format), obtained out
	// of band — never from the release directory itself.
	PubKey string
	// Repo is a git checkout to check the source digest against; Commit
	// (optional) is the commit the verifier expects.
	Repo   string
	Commit string
	Log    io.Writer
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  ([A-Za-z0-9][A-Za-z0-9._+-]*)$`)

// ReadSums parses a SHA256SUMS file (sha256sum's text format, plain
// file names only).
func ReadSums(path string) (map[string]string, error) {
	f, err := os.Open(path) // #nosec G304 -- the release's own sums file
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := sumLine.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("%s line %d: not \"<sha256>  <file name>\"", SumsFile, n)
		}
		if _, dup := sums[m[2]]; dup {
			return nil, fmt.Errorf("%s line %d: %s listed twice", SumsFile, n, m[2])
		}
		sums[m[2]] = m[1]
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("%s lists no file", SumsFile)
	}
	return sums, nil
}

// FileSHA256 is the hex SHA-256 of a file.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path) // #nosec G304 -- a release artifact
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read-only
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Verify checks a release directory: every file is in SHA256SUMS and
// matches it, the signature over SHA256SUMS verifies with the operator's
// key, each binary is a static linux ELF of its arch stamped with the
// release commit, each SBOM lists exactly the modules the binary embeds,
// and the source archive is the git archive of the commit. It returns
// every problem found, not just the first.
func Verify(ctx context.Context, o VerifyOptions) error {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			_, _ = fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// 1. The signature first: nothing else in the directory is trusted
	// until SHA256SUMS is known to come from the key holder.
	if o.PubKey == "" {
		return errors.New("no public key given: the release signature cannot be checked")
	}
	sumsPath := filepath.Join(o.Dir, SumsFile)
	if err := VerifySignature(ctx, sumsPath, filepath.Join(o.Dir, SigFile), o.PubKey); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	logf("ok   signature over %s (key %s)", SumsFile, filepath.Base(o.PubKey))

	// 2. Sums: every file listed, every listed file present and equal.
	sums, err := ReadSums(sumsPath)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if n == SumsFile || n == SigFile {
			continue
		}
		if _, ok := sums[n]; !ok {
			fail("%s is not listed in %s", n, SumsFile)
		}
	}
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		got, err := FileSHA256(filepath.Join(o.Dir, n))
		switch {
		case err != nil:
			fail("%s: %v", n, err)
		case got != sums[n]:
			fail("%s: sha256 %s, %s says %s", n, got, SumsFile, sums[n])
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	logf("ok   %d files match %s", len(names), SumsFile)

	// 3. Provenance (signed through the sums).
	var prov Provenance
	pb, err := os.ReadFile(filepath.Join(o.Dir, ProvenanceFile)) // #nosec G304 -- inside the release dir
	if err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	if err := json.Unmarshal(pb, &prov); err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	if err := ValidateStamp(prov.Version, prov.Commit); err != nil {
		return fmt.Errorf("provenance: %w", err)
	}
	if o.Commit != "" && o.Commit != prov.Commit {
		fail("release is of commit %s, expected %s", prov.Commit, o.Commit)
	}

	// 4. Binaries and their SBOMs.
	if len(prov.Binaries) == 0 {
		fail("provenance lists no binary")
	}
	for _, arch := range Arches {
		found := false
		for _, b := range prov.Binaries {
			found = found || b == BinaryName(arch)
		}
		if !found {
			fail("no %s binary in the release", arch)
		}
	}
	for _, name := range prov.Binaries {
		if _, ok := sums[name]; !ok {
			fail("%s: listed in provenance, missing from %s", name, SumsFile)
			continue
		}
		for _, err := range verifyBinary(ctx, o.Dir, name, prov) {
			fail("%s: %v", name, err)
		}
	}
	if len(errs) == 0 {
		logf("ok   binaries static, stamped %s %s; SBOMs (CycloneDX, SPDX) list exactly their modules", prov.Version, prov.Commit)
	}

	// 5. The container image, when there is one: its digest and binary.
	if prov.Image != nil {
		if err := verifyImage(o.Dir, prov, sums); err != nil {
			fail("image: %v", err)
		} else {
			logf("ok   image %s carries %s", prov.Image.Digest, BinaryName(prov.Image.Arch))
		}
	}

	// 6. Source digest: the archive is what git makes of the commit.
	if err := verifySource(ctx, o, prov, sums); err != nil {
		fail("source: %v", err)
	} else {
		logf("ok   %s is git archive of %s", prov.Source, prov.Commit)
		if prov.ConsoleLock != "" {
			logf("ok   the console was installed from %s's %s/package-lock.json", prov.Commit, consoleDir)
		}
	}
	return errors.Join(errs...)
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func verifyBinary(ctx context.Context, dir, name string, prov Provenance) []error {
	var errs []error
	path := filepath.Join(dir, name)
	arch := strings.TrimPrefix(name, "sandhold-linux-")
	f, err := elf.Open(path)
	if err != nil {
		return []error{fmt.Errorf("not an ELF file: %w", err)}
	}
	if f.Machine != elfMachine[arch] {
		errs = append(errs, fmt.Errorf("ELF machine %v, want %s", f.Machine, arch))
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			errs = append(errs, errors.New("has a dynamic loader (PT_INTERP): not static"))
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		errs = append(errs, fmt.Errorf("links shared libraries %v: not static", libs))
	}
	_ = f.Close()

	b, err := os.ReadFile(path) // #nosec G304 -- inside the release dir
	if err != nil {
		return append(errs, err)
	}
	if !bytes.Contains(b, []byte(prov.Commit)) {
		errs = append(errs, fmt.Errorf("not stamped with commit %s", prov.Commit))
	}

	main, mods, goVersion, err := BinaryModules(path)
	if err != nil {
		return append(errs, err)
	}
	if goVersion != prov.GoVersion {
		errs = append(errs, fmt.Errorf("built with %s, provenance says %s", goVersion, prov.GoVersion))
	}
	// The binary's own answer, where it can run here.
	if arch == runtime.GOARCH && runtime.GOOS == "linux" {
		out, err := exec.CommandContext(ctx, path, "version", "--json").Output() // #nosec G204 -- the release binary, verified against SHA256SUMS above
		if err != nil {
			errs = append(errs, fmt.Errorf("version --json: %w", err))
		} else if e := checkVersionJSON(out, prov, mods); e != nil {
			errs = append(errs, e)
		}
	}

	cdx, err := ReadCycloneDX(filepath.Join(dir, name+".cdx.json"))
	if err != nil {
		errs = append(errs, fmt.Errorf("CycloneDX SBOM: %w", err))
	} else {
		if cdx.Main != main {
			errs = append(errs, fmt.Errorf("CycloneDX SBOM describes %q, binary is %q", cdx.Main, main))
		}
		if d := DiffModules("binary", mods, "CycloneDX SBOM", cdx.Modules); d != "" {
			errs = append(errs, errors.New(d))
		}
	}
	spdxMods, spdxSum, err := SPDXModules(filepath.Join(dir, name+".spdx.json"))
	if err != nil {
		errs = append(errs, fmt.Errorf("SPDX SBOM: %w", err))
	} else {
		if d := DiffModules("binary", mods, "SPDX SBOM", spdxMods); d != "" {
			errs = append(errs, errors.New(d))
		}
		if sum := sha256.Sum256(b); spdxSum != hex.EncodeToString(sum[:]) {
			errs = append(errs, errors.New("SPDX SBOM records another binary's SHA-256"))
		}
	}
	return errs
}

func checkVersionJSON(out []byte, prov Provenance, mods []Module) error {
	var v struct {
		Version   string `json:"version"`
		Commit    string `json:"commit"`
		GoVersion string `json:"go_version"`
		Modules   []struct {
			Path    string `json:"path"`
			Version string `json:"version"`
			Replace *struct {
				Path    string `json:"path"`
				Version string `json:"version"`
			} `json:"replace"`
		} `json:"modules"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return fmt.Errorf("version --json: %w", err)
	}
	if v.Version != prov.Version || v.Commit != prov.Commit || v.GoVersion != prov.GoVersion {
		return fmt.Errorf("version --json says %s %s %s, provenance %s %s %s",
			v.Version, v.Commit, v.GoVersion, prov.Version, prov.Commit, prov.GoVersion)
	}
	var got []Module
	for _, m := range v.Modules {
		if m.Replace != nil {
			got = append(got, Module{Path: m.Replace.Path, Version: m.Replace.Version})
		} else {
			got = append(got, Module{Path: m.Path, Version: m.Version})
		}
	}
	if d := DiffModules("build info", mods, "version --json", got); d != "" {
		return errors.New(d)
	}
	return nil
}

// verifySource regenerates the source archive from the commit in a git
// checkout and compares digests: the release's source is exactly that
// commit's tree.
func verifySource(ctx context.Context, o VerifyOptions, prov Provenance, sums map[string]string) error {
	if prov.Source != SourceName(prov.Version) {
		return fmt.Errorf("provenance names source %q, want %q", prov.Source, SourceName(prov.Version))
	}
	want, ok := sums[prov.Source]
	if !ok {
		return fmt.Errorf("%s not in %s", prov.Source, SumsFile)
	}
	if o.Repo == "" {
		return errors.New("no git checkout given to check the source digest against")
	}
	var buf bytes.Buffer
	if err := SourceArchive(ctx, o.Repo, prov.Version, prov.Commit, &buf); err != nil {
		return err
	}
	sum := sha256.Sum256(buf.Bytes())
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("git archive of %s has sha256 %s, the release's %s is %s", prov.Commit, got, prov.Source, want)
	}
	if prov.ConsoleLock != "" {
		// #nosec G204 -- the commit passed ValidateStamp (provenance), a fixed path
		lock, err := exec.CommandContext(ctx, "git", "-C", o.Repo, "show", prov.Commit+":"+consoleDir+"/package-lock.json").Output()
		if err != nil {
			return fmt.Errorf("console lock of %s: %w", prov.Commit, err)
		}
		ls := sha256.Sum256(lock)
		if got := hex.EncodeToString(ls[:]); got != prov.ConsoleLock {
			return fmt.Errorf("provenance says the console was installed from a lock file with sha256 %s; %s's is %s", prov.ConsoleLock, prov.Commit, got)
		}
	}
	return nil
}

// SourceArchive writes the gzip'd git archive of a commit. git's
// built-in gzip writes no timestamp or name, so the bytes depend on the
// tree and the git version only.
func SourceArchive(ctx context.Context, repo, version, commit string, w io.Writer) error {
	if err := ValidateStamp(version, commit); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar.gz", "--prefix=sandhold-"+version+"/", commit) // #nosec G204 -- version and commit validated by ValidateStamp
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", commit, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// VerifySignature checks an ssh-keygen -Y signature over a file with a
// public key, offline.
func VerifySignature(ctx context.Context, file, sig, pubKey string) error {
	key, err := os.ReadFile(pubKey) // #nosec G304 -- the operator's public key
	if err != nil {
		return err
	}
	fields := strings.Fields(string(key))
	if len(fields) < 2 {
		return fmt.Errorf("%s: not an OpenSSH public key", filepath.Base(pubKey))
	}
	dir, err := os.MkdirTemp("", "sandhold-verify-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	allowed := filepath.Join(dir, "allowed_signers")
	line := fmt.Sprintf("%s namespaces=%q %s %s\n", SigNamespace, SigNamespace, fields[0], fields[1])
	if err := os.WriteFile(allowed, []byte(line), 0o600); err != nil { // #nosec G703 -- a fixed name in our own temp dir
		return err
	}
	in, err := os.Open(file) // #nosec G304 -- the release's sums file
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()                                                                                               // read-only
	cmd := exec.CommandContext(ctx, "ssh-keygen", "-Y", "verify", "-f", allowed, "-I", SigNamespace, "-n", SigNamespace, "-s", sig) // #nosec G204 -- fixed program, paths only
	cmd.Stdin = in
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ssh-keygen -Y verify: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Sign signs a file with an ssh private key (ssh-keygen -Y sign), writing
// file.sig.
func Sign(ctx context.Context, file, privKey string) error {
	cmd := exec.CommandContext(ctx, "ssh-keygen", "-q", "-Y", "sign", "-f", privKey, "-n", SigNamespace, file) // #nosec G204 -- fixed program, paths only
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ssh-keygen -Y sign: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
