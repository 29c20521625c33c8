#!/bin/sh
# Used by the Dockerfile's dependency-cache layer: creates a placeholder
# source file for every target Cargo.toml declares ([lib], [[bin]],
# [[example]], [[test]], [[bench]]), so cargo can read the manifest and build
# the dependencies before the real sources are copied in. Existing files are
# left alone. POSIX sh + awk: it runs inside rust:*-bookworm.
set -eu

manifest=${1:-Cargo.toml}

awk '
function flush() {
    if (kind == "") return
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
/^[ \t]*\[/ { flush(); next }
kind != "" && /^[ \t]*name[ \t]*=/ { name = value($0) }
kind != "" && /^[ \t]*path[ \t]*=/ { path = value($0) }
END { flush() }
' "$manifest" | while read -r kind path; do
    [ -e "$path" ] && continue
    mkdir -p "$(dirname "$path")"
    if [ "$kind" = "lib" ]; then
        : >"$path"
    else
        echo 'fn main() {}' >"$path"
    fi
    echo "stub $kind: $path"
done
