#!/usr/bin/env bash
# `kiln cat` reading epoch by epoch with exact resume (the reader's cursor,
# kiln/reader.h): every record once per epoch over 4 ranks, two epochs in
# different orders, the same seed and epoch the same order, a shuffle
# buffer that keeps the records and changes their order; a reader killed
# with SIGKILL after it saved its state (--state-file) and resumed
# (--resume) yields exactly the rest of the epoch; SIGTERM saves the state
# and exits 143; a state from another epoch or world size is refused with
# one line; the state is read whole and strictly (a key twice, trailing
# bytes, negative and huge numbers refused); a temporary state file of a
# process that no longer runs is removed at the next save.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset KILN_BRANCH KILN_SPLIT_SALT
export KILN_INPUT=$tmp/in.jsonl KILN_KEY_FILE=$tmp/hmac.key KILN_STORE=file://$tmp/store KILN_MANIFEST=$tmp/m.git
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$tmp/hmac.key")
$py "$src/bench/gen-user-events.py" --records 20000 --seed 1 -o "$tmp/in.jsonl"
"$kiln" run "$src/pipelines/user-events.yaml" --set shards.target_bytes=64K >/dev/null 2>&1
ds=user-events@main
cat_() { "$kiln" cat "$ds" --shuffle-seed 11 "$@"; }

cat_ --world-size 1 >"$tmp/plain" 2>/dev/null
sort "$tmp/plain" >"$tmp/all.sorted"
check "the split has records" test "$(wc -l <"$tmp/all.sorted")" -gt 1000
for e in 0 1; do
	for r in 0 1 2 3; do cat_ --epoch $e --rank $r --world-size 4; done >"$tmp/e$e" 2>/dev/null
done
check "epoch 0 over 4 ranks: each record once" cmp -s <(sort "$tmp/e0") "$tmp/all.sorted"
check "epoch 1 over 4 ranks: each record once" cmp -s <(sort "$tmp/e1") "$tmp/all.sorted"
check "the two epochs differ in order" bash -c '! cmp -s "$0" "$1"' "$tmp/e0" "$tmp/e1"
for r in 0 1 2 3; do cat_ --epoch 1 --rank $r --world-size 4; done >"$tmp/e1again" 2>/dev/null
check "the same seed and epoch give the same order" cmp -s "$tmp/e1" "$tmp/e1again"
cat_ --epoch 1 --shuffle-buffer 500 >"$tmp/buf" 2>/dev/null
check "a shuffle buffer keeps the records" cmp -s <(sort "$tmp/buf") "$tmp/all.sorted"
check "and changes their order" bash -c '! cmp -s "$0" "$1"' "$tmp/buf" <(cat_ --epoch 1 2>/dev/null)

# killed after saving its state, resumed: exactly the rest of the epoch
for buffer in 0 300; do
	cat_ --epoch 2 --shuffle-buffer $buffer >"$tmp/full" 2>/dev/null
	rm -f "$tmp/state"
	# kiln itself in the background (not a function: $! must be kiln's pid)
	"$kiln" cat "$ds" --shuffle-seed 11 --epoch 2 --shuffle-buffer $buffer --state-file "$tmp/state" \
		--state-every 700 >"$tmp/part" 2>/dev/null &
	pid=$!
	poll 20 test -s "$tmp/state"
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	n=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["yielded"])' "$tmp/state")
	check "buffer $buffer: the state was saved before the kill ($n records)" test "$n" -gt 0
	check "buffer $buffer: what was written up to the state is the epoch's start" \
		cmp -s <(head -n "$n" "$tmp/part") <(head -n "$n" "$tmp/full")
	cat_ --epoch 2 --shuffle-buffer $buffer --resume "$tmp/state" >"$tmp/rest" 2>"$tmp/rest.err" || { echo "  resume failed:"; head -20 "$tmp/rest.err"; }
	rest_ok() {
		cmp -s "$tmp/rest" <(tail -n +$((n + 1)) "$tmp/full") && return 0
		echo "  after $n of $(wc -l <"$tmp/full") records, the resumed reader wrote $(wc -l <"$tmp/rest"); state: $(cat "$tmp/state")"
		return 1
	}
	check "buffer $buffer: resumed, exactly the rest of the epoch" rest_ok
done

# SIGTERM while blocked on a full pipe: the state is saved after the
# records written, and the exit status says so
rm -f "$tmp/state" "$tmp/pid" "$tmp/rc"
(
	"$kiln" cat "$ds" --shuffle-seed 11 --epoch 2 --state-file "$tmp/state" --state-every 1000000 2>/dev/null &
	echo $! >"$tmp/pid"
	wait $!
	echo $? >"$tmp/rc"
) | (sleep 2; cat >"$tmp/termed") &
reader=$!
poll 10 test -s "$tmp/pid"
sleep 0.5
kill -TERM "$(cat "$tmp/pid")"
wait "$reader"
check "SIGTERM: exit 143" test "$(cat "$tmp/rc")" = 143
n=$($py -c 'import json, sys; print(json.load(open(sys.argv[1]))["yielded"])' "$tmp/state" 2>/dev/null || echo 0)
check "SIGTERM: the state counts every record written ($n)" test "$n" -eq "$(wc -l <"$tmp/termed")" -a "$n" -gt 0
check "SIGTERM: before the end of the epoch" test "$n" -lt "$(wc -l <"$tmp/all.sorted")"

# a state from another reading is refused
check "another epoch's state: exit 2" bash -c '! "$0" cat "$1" --shuffle-seed 11 --epoch 3 --resume "$2" >/dev/null 2>"$3"' \
	"$kiln" "$ds" "$tmp/state" "$tmp/err"
check "  one line naming the epoch" grep -qx "kiln cat: cursor state: epoch is 2, this reader's is 3" "$tmp/err"
check "another world size's state: refused" bash -c '! "$0" cat "$1" --shuffle-seed 11 --epoch 2 --world-size 2 --resume "$2" >/dev/null 2>&1' \
	"$kiln" "$ds" "$tmp/state"

# the state is read strictly, all of it (issue 25): a key twice (also
# escaped), bytes after it (even past the first KiB), negative or huge
# numbers are refused with one line; trailing whitespace is fine
good=$(head -n 1 "$tmp/state")
refused() { # NAME STATE-TEXT EXPECTED-MESSAGE-START
	printf '%s' "$2" >"$tmp/bad"
	if "$kiln" cat "$ds" --shuffle-seed 11 --epoch 2 --resume "$tmp/bad" >"$tmp/bad.out" 2>"$tmp/bad.err"; then
		echo "  taken: ${2:0:300}"
		return 1
	fi
	[ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && grep -q "^kiln cat: $3" "$tmp/bad.err" && [ ! -s "$tmp/bad.out" ] && return 0
	echo "  $(cat "$tmp/bad.err")"
	return 1
}
check "state: a second yielded key is refused" refused dup "${good%\}},\"yielded\":0}" "cursor state: a key appears twice"
check "state: a second yielded key, escaped, is refused" refused dupesc "${good%\}},\"yi\\u0065lded\":0}" \
	"cursor state: a key appears twice"
check "state: bytes after the state are refused" refused trailing "$good x" "cursor state: not one JSON object"
check "state: bytes after the first KiB are read too" refused far "$good$(printf '%*s' 2000 '')x" \
	"cursor state: not one JSON object"
check "state: a file over 4096 bytes is refused" refused big "$good$(printf '%*s' 5000 '')" "--resume .*: more than 4096 bytes"
check "state: yielded -1 is refused" refused neg "${good/\"yielded\":/\"yielded\":-}" "cursor state: yielded must be a whole number"
check "state: yielded 10^30 is refused" refused huge "${good/\"yielded\":/\"yielded\":1000000000000000000000000000000}" \
	"cursor state: yielded must be a whole number"
printf '%s\n\n   \n' "$good" >"$tmp/spaced"
check "state: trailing whitespace is fine" status_is 0 "$kiln" cat "$ds" --shuffle-seed 11 --epoch 2 --resume "$tmp/spaced"

# a temporary state file that a killed kiln cat left (its PID no longer
# runs) is removed at the next save; one of a running process is kept
sh -c 'exit 0' &
dead=$!
wait "$dead"
: >"$tmp/state.tmp-$dead"
: >"$tmp/state.tmp-$$"
"$kiln" cat "$ds" --shuffle-seed 11 --epoch 2 --state-file "$tmp/state" >/dev/null 2>&1
check "a dead process's temporary state file is removed" test ! -e "$tmp/state.tmp-$dead"
check "a running process's is kept" test -e "$tmp/state.tmp-$$"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
