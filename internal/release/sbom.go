package release

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Module is one module compiled into a binary, as path@version (after
// any replace directive: the code that was actually built).
type Module struct {
	Path    string
	Version string
}

func (m Module) String() string { return m.Path + "@" + m.Version }

// BinaryModules reads the module list the Go linker embedded in a binary
// (any GOARCH: the file is parsed, not run).
func BinaryModules(path string) (main string, mods []Module, goVersion string, err error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", nil, "", fmt.Errorf("read build info: %w", err)
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		mods = append(mods, Module{Path: d.Path, Version: d.Version})
	}
	sortModules(mods)
	return bi.Main.Path, mods, bi.GoVersion, nil
}

func sortModules(mods []Module) {
	sort.Slice(mods, func(i, j int) bool { return mods[i].String() < mods[j].String() })
}

// cdxDoc is the part of a CycloneDX JSON document this package reads.
type cdxDoc struct {
	BOMFormat   string                           `json:"bomFormat"`
	SpecVersion string                           `json:"specVersion"`
	Metadata    struct{ Component cdxComponent } `json:"metadata"`
	Components  []cdxComponent                   `json:"components"`
}

type cdxComponent struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	PURL     string `json:"purl"`
	Licenses []struct {
		License *struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"license"`
		Expression string `json:"expression"`
	} `json:"licenses"`
	Components []cdxComponent `json:"components"`
}

// CycloneDX is a parsed CycloneDX SBOM: its module components.
type CycloneDX struct {
	Main        string
	MainVersion string
	Modules     []Module
	// Licenses maps path@version to the SPDX license ids or expressions
	// the SBOM records for it (empty: none detected).
	Licenses map[string][]string
}

// ReadCycloneDX parses a CycloneDX JSON SBOM of a Go module graph.
func ReadCycloneDX(path string) (*CycloneDX, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- an SBOM the operator names
	if err != nil {
		return nil, err
	}
	var d cdxDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("parse CycloneDX: %w", err)
	}
	if d.BOMFormat != "CycloneDX" {
		return nil, fmt.Errorf("not a CycloneDX document (bomFormat %q)", d.BOMFormat)
	}
	c := &CycloneDX{Main: d.Metadata.Component.Name, MainVersion: d.Metadata.Component.Version, Licenses: map[string][]string{}}
	var walk func([]cdxComponent)
	walk = func(cs []cdxComponent) {
		for _, comp := range cs {
			if strings.HasPrefix(comp.PURL, "pkg:golang/") && comp.Type == "library" {
				m := Module{Path: comp.Name, Version: comp.Version}
				c.Modules = append(c.Modules, m)
				var ls []string
				for _, l := range comp.Licenses {
					switch {
					case l.Expression != "":
						ls = append(ls, l.Expression)
					case l.License != nil && l.License.ID != "":
						ls = append(ls, l.License.ID)
					case l.License != nil && l.License.Name != "":
						ls = append(ls, l.License.Name)
					}
				}
				c.Licenses[m.String()] = ls
			}
			walk(comp.Components)
		}
	}
	walk(d.Components)
	sortModules(c.Modules)
	return c, nil
}

// spdxDoc is an SPDX 2.3 JSON document.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	PackageFileName  string            `json:"packageFileName,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// SPDXOptions describe the binary an SPDX document is made for.
type SPDXOptions struct {
	Binary   string    // path of the binary
	FileName string    // its name in the release
	Version  string    // release version
	Commit   string    // release commit
	Created  time.Time // SOURCE_DATE_EPOCH, so the document is reproducible
	// Licenses (optional) maps path@version to SPDX ids, from the
	// CycloneDX SBOM's license detection.
	Licenses map[string][]string
}

// SPDX writes an SPDX 2.3 JSON SBOM of a binary: the binary itself (with
// its SHA-256) and every module its build information lists.
func SPDX(o SPDXOptions) ([]byte, error) {
	main, mods, goVersion, err := BinaryModules(o.Binary)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(o.Binary) // #nosec G304 -- the release binary just built
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	doc := spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              o.FileName,
		DocumentNamespace: fmt.Sprintf("https://%s/spdx/%s-%s-%s", main, o.FileName, o.Version, o.Commit),
		CreationInfo: spdxCreation{
			Created:  o.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: sandhold-releasetool", "Organization: sandhold"},
		},
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		Name:             main,
		SPDXID:           "SPDXRef-Binary",
		VersionInfo:      o.Version,
		PackageFileName:  o.FileName,
		DownloadLocation: "NOASSERTION",
		Checksums:        []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum[:])}},
		LicenseConcluded: "NOASSERTION",
		LicenseDeclared:  "NOASSERTION",
		CopyrightText:    "NOASSERTION",
		ExternalRefs: []spdxExternalRef{{
			ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: "pkg:golang/" + main + "@" + o.Version,
		}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Binary"})
	all := append([]Module{{Path: "stdlib", Version: goVersion}}, mods...)
	for i, m := range all {
		id := fmt.Sprintf("SPDXRef-Module-%d-%s", i, strings.Trim(spdxIDUnsafe.ReplaceAllString(m.Path, "-"), "-"))
		lic := "NOASSERTION"
		if ls := o.Licenses[m.String()]; len(ls) > 0 {
			lic = strings.Join(ls, " AND ")
		}
		p := spdxPackage{
			Name: m.Path, SPDXID: id, VersionInfo: m.Version,
			DownloadLocation: "NOASSERTION",
			LicenseConcluded: "NOASSERTION", LicenseDeclared: lic, CopyrightText: "NOASSERTION",
		}
		if m.Path != "stdlib" {
			p.ExternalRefs = []spdxExternalRef{{
				ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
				ReferenceLocator: "pkg:golang/" + m.Path + "@" + m.Version,
			}}
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-Binary", "DEPENDS_ON", id})
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// SPDXModules reads the Go modules an SPDX document lists (the standard
// library entry left out) and the SHA-256 it records for the binary.
func SPDXModules(path string) (mods []Module, binarySHA256 string, err error) {
	b, err := os.ReadFile(path) // #nosec G304 -- an SBOM the operator names
	if err != nil {
		return nil, "", err
	}
	var d spdxDoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, "", fmt.Errorf("parse SPDX: %w", err)
	}
	if d.SPDXVersion != "SPDX-2.3" {
		return nil, "", fmt.Errorf("not an SPDX 2.3 document (%q)", d.SPDXVersion)
	}
	for _, p := range d.Packages {
		switch {
		case p.SPDXID == "SPDXRef-Binary":
			for _, c := range p.Checksums {
				if c.Algorithm == "SHA256" {
					binarySHA256 = c.ChecksumValue
				}
			}
		case p.Name == "stdlib":
		default:
			mods = append(mods, Module{Path: p.Name, Version: p.VersionInfo})
		}
	}
	sortModules(mods)
	return mods, binarySHA256, nil
}

// DiffModules describes how two module lists differ ("" when equal).
func DiffModules(wantName string, want []Module, gotName string, got []Module) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, m := range want {
		w[m.String()] = true
	}
	for _, m := range got {
		g[m.String()] = true
	}
	var missing, extra []string
	for k := range w {
		if !g[k] {
			missing = append(missing, k)
		}
	}
	for k := range g {
		if !w[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("in %s but not in %s: %s", wantName, gotName, strings.Join(missing, ", ")))
	}
	if len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("in %s but not in %s: %s", gotName, wantName, strings.Join(extra, ", ")))
	}
	return strings.Join(parts, "; ")
}
