# splitplane: `make run` brings up the lab, `make test` runs everything.
# Both install what they need (Debian packages) on a fresh Debian 12 machine as root.

export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
BIN     := bin/splitplane
LABBIN  := bin/splitplane-lab
LAB     ?= sp

# What the lab and the tests run: iproute2 (ip, netns), ethtool (GRO on veth
# peers), iputils-ping (lab traffic), util-linux (nsenter), procps (sysctl,
# pgrep), bpftool (what `make test` checks it left behind).
RUN_DEPS := iproute2 ethtool iputils-ping util-linux procps bpftool
# What regenerating the BPF object and the gRPC stubs needs (both checked by
# `make test`), tshark,
# which the tests use to decode ForCES as an independent implementation, and
# BIRD 2, a third-party BGP peer for the interoperability test.
GEN_DEPS := clang llvm libbpf-dev tshark bird2 frr protobuf-compiler

.PHONY: all build run status down test unit deps gen-deps generate check-generated fmt-check vet lint fuzz bench package clean

all: build

# The router (splitplane) and, beside it, the lab, benchmarks and test peer
# (splitplane-lab), which `splitplane lab|bench|peer` hands its commands to.
build:
	$(GO) build -o $(BIN) ./cmd/splitplane
	$(GO) build -o $(LABBIN) ./cmd/splitplane-lab

# The Debian package (build/splitplane_VERSION_amd64.deb): the binaries, the
# systemd units, the sysusers file, man pages, completion and the example
# configurations under /usr/share/doc/splitplane (deploy/package).
package:
	GO=$(GO) deploy/package/build.sh

# Install missing Debian packages (apt-get update runs only when something is missing).
deps:
	@missing=""; for p in $(RUN_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -q && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; fi

gen-deps:
	@missing=""; for p in $(GEN_DEPS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -q && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; fi

# The lab: router (CE + FE) and a BGP peer and two hosts in namespaces, a
# steady ping through the XDP fast path, and a live status view.
run: deps build
	@./$(BIN) lab down --name $(LAB) >/dev/null 2>&1 || true
	./$(BIN) lab up --name $(LAB) --traffic
	./$(BIN) lab status --name $(LAB) --watch

status: build
	./$(BIN) lab status --name $(LAB)

down: build
	./$(BIN) lab down --name $(LAB)

# Everything: formatting, vet, generated code is current, unit tests, and the
# privileged integration tests (netns, XDP, real daemons) when root; then a
# check that they left no XDP program, namespace or process behind.
test: deps gen-deps fmt-check vet lint check-generated build
	@.ci/leaks snapshot .leaks-before
	$(GO) test -count=1 -timeout 25m ./...
	@.ci/leaks check .leaks-before
	@rm -f .leaks-before

unit:
	$(GO) test -count=1 -short ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_bpfe[lb].go$$')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

lint:
	$(GO) tool staticcheck ./...

# Regenerate committed generated code (bpf2go output, the gRPC stubs) and the
# generated references (docs/configuration.md from the config types,
# docs/api.md from the .proto: internal/docgen).
generate: gen-deps
	$(GO) generate ./...

check-generated: generate
	@git diff --exit-code --stat -- '*_bpfel.go' '*_bpfel.o' '*.pb.go' docs/configuration.md docs/api.md || \
	{ echo "generated files are stale: run 'make generate' and commit"; exit 1; }

# go test fuzzes one target at a time: every decoder's target in turn, in
# every package that has one (each target's corpus: testdata/fuzz/NAME).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | sed 's|$$|/|'); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# The performance suite (root; BIRD 2 comes with gen-deps): every figure
# beside its baseline, into results/DATE-TIME/ (report.md, PNG plots,
# results.json), under 15 minutes on two cores. BENCH_FLAGS=--quick checks
# the suite in about half a minute.
bench: deps gen-deps build
	./$(BIN) bench all $(BENCH_FLAGS)

clean:
	rm -rf bin
