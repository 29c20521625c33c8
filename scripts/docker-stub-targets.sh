#!/bin/sh
# Used by the Dockerfile's dependency-cache layer: for each manifest given
# (default: Cargo.toml), creates a placeholder source file for every target
# it declares ([lib], [[bin]], [[example]], [[test]], [[bench]]; src/main.rs
# for a package that declares neither a lib nor a bin), beside that
# manifest, so cargo can read the workspace and build the dependencies
# before the real sources are copied in. Existing files are left alone.
# POSIX sh + awk: it runs inside rust:*-bookworm.
set -eu

[ "$#" -gt 0 ] || set -- Cargo.toml

for manifest in "$@"; do
    dir=$(dirname "$manifest")
    awk '
function flush() {
    if (kind == "") return
    if (kind == "lib" || kind == "bin") lib_or_bin = 1
    if (path == "") {
        if (kind == "lib") path = "src/lib.rs"
        else if (kind == "bin") path = "src/bin/" name ".rs"
        else if (kind == "example") path = "examples/" name ".rs"
        else if (kind == "test") path = "tests/" name ".rs"
        else path = "benches/" name ".rs"
    }
    print kind " " path
    kind = ""
}
function value(line) {
    sub(/^[^=]*=[ \t]*"/, "", line)
    sub(/".*$/, "", line)
    return line
}
/^[ \t]*\[\[(bin|example|test|bench)\]\][ \t]*$/ {
    flush(); kind = $0; gsub(/[][ \t]/, "", kind); name = ""; path = ""; next
}
/^[ \t]*\[lib\][ \t]*$/ { flush(); kind = "lib"; name = ""; path = ""; next }
/^[ \t]*\[package\][ \t]*$/ { flush(); package = 1; next }
/^[ \t]*\[/ { flush(); next }
kind != "" && /^[ \t]*name[ \t]*=/ { name = value($0) }
kind != "" && /^[ \t]*path[ \t]*=/ { path = value($0) }
END { flush(); if (package && !lib_or_bin) print "bin src/main.rs" }
' "$manifest" | while read -r kind path; do
        path="$dir/$path"
        [ -e "$path" ] && continue
        mkdir -p "$(dirname "$path")"
        if [ "$kind" = "lib" ]; then
            : >"$path"
        else
            echo 'fn main() {}' >"$path"
        fi
        echo "stub $kind: $path"
    done
done
