#!/usr/bin/env bash
# Build virtual-kubelet's reference binary (upstream cmd/virtual-kubelet with its built-in `mock`
# provider) from the Go module proxy, at the version pinned in bench/virtual-kubelet/go.mod, into a
# cache folder outside the repository. Does nothing when the binary is already there.
#
#   bench/build_virtual_kubelet.sh            # build if missing, print the binary's path
#   bench/build_virtual_kubelet.sh --force    # rebuild
#
# The binary lands in ${VK_PROVIDER_CACHE_DIR:-$HOME/.cache/vk-provider}/bench/virtual-kubelet-<version>/.
# Building takes a few minutes on a 2-core machine the first time (downloads plus compile).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module_dir="$here/virtual-kubelet"
package="github.com/virtual-kubelet/virtual-kubelet/cmd/virtual-kubelet"

force=0
case "${1:-}" in
    "") ;;
    --force) force=1 ;;
    -h | --help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

# A stray dependency bump must fail loudly rather than fetch another toolchain, and the binary is
# static like upstream's release build (no C compiler needed).
export GOTOOLCHAIN=local
export CGO_ENABLED=0

if ! command -v go >/dev/null 2>&1; then
    echo "error: \`go\` is not on PATH; install Go $(sed -n 's/^go //p' "$module_dir/go.mod") or newer." >&2
    exit 1
fi

version="$(cd "$module_dir" && go list -m -f '{{.Version}}' github.com/virtual-kubelet/virtual-kubelet)"
cache_dir="${VK_PROVIDER_CACHE_DIR:-$HOME/.cache/vk-provider}/bench/virtual-kubelet-$version"
binary="$cache_dir/virtual-kubelet"
log="$cache_dir/go-build.log"

if [[ $force -eq 0 && -x "$binary" ]]; then
    echo "$binary"
    exit 0
fi

mkdir -p "$cache_dir"
exec 9>"$cache_dir/build.lock"
if ! flock -n 9; then
    echo "another build of virtual-kubelet $version is under way; waiting for it..." >&2
    flock 9
    if [[ $force -eq 0 && -x "$binary" ]]; then
        echo "$binary"
        exit 0
    fi
fi

echo "building virtual-kubelet $version with $(go env GOVERSION) (log: $log)..." >&2
started=$SECONDS
partial="$binary.partial.$$"
trap 'rm -f "$partial"' EXIT
# Same link flags as upstream's Makefile (`make build`): version stamped in, not stripped.
if ! (cd "$module_dir" && go build -trimpath \
    -ldflags "-X main.buildVersion=$version -X main.buildTime=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -o "$partial" "$package") >"$log" 2>&1; then
    echo "error: building virtual-kubelet $version failed; the end of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
fi
mv -f "$partial" "$binary"
trap - EXIT
echo "built $binary ($(du -h "$binary" | cut -f1)) in $((SECONDS - started))s" >&2
echo "$binary"
