// Package splitplanev1 is the splitplane gRPC API (splitplane.proto) and its
// generated Go code, committed; `make generate` (go generate) regenerates it
// with Debian's protoc and the protoc-gen-go / protoc-gen-go-grpc versions
// pinned in go.mod's tool block, and `make test` checks it is current.
package splitplanev1

//go:generate sh -c "go build -o ../../../bin/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go && go build -o ../../../bin/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc && protoc --plugin=protoc-gen-go=../../../bin/protoc-gen-go --plugin=protoc-gen-go-grpc=../../../bin/protoc-gen-go-grpc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative splitplane.proto"
