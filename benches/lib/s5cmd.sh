# shellcheck shell=bash
# build_s5cmd: s5cmd for the benches (sourced, not executed).
#
# s5cmd v2.3.0, built from the Go module proxy's copy when there is none: `go install ...@v2.3.0`
# is refused on these machines (it asks the proxy for the version list), so the module is
# fetched by `go mod download` and built in a writable copy of it (the module cache is
# read-only), with -mod=mod: the module's zip keeps vendor/modules.txt but not the vendored
# code, so the default -mod=vendor finds nothing.
S5CMD_VERSION=v2.3.0
build_s5cmd() {
    local dest="${S5CMD_INSTALL:-/usr/local/bin/s5cmd}" go t0 tmp dir commit
    go="$(command -v go || echo /usr/local/go/bin/go)"
    [[ -x "$go" ]] || { echo "bench: s5cmd is not installed, and there is no Go to build it with" >&2; exit 1; }
    echo "bench: s5cmd is not installed: building s5cmd $S5CMD_VERSION with $go into $dest" >&2
    t0=$EPOCHREALTIME
    tmp="$(mktemp -d)"
    # The module's folder in Go's module cache, and the commit of its tag (for `s5cmd version`).
    read -r dir commit < <(cd "$tmp" && GOFLAGS=-mod=mod "$go" mod download -json "github.com/peak/s5cmd/v2@$S5CMD_VERSION" |
        python3 -c 'import json, sys; m = json.load(sys.stdin); print(m["Dir"], m.get("Origin", {}).get("Hash", "unknown")[:7])') ||
        { echo "bench: go mod download github.com/peak/s5cmd/v2@$S5CMD_VERSION failed" >&2; exit 1; }
    cp -r -- "$dir" "$tmp/src"
    chmod -R u+w -- "$tmp/src"  # the module cache is read-only
    (cd "$tmp/src" && "$go" build -mod=mod -o "$dest.tmp" \
        -ldflags "-X=github.com/peak/s5cmd/v2/version.Version=$S5CMD_VERSION -X=github.com/peak/s5cmd/v2/version.GitCommit=$commit" .)
    mv -- "$dest.tmp" "$dest"
    rm -rf -- "$tmp"
    echo "bench: built $("$dest" version) in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s" >&2
}
