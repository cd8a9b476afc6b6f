#!/usr/bin/env bash
# Writes the Go code of the plugin API (pluginv1/*.pb.go) into the folder given (default: here), from
# vk_provider/plugin/v1/provider.proto, with protoc from grpcio-tools and the protoc plugins this
# module pins as tools. `make proto` runs it here; tests/unit/plugin/test_go_example.py runs it into a
# scratch folder and compares, so the committed code is always what the .proto says.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
(cd "$here" && go build -o "$tools/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)
module="vk-provider.invalid/plugin-go-example"
mapping="Mvk_provider/plugin/v1/provider.proto=$module/pluginv1"
cd "$root"
"$python" -m grpc_tools.protoc -I . \
  --plugin=protoc-gen-go="$tools/protoc-gen-go" --plugin=protoc-gen-go-grpc="$tools/protoc-gen-go-grpc" \
  --go_out="$out" --go_opt="module=$module" --go_opt="$mapping" \
  --go-grpc_out="$out" --go-grpc_opt="module=$module" --go-grpc_opt="$mapping" \
  vk_provider/plugin/v1/provider.proto
