// Command docgen writes the reference documents that are generated from the
// source, so that they cannot drift from it: docs/configuration.md from the
// CE's and FE's configuration types and their field comments (go/ast), and
// docs/api.md from the gRPC API's protobuf file and its comments (protoc's
// descriptor set with source info). `make generate` runs it (go generate);
// `make check-generated` fails when the committed documents differ.
//
// Usage, from the repository root:
//
//	go run ./internal/docgen [-root DIR] [-config FILE] [-api FILE]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

//go:generate go run . -root ../..

func main() {
	root := flag.String("root", ".", "the repository's root")
	config := flag.String("config", "docs/configuration.md", "the configuration reference to write, relative to -root (empty: none)")
	api := flag.String("api", "docs/api.md", "the API reference to write, relative to -root (empty: none)")
	flag.Parse()
	if err := run(*root, *config, *api); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run(root, config, api string) error {
	if config != "" {
		b, err := ConfigReference(root)
		if err != nil {
			return err
		}
		if err := writeIfChanged(filepath.Join(root, config), b); err != nil {
			return err
		}
	}
	if api != "" {
		b, err := APIReference(root)
		if err != nil {
			return err
		}
		if err := writeIfChanged(filepath.Join(root, api), b); err != nil {
			return err
		}
	}
	return nil
}

// writeIfChanged writes b to path unless the file holds it already, so an
// unchanged document keeps its modification time.
func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return os.WriteFile(path, b, 0o644)
}
