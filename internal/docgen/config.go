package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// module is the import path of the repository's module.
const module = "github.com/splitplane/splitplane"

// ErrUndocumented is returned when a configuration field has no doc
// comment: every key an operator can write is documented.
var ErrUndocumented = errors.New("undocumented configuration field")

// configRoot is the top-level type of a daemon's configuration file.
type configRoot struct {
	anchor  string // prefix of the anchors of its sections
	title   string
	command string
	pkg     string // directory, relative to the module root
	typ     string
}

var configRoots = [...]configRoot{
	{"ce", "The control element", "splitplane ce --config FILE [--check]", "ce", "Config"},
	{"fe", "The forwarding element", "splitplane fe --config FILE [--check]", "fe", "Config"},
}

// configSection is one struct type of a configuration file: the keys it
// holds and every path at which it appears.
type configSection struct {
	anchor string
	goType string   // package.Type, for the reader who opens the source
	paths  []string // "" for the file's top level, "neighbors[]", "tls"...
	doc    string
	keys   []configKey
}

// configKey is one YAML key of a section.
type configKey struct {
	name string
	typ  string // as the reader writes it: string, integer, duration, list of ...
	doc  string
	ref  *configSection // the section of an object-valued key, or nil
	// refType and refPath are the struct type of ref and what comes
	// between the key and its keys ("[].", ".").
	refType *typeInfo
	refPath string
}

// configDoc is the model of one daemon's configuration file.
type configDoc struct {
	root     configRoot
	sections []*configSection // in order of first appearance, the root first
}

// typeInfo is a named type declared in a parsed package.
type typeInfo struct {
	pkg     string // import path
	name    string
	doc     string
	expr    ast.Expr
	imports map[string]string // the declaring file's imports: name -> path
}

// typeIndex parses packages of the module on demand and finds their types.
type typeIndex struct {
	root  string
	fset  *token.FileSet
	types map[string]map[string]*typeInfo // import path -> type name -> info
}

func newTypeIndex(root string) *typeIndex {
	return &typeIndex{root: root, fset: token.NewFileSet(), types: map[string]map[string]*typeInfo{}}
}

// lookup returns the type name declared in the package with import path pkg;
// only the module's own packages are parsed.
func (x *typeIndex) lookup(pkg, name string) (*typeInfo, error) {
	if _, ok := x.types[pkg]; !ok {
		if err := x.parse(pkg); err != nil {
			return nil, err
		}
	}
	t, ok := x.types[pkg][name]
	if !ok {
		return nil, fmt.Errorf("type %s.%s not found", pkg, name)
	}
	return t, nil
}

func (x *typeIndex) parse(pkg string) error {
	rel, ok := strings.CutPrefix(pkg, module)
	if !ok {
		return fmt.Errorf("package %s: not in module %s", pkg, module)
	}
	dir := filepath.Join(x.root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return fmt.Errorf("package %s: %w", pkg, err)
	}
	types := map[string]*typeInfo{}
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(x.fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return err
		}
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			imports[local] = path
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				types[ts.Name.Name] = &typeInfo{pkg: pkg, name: ts.Name.Name, doc: text(doc), expr: ts.Type, imports: imports}
			}
		}
	}
	x.types[pkg] = types
	return nil
}

// text is a comment group as one line per paragraph, paragraphs separated
// by blank lines.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	var paras []string
	for p := range strings.SplitSeq(strings.TrimSpace(g.Text()), "\n\n") {
		paras = append(paras, strings.Join(strings.Fields(p), " "))
	}
	return strings.Join(paras, "\n\n")
}

// configModel builds the model of one daemon's configuration file.
func configModel(x *typeIndex, r configRoot) (*configDoc, error) {
	t, err := x.lookup(module+"/"+r.pkg, r.typ)
	if err != nil {
		return nil, err
	}
	d := &configDoc{root: r}
	byType := map[*typeInfo]*configSection{}
	var walk func(t *typeInfo, path string) (*configSection, error)
	walk = func(t *typeInfo, path string) (*configSection, error) {
		s, seen := byType[t]
		if seen {
			// A type used at several paths (tls and api_tls) has one
			// section; its keys, and its own object keys, are at each path.
			s.paths = append(s.paths, path)
			for _, k := range s.keys {
				if k.ref != nil {
					if _, err := walk(k.refType, path+k.name+k.refPath); err != nil {
						return nil, err
					}
				}
			}
			return s, nil
		}
		st, ok := t.expr.(*ast.StructType)
		if !ok {
			return nil, fmt.Errorf("%s.%s: not a struct", t.pkg, t.name)
		}
		s = &configSection{
			anchor: r.anchor + "-" + strings.ToLower(t.name),
			goType: t.pkg[strings.LastIndex(t.pkg, "/")+1:] + "." + t.name,
			paths:  []string{path},
			doc:    t.doc,
		}
		if path == "" {
			s.anchor = r.anchor
		}
		byType[t] = s
		d.sections = append(d.sections, s)
		for _, f := range st.Fields.List {
			if f.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(f.Tag.Value)
			key, _, _ := strings.Cut(reflect.StructTag(tag).Get("yaml"), ",")
			if key == "-" || len(f.Names) == 0 {
				continue
			}
			if len(f.Names) != 1 {
				return nil, fmt.Errorf("%s.%s: one field per line, so each has its own doc comment", t.pkg, t.name)
			}
			if key == "" {
				key = strings.ToLower(f.Names[0].Name)
			}
			doc := text(f.Doc)
			if doc == "" {
				doc = text(f.Comment)
			}
			if doc == "" {
				return nil, fmt.Errorf("%w: %s.%s.%s (yaml %q)", ErrUndocumented, t.pkg, t.name, f.Names[0].Name, key)
			}
			// Go's convention starts the comment with the field's name;
			// the reader of a YAML file knows the key.
			for _, sep := range []string{" ", ", "} {
				if rest, ok := strings.CutPrefix(doc, f.Names[0].Name+sep); ok {
					doc = "`" + key + "`" + sep + rest
					break
				}
			}
			k := configKey{name: key, doc: doc}
			var sub string
			typ, elem, err := x.describe(t, f.Type, &sub)
			if err != nil {
				return nil, fmt.Errorf("%s.%s.%s: %w", t.pkg, t.name, f.Names[0].Name, err)
			}
			k.typ = typ
			if elem != nil {
				k.refType, k.refPath = elem, sub
				if k.ref, err = walk(elem, path+key+sub); err != nil {
					return nil, err
				}
			}
			s.keys = append(s.keys, k)
		}
		return s, nil
	}
	if _, err := walk(t, ""); err != nil {
		return nil, err
	}
	return d, nil
}

// describe names a field's type as a YAML writer sees it and returns the
// struct type its values are (or hold), if any; it appends "[]" to *path
// for every list level, so nested keys read neighbors[].address.
func (x *typeIndex) describe(owner *typeInfo, e ast.Expr, path *string) (string, *typeInfo, error) {
	switch e := e.(type) {
	case *ast.StarExpr:
		return x.describe(owner, e.X, path)
	case *ast.ArrayType:
		if e.Len != nil {
			return "", nil, errors.New("arrays are not supported; use a slice")
		}
		*path += "[]"
		s, t, err := x.describe(owner, e.Elt, path)
		return "list of " + plural(s), t, err
	case *ast.MapType:
		k, _, err := x.describe(owner, e.Key, path)
		if err != nil {
			return "", nil, err
		}
		*path += ".KEY"
		v, t, err := x.describe(owner, e.Value, path)
		return "map of " + k + " to " + v, t, err
	case *ast.SelectorExpr:
		pkgName, ok := e.X.(*ast.Ident)
		if !ok {
			return "", nil, fmt.Errorf("type %T not supported", e.X)
		}
		pkg := owner.imports[pkgName.Name]
		if pkg == "time" && e.Sel.Name == "Duration" {
			return "duration", nil, nil
		}
		if !strings.HasPrefix(pkg, module) {
			return "", nil, fmt.Errorf("type %s.%s not supported in a configuration", pkg, e.Sel.Name)
		}
		t, err := x.lookup(pkg, e.Sel.Name)
		if err != nil {
			return "", nil, err
		}
		return x.named(t, path)
	case *ast.Ident:
		switch e.Name {
		case "string":
			return "string", nil, nil
		case "bool":
			return "bool", nil, nil
		case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
			return "integer", nil, nil
		case "float32", "float64":
			return "number", nil, nil
		}
		t, err := x.lookup(owner.pkg, e.Name)
		if err != nil {
			return "", nil, err
		}
		return x.named(t, path)
	}
	return "", nil, fmt.Errorf("type %T not supported", e)
}

// named describes a named type of the module: a struct is an object of its
// own section, anything else is described by its underlying type.
func (x *typeIndex) named(t *typeInfo, path *string) (string, *typeInfo, error) {
	if _, ok := t.expr.(*ast.StructType); ok {
		*path += "."
		return objectWord, t, nil
	}
	return x.describe(t, t.expr, path)
}

// objectWord stands for an object type in a type's description until it is
// rendered as a link to the object's section.
const objectWord = "OBJECT"

func plural(s string) string {
	switch {
	case s == "":
		return s
	case strings.HasPrefix(s, "list of ") || strings.HasPrefix(s, "map of "):
		return s
	case strings.HasSuffix(s, "s"):
		return s + "es"
	}
	return s + "s"
}

// ConfigReference renders docs/configuration.md.
func ConfigReference(root string) ([]byte, error) {
	x := newTypeIndex(root)
	var b bytes.Buffer
	b.WriteString(configIntro)
	for _, r := range configRoots {
		d, err := configModel(x, r)
		if err != nil {
			return nil, err
		}
		d.render(&b)
	}
	return b.Bytes(), nil
}

const configIntro = `# Configuration reference

<!-- Generated by ` + "`go run ./internal/docgen`" + ` (make generate) from the configuration types in
ce/config.go, fe/config.go and the types they use, and their doc comments. Do not edit: change the
comments and regenerate. -->

Each daemon reads one YAML file: ` + "`splitplane ce --config ce.yaml`" + `, ` + "`splitplane fe --config fe.yaml`" + `.
` + "`--check`" + ` validates the file and exits (0 and "config ok", or 1 and the error). The file is read
strictly: a key that does not exist (a typo, a key in the wrong place, the wrong case), a key given
twice, a value of the wrong type, a second YAML document and an empty file are errors that name the
key or the line; every value is then validated, and its error names the key and the value. Keys left
out take the defaults given below. The CE reads its file again on SIGHUP and applies what changed
(static routes, BGP neighbours, control cores) without touching the rest; settings only a restart can
change are logged and kept, and an invalid file changes nothing.

Complete, commented examples are in ` + "`deploy/examples/`" + `.

Value types:

| type | how to write it |
|---|---|
| string | ` + "`name: edge-1`" + `, quoted where YAML would read something else (` + "`api_listen: \"off\"`" + `) |
| integer | ` + "`asn: 64500`" + `; hexadecimal too (` + "`0x88cc`" + `) |
| bool | ` + "`true`" + ` or ` + "`false`" + ` |
| duration | a number with a unit: ` + "`300ms`" + `, ` + "`1s`" + `, ` + "`1m30s`" + ` (a bare number is an error) |
| list | ` + "`[a, b]`" + ` or one ` + "`- item`" + ` per line |
| object | a mapping, in block or flow style (` + "`{cert: a.crt, key: a.key, ca: ca.crt}`" + `) |
`

func (d *configDoc) render(b *bytes.Buffer) {
	root := d.sections[0]
	fmt.Fprintf(b, "\n<a id=%q></a>\n\n## %s (`%s`)\n\n", root.anchor, d.root.title, d.root.command)
	d.renderSection(b, root)
	for _, s := range d.sections[1:] {
		var paths []string
		for _, p := range s.paths {
			paths = append(paths, "`"+strings.TrimSuffix(p, ".")+"`")
		}
		fmt.Fprintf(b, "\n<a id=%q></a>\n\n### %s\n\n", s.anchor, strings.Join(paths, ", "))
		d.renderSection(b, s)
	}
}

func (d *configDoc) renderSection(b *bytes.Buffer, s *configSection) {
	if s.doc != "" {
		fmt.Fprintf(b, "%s\n\n", s.doc)
	}
	fmt.Fprintf(b, "Go type: `%s`.\n\n", s.goType)
	b.WriteString("| key | type | description |\n|---|---|---|\n")
	for _, k := range s.keys {
		typ := k.typ
		if k.ref != nil {
			typ = strings.Replace(typ, objectWord+"s", fmt.Sprintf("[objects](#%s)", k.ref.anchor), 1)
			typ = strings.Replace(typ, objectWord, fmt.Sprintf("[object](#%s)", k.ref.anchor), 1)
		}
		doc := strings.ReplaceAll(k.doc, "\n\n", "<br><br>")
		doc = strings.ReplaceAll(doc, "|", `\|`)
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", k.name, typ, doc)
	}
}

// keyPaths lists every key path of the model (neighbors[].bfd.interval),
// for the tests.
func (d *configDoc) keyPaths() []string {
	var out []string
	for _, s := range d.sections {
		for _, p := range s.paths {
			for _, k := range s.keys {
				out = append(out, p+k.name)
			}
		}
	}
	return out
}
