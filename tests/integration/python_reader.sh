#!/usr/bin/env bash
# The Python package (python/kiln over libkiln, ctypes) and its PyTorch
# adapter, with Debian's /usr/bin/python3 and python3-torch: a promoted,
# signed v1 and a branch one run ahead, then tests/python/reader_test.py:
#  - reader: metadata as git and kiln ls give it, signature and deep
#    verify, records equal to kiln cat for the same reading, each record
#    once per epoch over 4 ranks, epochs differ, a seed repeats, resume at
#    random points with and without a shuffle buffer, refused states, a
#    corrupted shard (an error naming it, none of its records), reading
#    through a cache node over http and from its directory in place;
#  - torch: 4 ranks x 3 DataLoader workers over two epochs, each record
#    exactly once per epoch; resume through DataLoader.state_dict; a
#    training process killed with SIGKILL after a checkpoint, resumed:
#    exactly the rest;
#  - edges: a version closed while its records are read ahead (close(),
#    leaving the with block, break out of the loop, records left to the
#    collector), each in its own python: every later use of the records is
#    a kiln.Error and the process exits cleanly; states that libkiln's
#    strict decoder refuses (a key twice, also escaped; trailing bytes;
#    negative and huge numbers) are kiln.Errors.
# Under the sanitizer build the library is loaded with the sanitizer
# runtimes preloaded (python itself is not instrumented) and DataLoader
# workers start from a forkserver (reader_test.py says why). Each part runs
# under a time limit: a hang fails the test instead of the whole suite.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
builddir=${KILN_BUILDDIR:-$src/build}
py=/usr/bin/python3
need git
for m in torch zstandard; do
	$py -c "import $m" 2>/dev/null || { echo "FAIL: $py cannot import $m (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }
done
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
unset KILN_BRANCH KILN_SPLIT_SALT KILN_CACHE_TOKEN
unset http_proxy https_proxy all_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY
export no_proxy='127.0.0.1,localhost' NO_PROXY='127.0.0.1,localhost'
pipeline=$src/pipelines/user-events.yaml
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
"$kiln" keygen --out "$tmp/sign.key" --comment release@kiln.test >/dev/null
$py "$src/bench/gen-user-events.py" --records 12000 --seed 1 -o "$tmp/in.jsonl"
check "run 1" status_is 0 "$kiln" run "$pipeline" --set shards.target_bytes=32K
check "promote v1 (signed)" status_is 0 "$kiln" promote user-events@main --pipeline "$pipeline" \
	--set promote.ratio_tolerance=1 --set manifest.signing_key="$tmp/sign.key"
$py "$src/bench/gen-user-events.py" --records 2000 --seed 2 --append -o "$tmp/in.jsonl"
check "run 2 (main ahead of v1)" status_is 0 "$kiln" run "$pipeline" --set shards.target_bytes=32K

# a cache node over the store, pinning v1 and main: served over http, and
# its directory read in place after a sync
cat >"$tmp/cache.yaml" <<YAML
store: {url: file://$tmp/store}
manifest: $tmp/m.git
dir: $tmp/cache
size_limit: 1G
pins: [user-events@v1, user-events@main]
listen: 127.0.0.1:0
YAML
check "cache sync --once" status_is 0 "$kiln" cache sync "$tmp/cache.yaml" --once
"$kiln" cache serve "$tmp/cache.yaml" >"$tmp/serve.out" 2>"$tmp/serve.log" &
pids+=($!)
port_of() { $py -c '
import json, sys
for line in open(sys.argv[1], errors="replace"):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if isinstance(e, dict) and e.get("event") == "listening":
        print(e["port"]); break' "$tmp/serve.log"; }
poll 20 test -n "$(port_of)"
port=$(port_of)
check "the cache node listens" test -n "$port"

export KILN_LIBRARY=$builddir/.libs/libkiln.so.1 PYTHONPATH=$src/python
export KILN_TEST_CACHE_URL=http://127.0.0.1:$port KILN_TEST_CACHE_DIR=$tmp/cache

preload=
if ldd "$KILN_LIBRARY" | grep -q libasan; then
	preload=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)
	export ASAN_OPTIONS=detect_leaks=0:handle_segv=0 # python's own allocations are not kiln's leaks
	export KILN_TEST_MP_CONTEXT=forkserver
fi

# the binding checks the library's version at import: its own LIBRARY_VERSION
# is configure.ac's major.minor; another release, or a library without the
# query, is an ImportError that names what was found and what is needed
want=$(sed -n 's/^AC_INIT(\[kiln\], \[\([0-9]*\.[0-9]*\)\..*/\1/p' "$src/configure.ac")
check "python/kiln's LIBRARY_VERSION is configure.ac's ($want)" \
	env LD_PRELOAD="$preload" $py -c "import sys, kiln._lib as l; sys.exit('%d.%d' % l.LIBRARY_VERSION != sys.argv[1])" "$want"
printf 'const char *kiln_library_version(void) { return "9.9.9"; }\nunsigned kiln_library_version_number(void) { return 90909; }\n' >"$tmp/fake.c"
${CC:-cc} -shared -fPIC -o "$tmp/libfake.so" "$tmp/fake.c"
import_fails() { # LIBRARY OUT: import kiln raises ImportError; its message in OUT
	KILN_LIBRARY=$1 $py -c '
try:
    import kiln
except ImportError as e:
    print(e)
else:
    raise SystemExit("imported")' >"$2"
}
check "libkiln 9.9.9: ImportError" import_fails "$tmp/libfake.so" "$tmp/fake.out"
check "... naming both releases" grep -q "is libkiln 9.9.9, this binding needs libkiln $want.x" "$tmp/fake.out"
check "a library without the version query: ImportError" import_fails libc.so.6 "$tmp/old.out"
check "... saying so" grep -q "has no kiln_library_version_number" "$tmp/old.out"
# this release's version, but not every function the binding declares (an
# older build of the release): an ImportError naming the first it lacks
major=${want%%.*} minor=${want#*.}
printf 'const char *kiln_library_version(void) { return "%s.0"; }\nunsigned kiln_library_version_number(void) { return %d; }\n' \
	"$want" $((major * 10000 + minor * 100)) >"$tmp/partial.c"
${CC:-cc} -shared -fPIC -o "$tmp/libpartial.so" "$tmp/partial.c"
check "a libkiln $want.0 without the reader's functions: ImportError" import_fails "$tmp/libpartial.so" "$tmp/partial.out"
check "... naming the function" grep -q "has no kiln_error_last" "$tmp/partial.out"
check "this build's libkiln imports" env LD_PRELOAD="$preload" $py -c "import kiln"
for part in reader torch edges; do
	out=$(timeout -k 10 1200 env LD_PRELOAD="$preload" $py "$src/tests/python/reader_test.py" "$kiln" "$tmp" "$part" 2>"$tmp/$part.err")
	rc=$?
	echo "$out" | grep -v '^[0-9]* passed'
	p=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
	f=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		failed=$((failed + 1))
		echo "FAIL: reader_test.py $part exited $rc:"
		grep -v Warning "$tmp/$part.err" | tail -15 | sed 's/^/  | /'
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
