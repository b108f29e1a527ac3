#!/usr/bin/env bash
# The installed libkiln as a program outside the tree sees it: `make
# install DESTDIR=...` puts libkiln.so.0 (soname libkiln.so.0), include/kiln/
# and kiln.pc there; the library exports exactly the KILN_API functions of
# the installed headers (all kiln_) and nothing else; each header compiles
# alone as C and as C++ with only the installed include directory; and
# tests/libkiln/read_version.c, compiled with nothing but
# `pkg-config --cflags --libs kiln`, reads every split of a version made by
# a file run and writes exactly what `kiln cat` writes for it.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
builddir=${KILN_BUILDDIR:-$(dirname "$kiln")}
py=/usr/bin/python3
cc=${CC:-cc}
cxx=${CXX:-c++}
need git make pkg-config nm readelf "$cc" "$cxx"
if [ ! -x "$kiln" ]; then
	echo "FAIL: no kiln binary at $kiln (set KILN)"
	echo "0 passed, 1 failed"
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root

# --- install -------------------------------------------------------------------
# A make of its own: not the jobserver or the goals of the `make check` that runs this.
install_into() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$builddir" install DESTDIR="$1" >"$tmp/install.log" 2>&1 && return 0
	tail -20 "$tmp/install.log" | sed 's/^/  | /'
	return 1
}
check "make install DESTDIR" install_into "$root"
so=$(find "$root" -name 'libkiln.so.0' | head -1)
pc=$(find "$root" -name 'kiln.pc' | head -1)
inc=$(find "$root" -type d -path '*/include/kiln' | head -1)
check "libkiln.so.0 installed" test -n "$so"
check "kiln.pc installed" test -n "$pc"
check "include/kiln installed" test -n "$inc"
if [ -z "$so" ] || [ -z "$pc" ] || [ -z "$inc" ]; then
	echo "$passed passed, $failed failed"
	exit 1
fi
libdir=$(dirname "$so")
inc=$(dirname "$inc")
check "libkiln.so links to libkiln.so.0" test "$(readlink "$libdir/libkiln.so")" = libkiln.so.0.0.0
check "no static library" test ! -e "$libdir/libkiln.a"
check "soname libkiln.so.0" sh -c "readelf -d '$so' | grep -q 'SONAME.*\\[libkiln\\.so\\.0\\]'"

# --- exports ---------------------------------------------------------------------
nm -D --defined-only "$so" | awk '{ print $NF }' | sed 's/@.*//' | sort -u >"$tmp/exported"
sed -n 's/^KILN_API [^(]*[ *]\(kiln_[a-z0-9_]*\)(.*/\1/p' "$inc"/kiln/*.h | sort -u >"$tmp/declared"
check "the headers declare the reader API" grep -qx kiln_reader_open "$tmp/declared"
same_exports() {
	diff "$tmp/declared" "$tmp/exported" >"$tmp/exports.diff" && return 0
	echo "  exports differ from the KILN_API declarations (< declared only, > exported only):"
	head -20 "$tmp/exports.diff" | sed 's/^/  | /'
	return 1
}
check "exports are exactly the KILN_API functions" same_exports
check "every export starts with kiln_" sh -c "! grep -v '^kiln_' '$tmp/exported'"
check "internal kiln_ functions are hidden" sh -c "! grep -qx -e kiln_error_set -e kiln_store_open -e kiln_manifest_open '$tmp/exported'"

# --- each header alone, as C and C++ ---------------------------------------------------
compiles_alone() { # LANG STD HEADER
	printf '#include <kiln/%s>\nint kiln_test_unused;\n' "$3" >"$tmp/one.$1"
	local compiler=$cc
	[ "$1" = c ] || compiler=$cxx
	"$compiler" -x "$1" -std="$2" -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" "$tmp/one.$1" 2>"$tmp/one.err" && return 0
	head -10 "$tmp/one.err" | sed 's/^/  | /'
	return 1
}
for h in "$inc"/kiln/*.h; do
	h=$(basename "$h")
	check "$h compiles alone as C" compiles_alone c c99 "$h"
	check "$h compiles alone as C++" compiles_alone c++ c++11 "$h"
done
check "installed headers include only each other and the C library" \
	sh -c "! grep -h '^#include' '$inc'/kiln/*.h | grep -v -e '<std[a-z]*\\.h>' -e '\"common\\.h\"' -e '\"reader\\.h\"'"

# --- a program outside the tree -------------------------------------------------------
export PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
PKG_CONFIG_LIBDIR=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs kiln)
check "pkg-config --cflags --libs kiln" test -n "$flags"
# A sanitizer build's library needs the sanitizer runtime in the program too.
# shellcheck disable=SC2086 # the flags are words
check "read_version.c builds with the pkg-config flags alone" \
	"$cc" -o "$tmp/read_version" "$src/tests/libkiln/read_version.c" $flags ${KILN_SAN_CFLAGS:-}
check "read_version loads the installed libkiln.so.0" \
	sh -c "LD_LIBRARY_PATH='$libdir' ldd '$tmp/read_version' | grep -q 'libkiln\\.so\\.0 => $libdir/libkiln\\.so\\.0'"

(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
"$py" "$src/bench/gen-user-events.py" --records 400 --seed 7 >"$tmp/in.jsonl"
check "a file run makes a version" status_is 0 env KILN_INPUT="$tmp/in.jsonl" KILN_KEY_FILE="$tmp/hmac.key" \
	KILN_STORE="file://$tmp/store" KILN_MANIFEST="$tmp/m.git" "$kiln" run "$src/pipelines/user-events.yaml"
commit=$(git --git-dir="$tmp/m.git" rev-parse refs/heads/user-events/main 2>/dev/null)
for split in train dev test; do
	check "read_version $split exits 0" status_is 0 env LD_LIBRARY_PATH="$libdir" \
		"$tmp/read_version" "$tmp/m.git" user-events@main "file://$tmp/store" "$split"
	mv "$tmp/out" "$tmp/lib.$split"
	check "read_version $split names the commit" grep -q "user-events $commit: " "$tmp/err"
	check "kiln cat $split exits 0" status_is 0 "$kiln" cat user-events@main --split "$split" \
		--manifest "$tmp/m.git" --store "file://$tmp/store"
	mv "$tmp/out" "$tmp/cat.$split"
	check "read_version $split writes what kiln cat writes" cmp "$tmp/lib.$split" "$tmp/cat.$split"
done
check "the train split has records" test -s "$tmp/lib.train"
check "a bad version fails" status_is 1 env LD_LIBRARY_PATH="$libdir" \
	"$tmp/read_version" "$tmp/m.git" user-events@v9 "file://$tmp/store" train
check "its message names it (kiln_error_last through the library)" grep -q "user-events@v9" "$tmp/err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
