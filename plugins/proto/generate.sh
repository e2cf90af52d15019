#!/usr/bin/env bash
# Regenerates the Go code of the channel protocol. Idempotent: run it from
# anywhere; it rewrites channel/v1/*.pb.go in place and changes nothing when
# the .proto did not change.
#
# Needs on PATH:
#   protoc              Debian: apt-get install -y protobuf-compiler (3.21.x)
#   protoc-gen-go       go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   protoc-gen-go-grpc  go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# The generator versions are pinned to match go.mod; the generated headers
# record them, so a different version shows up as a diff in CI.
set -euo pipefail

cd "$(dirname "$0")"
PATH="$PATH:$(go env GOPATH)/bin"

for tool in protoc protoc-gen-go protoc-gen-go-grpc; do
	command -v "$tool" >/dev/null || {
		echo "generate.sh: $tool not found; see the header of this script" >&2
		exit 1
	}
done

protoc \
	--proto_path=. \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	channel/v1/channel.proto
