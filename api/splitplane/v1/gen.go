// Package splitplanev1 is the splitplane gRPC API (splitplane.proto) and its
// generated Go code, committed; `make generate` (go generate) regenerates it
// with Debian's protoc and the protoc-gen-go / protoc-gen-go-grpc versions
// pinned in go.mod's tool block (run through `go tool`, so nothing is
// built into bin/), and `make test` checks it is current.
package splitplanev1

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --plugin=protoc-gen-go-grpc=$(go tool -n protoc-gen-go-grpc) --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative splitplane.proto"
