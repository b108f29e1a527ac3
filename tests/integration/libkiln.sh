#!/usr/bin/env bash
# The installed libkiln as a program outside the tree sees it: `make
# install DESTDIR=...` puts libkiln.so.1 (soname libkiln.so.1), include/kiln/
# and kiln.pc there; kiln_library_version() is kiln.pc's version; the library exports exactly the KILN_API functions of
# the installed headers (all kiln_) and nothing else; each header compiles
# alone as C and as C++ with only the installed include directory; and
# tests/libkiln/read_version.c, compiled with nothing but
# `pkg-config --cflags --libs kiln`, reads every split of a version made by
# a file run and writes exactly what `kiln cat` writes for it;
# tests/libkiln/verify_version.c, built the same way, reads the version's
# stats and definition (as stats.json and dataset.json hold them) and
# judges it with kiln_reader_verify: unsigned, signed and trusted, signed by
# an untrusted key, a shard tampered with in the store (--deep).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
builddir=${KILN_BUILDDIR:-$(dirname "$kiln")}
py=/usr/bin/python3
cc=${CC:-cc}
cxx=${CXX:-c++}
need git make pkg-config nm readelf "$cc" "$cxx"
need_kiln

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
so=$(find "$root" -name 'libkiln.so.1' | head -1)
pc=$(find "$root" -name 'kiln.pc' | head -1)
inc=$(find "$root" -type d -path '*/include/kiln' | head -1)
check "libkiln.so.1 installed" test -n "$so"
check "kiln.pc installed" test -n "$pc"
check "include/kiln installed" test -n "$inc"
if [ -z "$so" ] || [ -z "$pc" ] || [ -z "$inc" ]; then
	echo "$passed passed, $failed failed"
	exit 1
fi
libdir=$(dirname "$so")
inc=$(dirname "$inc")
check "libkiln.so links to libkiln.so.1" test "$(readlink "$libdir/libkiln.so")" = libkiln.so.1.0.0
check "no static library" test ! -e "$libdir/libkiln.a"
check "soname libkiln.so.1" sh -c "readelf -d '$so' | grep -q 'SONAME.*\\[libkiln\\.so\\.1\\]'"

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
# shellcheck disable=SC2086 # the flags are words
check "verify_version.c builds with the pkg-config flags alone" \
	"$cc" -o "$tmp/verify_version" "$src/tests/libkiln/verify_version.c" $flags ${KILN_SAN_CFLAGS:-}
check "read_version loads the installed libkiln.so.1" \
	sh -c "LD_LIBRARY_PATH='$libdir' ldd '$tmp/read_version' | grep -q 'libkiln\\.so\\.1 => $libdir/libkiln\\.so\\.1'"


# the version query: kiln.pc's version, as a string and as one number
printf '#include <kiln/kiln.h>\n#include <stdio.h>\nint main(void) { printf("%%s %%u\\n", kiln_library_version(), kiln_library_version_number()); return 0; }\n' >"$tmp/ver.c"
# shellcheck disable=SC2086 # the flags are words
check "a program asking the version builds" "$cc" -o "$tmp/ver" "$tmp/ver.c" $flags ${KILN_SAN_CFLAGS:-}
modversion=$(pkg-config --modversion kiln)
want_number=$(echo "$modversion" | awk -F. '{ print $1 * 10000 + $2 * 100 + $3 }')
check "kiln_library_version is kiln.pc's ($modversion $want_number)" \
	test "$(LD_LIBRARY_PATH="$libdir" "$tmp/ver")" = "$modversion $want_number"

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

# --- what a version is, and whether to trust it ------------------------------------------
vv() { # WANT_STATUS SPEC ARGS...: verify_version on the signed repository's version
	local want=$1 spec=$2
	shift 2
	status_is "$want" env LD_LIBRARY_PATH="$libdir" "$tmp/verify_version" "$tmp/m.git" "$spec" "file://$tmp/store" "$@"
}
check "verify_version exits 0 on an unsigned version without keys" vv 0 user-events@main --deep
want_stats=$(git --git-dir="$tmp/m.git" show refs/heads/user-events/main:stats.json | "$py" -c '
import json, sys
s = json.load(sys.stdin)
print("stats: records_in=%d valid=%d quarantined=%d" % (s["records_in"], s["valid"], s["quarantined"])
      + "".join(" %s=%d/%d/%d/%d" % (n, s["splits"][n]["records"], s["splits"][n]["shards"],
                                    s["splits"][n]["bytes"], s["splits"][n]["raw_bytes"])
                for n in ("train", "dev", "test")))')
check "its stats are stats.json's" grep -qxF "$want_stats" "$tmp/out"
want_def=$(git --git-dir="$tmp/m.git" show refs/heads/user-events/main:dataset.json | "$py" -c '
import json, sys
d = json.load(sys.stdin)
c, p, s, h = d["contract"], d["pseudonymisation"], d["split"], d["shards"]
print("definition: contract=%s@%s token=%s key=%s/%s split=%s(%s,%s) shards=%s/%s" % (
      c["id"], c["version"], p["scheme"], p["key_id"], p["key_version"], s["scheme"], s["key"], s["salt"],
      h["format"], h["compression"]))')
check "its definition is dataset.json's" grep -qxF "$want_def" "$tmp/out"
check "unsigned, no problems, every shard intact" grep -qx "signature: none trusted=0 must_be_signed=0" "$tmp/out"
nshards=$(find "$tmp/store/shards" -type f | wc -l)
check "deep: every shard checked" grep -qx "problems: 0 shards_ok: $nshards" "$tmp/out"

"$kiln" keygen --out "$tmp/sign.key" >/dev/null 2>&1
"$kiln" keygen --out "$tmp/other.key" >/dev/null 2>&1
"$py" "$src/bench/gen-user-events.py" --records 50 --seed 8 >>"$tmp/in.jsonl"
first=$(git --git-dir="$tmp/m.git" rev-parse refs/heads/user-events/main)
check "a signed run makes the next version" status_is 0 env KILN_INPUT="$tmp/in.jsonl" KILN_KEY_FILE="$tmp/hmac.key" \
	KILN_STORE="file://$tmp/store" KILN_MANIFEST="$tmp/m.git" "$kiln" run "$src/pipelines/user-events.yaml" \
	--set manifest.signing_key="$tmp/sign.key"
check "unsigned with trusted keys given is a problem" vv 1 "user-events@$first" --keys "$tmp/sign.key.pub"
check "  named" grep -q "^problem: user-events@$first: .* is not signed$" "$tmp/out"
check "signed by the trusted key" vv 0 user-events@main --keys "$tmp/sign.key.pub"
check "  good and trusted" grep -q "^signature: good SHA256:[A-Za-z0-9+/]* trusted=1 " "$tmp/out"
check "signed by a key not trusted is a problem" vv 1 user-events@main --keys "$tmp/other.key.pub"
check "  named" grep -q "which is not a trusted key" "$tmp/out"
shard=$(find "$tmp/store/shards" -type f | head -1)
chmod u+w "$shard" && printf 'x' >>"$shard"
check "deep: a shard tampered with in the store is a problem" vv 1 user-events@main --deep
check "  one problem, naming the shard" sh -c "grep -c '^problem: ' '$tmp/out' | grep -qx 1 && grep -q '$(basename "$shard" .jsonl.zst)' '$tmp/out'"
check "a missing key file stops the check (exit 2)" vv 2 user-events@main --keys "$tmp/nope.pub"
check "  named" grep -q "nope.pub" "$tmp/err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
