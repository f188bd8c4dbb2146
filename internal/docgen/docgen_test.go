package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/splitplane/splitplane/ce"
	"github.com/splitplane/splitplane/fe"
)

const repoRoot = "../.."

// The committed configuration reference is what the generator writes now.
func TestConfigReferenceCurrent(t *testing.T) {
	want, err := ConfigReference(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot, "docs/configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("docs/configuration.md is stale: run 'make generate' (go run ./internal/docgen) and commit it")
	}
}

// The committed API reference is what the generator writes now (protoc is
// installed by make gen-deps, which make test runs).
func TestAPIReferenceCurrent(t *testing.T) {
	needProtoc(t)
	want, err := APIReference(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot, "docs/api.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("docs/api.md is stale: run 'make generate' (go run ./internal/docgen) and commit it")
	}
}

func needProtoc(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("needs protoc (Debian's protobuf-compiler; make gen-deps installs it)")
	}
}

// The reference documents exactly the keys the loader accepts: every yaml
// key reachable from ce.Config and fe.Config, as the decoder sees them
// through reflection, and nothing else.
func TestConfigKeysMatchLoader(t *testing.T) {
	x := newTypeIndex(repoRoot)
	for _, c := range []struct {
		root configRoot
		typ  reflect.Type
	}{{configRoots[0], reflect.TypeFor[ce.Config]()}, {configRoots[1], reflect.TypeFor[fe.Config]()}} {
		d, err := configModel(x, c.root)
		if err != nil {
			t.Fatal(err)
		}
		got := d.keyPaths()
		want := yamlPaths(c.typ, "")
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: documented keys\n%s\nbut the loader reads\n%s", c.root.anchor, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(want) < 20 {
			t.Errorf("%s: only %d keys found", c.root.anchor, len(want))
		}
	}
}

// yamlPaths lists the key paths of a configuration type by reflection.
func yamlPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "-" {
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		out = append(out, prefix+key)
		ft, sub := f.Type, prefix+key
		for {
			switch ft.Kind() {
			case reflect.Pointer:
				ft = ft.Elem()
				continue
			case reflect.Slice:
				ft, sub = ft.Elem(), sub+"[]"
				continue
			case reflect.Map:
				ft, sub = ft.Elem(), sub+".KEY"
				continue
			}
			break
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			out = append(out, yamlPaths(ft, sub+".")...)
		}
	}
	return out
}

// fixture writes a package of configuration types into a module-shaped
// temporary tree and returns its root.
func fixture(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestConfigModelRendering(t *testing.T) {
	root := fixture(t, map[string]string{
		"a/a.go": `package a

import (
	"time"

	"github.com/splitplane/splitplane/b"
)

// Config is the fixture's file.
type Config struct {
	// Name, if set, names it.
	Name string ` + "`yaml:\"name\"`" + `
	// Every is how often.
	Every time.Duration ` + "`yaml:\"every\"`" + `
	// Peers are the peers.
	Peers []*Peer ` + "`yaml:\"peers\"`" + `
	// TLS is the TLS.
	TLS *b.TLS ` + "`yaml:\"tls\"`" + `
	// Ports map a port to a name | with a bar.
	Ports map[uint16]string ` + "`yaml:\"ports\"`" + `
	hidden int
	// Skipped is not read.
	Skipped int ` + "`yaml:\"-\"`" + `
}

// Peer is one peer.
type Peer struct {
	Addr string ` + "`yaml:\"addr\"`" + ` // Addr is its address.
	// TLS is the peer's own.
	TLS b.TLS ` + "`yaml:\"tls\"`" + `
	// Kind is a named non-struct type.
	Kind Kind ` + "`yaml:\"kind\"`" + `
}

// Kind is a kind.
type Kind uint8
`,
		"b/b.go": `package b

// TLS is shared.
type TLS struct {
	// Cert is a file.
	Cert string ` + "`yaml:\"cert\"`" + `
}
`,
	})
	d, err := configModel(newTypeIndex(root), configRoot{"x", "The fixture", "fixture", "a", "Config"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	d.render(&b)
	want := "\n<a id=\"x\"></a>\n\n## The fixture (`fixture`)\n\n" +
		"Config is the fixture's file.\n\nGo type: `a.Config`.\n\n" +
		"| key | type | description |\n|---|---|---|\n" +
		"| `name` | string | `name`, if set, names it. |\n" +
		"| `every` | duration | `every` is how often. |\n" +
		"| `peers` | list of [objects](#x-peer) | `peers` are the peers. |\n" +
		"| `tls` | [object](#x-tls) | `tls` is the TLS. |\n" +
		"| `ports` | map of integer to string | `ports` map a port to a name \\| with a bar. |\n" +
		"\n<a id=\"x-peer\"></a>\n\n### `peers[]`\n\nPeer is one peer.\n\nGo type: `a.Peer`.\n\n" +
		"| key | type | description |\n|---|---|---|\n" +
		"| `addr` | string | `addr` is its address. |\n" +
		"| `tls` | [object](#x-tls) | `tls` is the peer's own. |\n" +
		"| `kind` | integer | `kind` is a named non-struct type. |\n" +
		"\n<a id=\"x-tls\"></a>\n\n### `peers[].tls`, `tls`\n\nTLS is shared.\n\nGo type: `b.TLS`.\n\n" +
		"| key | type | description |\n|---|---|---|\n" +
		"| `cert` | string | `cert` is a file. |\n"
	if got := b.String(); got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	paths := d.keyPaths()
	slices.Sort(paths)
	wantPaths := []string{"every", "name", "peers", "peers[].addr", "peers[].kind", "peers[].tls", "peers[].tls.cert", "ports", "tls", "tls.cert"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("key paths %v, want %v", paths, wantPaths)
	}
}

// A configuration field without a doc comment stops the generator, naming
// the field: every key an operator can write is documented.
func TestConfigUndocumentedField(t *testing.T) {
	root := fixture(t, map[string]string{"a/a.go": `package a

// Config is documented, one of its fields is not.
type Config struct {
	// Name is documented.
	Name string ` + "`yaml:\"name\"`" + `
	Secret string ` + "`yaml:\"secret\"`" + `
}
`})
	_, err := configModel(newTypeIndex(root), configRoot{"x", "X", "x", "a", "Config"})
	if !errors.Is(err, ErrUndocumented) || !strings.Contains(err.Error(), `Config.Secret (yaml "secret")`) {
		t.Fatalf("err %v, want ErrUndocumented naming Config.Secret", err)
	}
}

func TestAPIReferenceRendering(t *testing.T) {
	needProtoc(t)
	root := fixture(t, map[string]string{"p/x.proto": `// The fixture API.
syntax = "proto3";

package fx.v1;

// Things does things.
service Things {
  // Get gets one | thing.
  rpc Get(GetRequest) returns (Thing);
  rpc Stream(stream GetRequest) returns (stream Thing);
}

message GetRequest {
  string name = 1; // the name
}

// Thing is a thing.
message Thing {
  // Its kind.
  Kind kind = 1;
  map<string, uint64> counts = 2;
  repeated Thing parts = 3;
  enum Kind {
    KIND_UNSPECIFIED = 0;
    KIND_BIG = 1; // big
  }
}
`})
	set, err := describe(root, []string{"p/x.proto"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	renderProto(&b, set.File[0])
	got := b.String()
	for _, want := range []string{
		"## Package `fx.v1` (`p/x.proto`)\n\nThe fixture API.\n",
		"### Things\n\nThings does things.\n",
		"| `fx.v1.Things/Get` | [GetRequest](#fx-v1-getrequest) | [Thing](#fx-v1-thing) | Get gets one \\| thing. |\n",
		"| `fx.v1.Things/Stream` | stream [GetRequest](#fx-v1-getrequest) | stream [Thing](#fx-v1-thing) |  |\n",
		"| `name` | 1 | string | the name |\n",
		"<a id=\"fx-v1-thing\"></a>\n\n### Thing\n\nThing is a thing.\n",
		"| `kind` | 1 | [Thing.Kind](#fx-v1-thing-kind) | Its kind. |\n",
		"| `counts` | 2 | map&lt;string, uint64&gt; |  |\n",
		"| `parts` | 3 | repeated [Thing](#fx-v1-thing) |  |\n",
		"<a id=\"fx-v1-thing-kind\"></a>\n\n### Thing.Kind\n",
		"| `KIND_BIG` | 1 | big |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "CountsEntry") {
		t.Errorf("a map's entry message is rendered:\n%s", got)
	}
}
