#!/usr/bin/env bash
# The Python package as Python users install it (docs/READING.md, "Python
# and PyTorch"), offline, with Debian's /usr/bin/python3 (python3-pip,
# python3-venv, python3-setuptools, python3-wheel, python3-pandas):
#  - `make python-wheel` builds a pure-Python wheel (no libkiln in it) whose
#    kiln/_config.py names the libdir given; installed into a fresh venv
#    (--system-site-packages, pip --no-index), then from outside the source
#    tree with KILN_LIBRARY and PYTHONPATH unset, tests/python/package_test.py:
#    libkiln found through _config.py, to_pandas (rows = stats.json's
#    count, columns as asked, values = kiln cat's) and dicts (= kiln cat's
#    records parsed); KILN_LIBRARY still wins, and a libkiln of another
#    release is still an ImportError;
#  - `pip install ./python` (a copy of it: pip builds in the tree) has no
#    _config.py: libkiln through the dynamic linker (LD_LIBRARY_PATH), a
#    fake libkiln.so.1 9.9.9 there is an ImportError naming both releases,
#    none found is an ImportError saying how to point at one;
#  - `make install` puts the package with _config.py naming $(libdir).
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
builddir=${KILN_BUILDDIR:-$src/build}
py=/usr/bin/python3
need git make
for m in pip venv setuptools wheel pandas; do
	$py -c "import $m" 2>/dev/null || { echo "FAIL: $py cannot import $m (run scripts/bootstrap)"; echo "0 passed, 1 failed"; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset KILN_BRANCH KILN_SPLIT_SALT KILN_LIBRARY PYTHONPATH PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
lib=$builddir/.libs/libkiln.so.1
want=$(sed -n 's/^AC_INIT(\[kiln\], \[\([0-9.]*\)\].*/\1/p' "$src/configure.ac")

# Under the sanitizer build the library needs the sanitizer runtimes
# preloaded (python is not instrumented), as in python_reader.sh
preload=
if ldd "$lib" | grep -q libasan; then
	preload=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)
	export ASAN_OPTIONS=detect_leaks=0:handle_segv=0
fi

export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
$py "$src/bench/gen-user-events.py" --records 3000 --seed 1 -o "$tmp/in.jsonl"
check "kiln run" status_is 0 "$kiln" run "$src/pipelines/user-events.yaml" --set shards.target_bytes=32K

# the wheel, as `make python-wheel` builds it (its own make: not the check's jobserver)
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$builddir" "$@"; }
check "make python-wheel" status_is 0 mk python-wheel PYTHON3=$py PYTHON_WHEEL_DIR="$tmp/dist" \
	PYTHON_WHEEL_LIBDIR="$builddir/.libs"
whl=$tmp/dist/kiln-$want-py3-none-any.whl
check "... kiln-$want-py3-none-any.whl" test -f "$whl"
$py -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl" >"$tmp/whl.list" 2>&1
check "... with the package and _config.py" grep -qx 'kiln/_config.py' "$tmp/whl.list"
for f in __init__ _lib torch _version; do
	check "... kiln/$f.py" grep -qx "kiln/$f.py" "$tmp/whl.list"
done
check "... and no library in it" bash -c "! grep -q '\\.so' '$tmp/whl.list'"
$py -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read("kiln/_config.py").decode())' "$whl" >"$tmp/config.py"
check "... _config.py names the libdir given" grep -qxF "LIBDIR = \"$builddir/.libs\"" "$tmp/config.py"
odd="$tmp/a \"quoted\" \\ libdir"
check "make python-wheel, a libdir with double quotes, a backslash and spaces" status_is 0 mk python-wheel PYTHON3=$py \
	PYTHON_WHEEL_DIR="$tmp/dist2" PYTHON_WHEEL_LIBDIR="$odd"
check "... _config.py's LIBDIR is that libdir" $py -c '
import sys, zipfile
ns = {}
exec(zipfile.ZipFile(sys.argv[1]).read("kiln/_config.py"), ns)
sys.exit(ns["LIBDIR"] != sys.argv[2])' "$tmp/dist2/kiln-$want-py3-none-any.whl" "$odd"
check "... pip built outside the source tree" bash -c "! ls -d '$src/python/build' '$src/python/'*.egg-info 2>/dev/null | grep -q ."

# venv A: the wheel
check "venv A (--system-site-packages)" status_is 0 $py -m venv --system-site-packages "$tmp/venv-a"
check "pip install the wheel, offline" status_is 0 "$tmp/venv-a/bin/python" -m pip install -q --no-build-isolation --no-index "$whl"
mkdir "$tmp/work" && cd "$tmp/work" || exit 1
run_test() { # VENV EXPECT_LIBRARY [ENV...]
	local venv=$1 expect=$2
	shift 2
	out=$(timeout -k 5 120 env LD_PRELOAD="$preload" "$@" "$venv/bin/python" "$src/tests/python/package_test.py" "$kiln" "$tmp" "$expect" 2>"$tmp/pt.err")
	rc=$?
	echo "$out" | grep -v '^[0-9]* passed'
	p=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
	f=$(echo "$out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	if [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		failed=$((failed + 1))
		echo "FAIL: package_test.py ($venv) exited $rc:"
		tail -15 "$tmp/pt.err" | sed 's/^/  | /'
	fi
}
run_test "$tmp/venv-a" "$lib"

printf 'const char *kiln_library_version(void) { return "9.9.9"; }\nunsigned kiln_library_version_number(void) { return 90909; }\n' >"$tmp/fake.c"
mkdir "$tmp/fakelib"
${CC:-cc} -shared -fPIC -Wl,-soname,libkiln.so.1 -o "$tmp/fakelib/libkiln.so.1" "$tmp/fake.c"
import_fails() { # PYTHON OUT [ENV...]: import kiln raises ImportError; its message in OUT
	local python=$1 out=$2
	shift 2
	env "$@" "$python" -c '
try:
    import kiln
except ImportError as e:
    print(e)
else:
    raise SystemExit("imported " + kiln._lib.library_path)' >"$out"
}
check "venv A, KILN_LIBRARY=a libkiln 9.9.9: ImportError" \
	import_fails "$tmp/venv-a/bin/python" "$tmp/a-fake.out" KILN_LIBRARY="$tmp/fakelib/libkiln.so.1"
check "... naming both releases" grep -q "is libkiln 9.9.9, this binding needs libkiln ${want%.*}.x" "$tmp/a-fake.out"

# venv B: pip install ./python (a copy: pip builds in the tree), no _config.py
cp -r "$src/python" "$tmp/python-src" && chmod -R u+w "$tmp/python-src" && rm -f "$tmp/python-src/kiln/_config.py"
check "venv B (--system-site-packages)" status_is 0 $py -m venv --system-site-packages "$tmp/venv-b"
check "pip install ./python, offline" status_is 0 "$tmp/venv-b/bin/python" -m pip install -q --no-build-isolation --no-index "$tmp/python-src"
check "... installs no _config.py" bash -c "! ls '$tmp/venv-b'/lib/python3*/site-packages/kiln/_config.py 2>/dev/null"
run_test "$tmp/venv-b" libkiln.so.1 LD_LIBRARY_PATH="$builddir/.libs"
check "venv B, LD_LIBRARY_PATH with a libkiln.so.1 9.9.9: ImportError" \
	import_fails "$tmp/venv-b/bin/python" "$tmp/b-fake.out" LD_LIBRARY_PATH="$tmp/fakelib"
check "... naming both releases" grep -q "libkiln.so.1 is libkiln 9.9.9, this binding needs libkiln ${want%.*}.x" "$tmp/b-fake.out"
if /sbin/ldconfig -p 2>/dev/null | grep -q 'libkiln\.so\.1 '; then
	echo "note: a libkiln.so.1 is installed on this machine: the no-library case is not checked"
else
	check "venv B, no libkiln anywhere: ImportError" import_fails "$tmp/venv-b/bin/python" "$tmp/b-none.out"
	check "... saying how to point at one" grep -q "cannot load libkiln (.*): install kiln (make install; ldconfig), set LD_LIBRARY_PATH" "$tmp/b-none.out"
fi

# make install: the package under $(pkgdatadir)/python with _config.py naming $(libdir)
check "make install (the Python package's files)" status_is 0 \
	mk install-dist_kilnpythonDATA install-nodist_kilnpythonDATA DESTDIR="$tmp/inst"
config=$(find "$tmp/inst" -path '*/python/kiln/_config.py' | head -1)
libdir=$(sed -n 's/^libdir=//p' "$builddir/kiln.pc")
prefix=$(sed -n 's/^prefix=//p' "$builddir/kiln.pc")
libdir=${libdir/\$\{exec_prefix\}/$prefix}
check "... kiln/_config.py installed" test -n "$config"
check "... naming the configured libdir ($libdir)" grep -qxF "LIBDIR = \"$libdir\"" "${config:-/dev/null}"
check "... PYTHONPATH=\$(pkgdatadir)/python imports it (libkiln through LD_LIBRARY_PATH)" \
	env LD_PRELOAD="$preload" PYTHONPATH="${config%/kiln/_config.py}" LD_LIBRARY_PATH="$builddir/.libs" $py -c '
import sys, kiln
sys.exit(not (kiln.__file__.startswith(sys.argv[1]) and kiln.open("user-events").stats["valid"] > 0))' "$tmp/inst"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
