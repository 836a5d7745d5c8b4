package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/template"
)

// Caps of a pull, with their reasons.
const (
	// maxAuthFile bounds the credentials file read.
	maxAuthFile = 1 << 20
	// pullTimeout bounds one pull (a few GB over a slow link).
	pullTimeout = 30 * time.Minute
)

// Puller pulls images from the registries an operator allows.
type Puller struct {
	store *template.Store
	// registries are the allowed registry hosts (as name.Registry
	// writes them: "index.docker.io" for docker.io).
	registries []string
	keychain   authn.Keychain
	transport  http.RoundTripper
}

// PullerOptions configure a Puller.
type PullerOptions struct {
	// Registries are SANDBOX_REGISTRIES: hosts ("registry.example.com",
	// "localhost:5000", "docker.io"); none refuses every pull.
	Registries []string
	// AuthFile is SANDBOX_REGISTRY_AUTH_FILE: a Docker config.json whose
	// auths the server uses ("" for anonymous pulls).
	AuthFile string
	// Transport, if set, carries the requests (tests).
	Transport http.RoundTripper
}

// NewPuller makes a puller for the store.
func NewPuller(st *template.Store, o PullerOptions) (*Puller, error) {
	p := &Puller{store: st, transport: o.Transport, keychain: authn.NewMultiKeychain()}
	for _, r := range o.Registries {
		reg, err := name.NewRegistry(strings.TrimSpace(r))
		if err != nil {
			return nil, fmt.Errorf("SANDBOX_REGISTRIES: %q is not a registry host: %w", r, err)
		}
		p.registries = append(p.registries, reg.RegistryStr())
	}
	if o.AuthFile != "" {
		kc, err := readAuthFile(o.AuthFile)
		if err != nil {
			return nil, fmt.Errorf("SANDBOX_REGISTRY_AUTH_FILE: %w", err)
		}
		p.keychain = kc
	}
	if p.transport == nil {
		p.transport = remote.DefaultTransport
	}
	return p, nil
}

// PullArgs is template.pull's arguments.
type PullArgs struct {
	Image     string    `json:"image" required:"true" maxLength:"512" doc:"the image to pull: registry/repository[:tag][@sha256:…], from a registry the server allows (SANDBOX_REGISTRIES)"`
	Name      string    `json:"name" required:"true" maxLength:"128" doc:"the template's name"`
	Tag       string    `json:"tag,omitempty" maxLength:"128" doc:"the template's tag (default latest)"`
	Overrides Overrides `json:"overrides,omitzero" doc:"default limits of the template's sandboxes, and whether it carries a browser"`
	// Progress, if set, receives the pull's steps (a streaming caller).
	Progress template.Progress `json:"-"`
}

// Pull fetches an image (by digest: a tag is resolved once, and the
// template records the digest it got) and stores it as a.Name:a.Tag for c.
func (p *Puller) Pull(ctx context.Context, c template.Caller, a PullArgs) (template.Template, error) {
	if err := checkName(a.Name, a.Tag); err != nil {
		return template.Template{}, err
	}
	return p.pull(ctx, nil, c, a)
}

// PullInto pulls image as an unnamed template held by txn (a build's
// FROM).
func (p *Puller) PullInto(ctx context.Context, txn *template.Txn, c template.Caller, image string, progress template.Progress) (template.Template, error) {
	return p.pull(ctx, txn, c, PullArgs{Image: image, Progress: progress})
}

func (p *Puller) pull(ctx context.Context, txn *template.Txn, c template.Caller, a PullArgs) (template.Template, error) {
	ref, err := name.ParseReference(a.Image, name.WithDefaultRegistry(name.DefaultRegistry))
	if err != nil {
		return template.Template{}, fault.InvalidField("image", fmt.Sprintf("image %q is not an image reference", a.Image))
	}
	reg := ref.Context().RegistryStr()
	if !slices.Contains(p.registries, reg) {
		if len(p.registries) == 0 {
			return template.Template{}, fault.New(fault.Forbidden, "this server pulls from no registry: an admin lists the allowed ones in SANDBOX_REGISTRIES")
		}
		return template.Template{}, fault.New(fault.Forbidden, fmt.Sprintf("registry %s is not in SANDBOX_REGISTRIES (allowed: %s)", reg, strings.Join(p.registries, ", ")))
	}
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(p.keychain), remote.WithTransport(p.transport),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}), remote.WithUserAgent("sandhold")}
	a.Progress.Send(template.Event{Step: "resolve", Message: ref.Context().String()})
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return template.Template{}, registryFault(err, "resolve the image")
	}
	img, err := desc.Image()
	if err != nil {
		return template.Template{}, registryFault(err, "read the image's manifest")
	}
	d, err := img.Digest()
	if err != nil {
		return template.Template{}, registryFault(err, "read the image's digest")
	}
	src := template.Source{Kind: "registry", Image: ref.Context().String() + "@" + d.String(), ImageDigest: d.String()}
	tag := ""
	if a.Name != "" {
		tag = tagOr(a.Tag)
	}
	return store(ctx, p.store, txn, c, img, src, a.Name, tag, a.Overrides, a.Progress)
}

// registryFault is a registry's refusal or failure for a client: what was
// asked and what the registry said, without credentials (the library's
// errors carry none).
func registryFault(err error, what string) error {
	if fault.KindOf(err) != fault.Internal {
		return err
	}
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fault.Wrap(fault.Forbidden, err, "the registry refused the server's credentials ("+what+")")
	}
	return fault.Wrap(fault.Unavailable, err, fmt.Sprintf("the registry could not %s: %s", what, clip(err.Error())))
}

// clip keeps a registry's message short.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func tagOr(tag string) string {
	if tag == "" {
		return template.DefaultTag
	}
	return tag
}

// checkName validates the template's name and tag before any work.
func checkName(n, tag string) error {
	_, err := template.ParseRef("name", n+":"+tagOr(tag))
	return err
}

// authFile is the part of a Docker config.json read for credentials.
type authFile struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
		RegistryToken string `json:"registrytoken"`
	} `json:"auths"`
}

// fileKeychain answers the library's requests for credentials from the
// server's file.
type fileKeychain map[string]authn.AuthConfig

func (k fileKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if c, ok := k[r.RegistryStr()]; ok {
		return authn.FromConfig(c), nil
	}
	return authn.Anonymous, nil
}

func readAuthFile(p string) (authn.Keychain, error) {
	f, err := os.Open(p) //nolint:gosec // G304: the operator's configured file
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var af authFile
	if err := json.NewDecoder(io.LimitReader(f, maxAuthFile)).Decode(&af); err != nil {
		return nil, fmt.Errorf("read credentials: not a Docker config.json")
	}
	kc := fileKeychain{}
	for host, a := range af.Auths {
		host = strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		reg, err := name.NewRegistry(host)
		if err != nil {
			return nil, fmt.Errorf("credentials for %q: not a registry host", host)
		}
		c := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("credentials for %s: auth is not base64", reg.RegistryStr())
			}
			c.Username, c.Password, _ = strings.Cut(string(raw), ":")
		}
		kc[reg.RegistryStr()] = c
	}
	return kc, nil
}
