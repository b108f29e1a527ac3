#!/usr/bin/env bash
# The directory source's long-running mode (docs/PIPELINES.md, "Sources: a
# directory"): `kiln run` without --stop-at-end runs until SIGTERM and
# picks up files as they arrive, written aside as dot-files and renamed in
# (inotify IN_MOVED_TO), one written in place slowly (read only once it is
# closed, IN_CLOSE_WRITE: never half of it), and one hard-linked in (no
# event: the rescan every source.poll_ms finds it). POST /v1/snapshot (kiln
# snapshot) commits them, SIGTERM drains and exits 0, and
# tests/integration/directory_check.py finds every record curated or
# quarantined exactly once. Then: source.done while running
# (snapshot.seconds commits, the files move); kill -9 at random points
# while files arrive, several rounds, and a --stop-at-end run at the end:
# every record once. No personal value reaches a log.
# Needs git, gzip, zstd, curl and Debian's python3-zstandard; skips (exit 77)
# without them.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3
gen=$src/bench/gen-user-events.py
checker=$src/tests/integration/directory_check.py
pipeline=$src/pipelines/user-events-dir.yaml
ref=refs/heads/user-events/main

for tool in git gzip zstd curl; do
	command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (run scripts/bootstrap)"; exit 77; }
done
need_py zstandard
need_kiln

tmp=$(mktemp -d)
daemon=
cleanup() { [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT; [ -n "${KILN_IT_KEEP:-}" ] && trap - EXIT && echo "tmp: $tmp"
unset KILN_BRANCH KILN_SPLIT_SALT KILN_INPUT
limit=16384
(umask 077 && printf '%064x\n' 0x5eed1e55 >"$tmp/hmac.key")
export KILN_KEY_FILE=$tmp/hmac.key

world() { # NAME: a folder, store and manifest of its own
	mkdir -p "$tmp/$1/in"
	export KILN_INPUT_DIR=$tmp/$1/in KILN_STORE=file://$tmp/$1/store KILN_MANIFEST=$tmp/$1/m.git
	w=$tmp/$1 files=() total=0
}

gen_aside() { # NAME SEED RECORDS [gz|zst]: generated into $w as .NAME[.gz|.zst]; prints the final name
	local name=$1 seed=$2 n=$3 z=${4:-} final=$1
	"$py" "$gen" --records "$n" --invalid-rate 0.05 --seed "$seed" --max-record-bytes "$limit" \
		-o "$w/.$name" --expect "$w/$name.expect"
	case $z in
	gz) gzip -c "$w/.$name" >"$w/.$name.gz" && rm "$w/.$name" && final=$name.gz ;;
	zst) zstd -q --rm "$w/.$name" -o "$w/.$name.zst" && final=$name.zst ;;
	esac
	echo "$final"
}

gen_file() { # NAME SEED RECORDS [gz|zst]: written aside in the folder (a dot-file), renamed into place
	local final
	final=$(gen_aside "$@") || return 1
	mv "$w/.$final" "$w/in/.$final"
	mv "$w/in/.$final" "$w/in/$final"
	files+=("$final") total=$((total + $3))
}

slow_file() { # NAME SEED RECORDS: written in place in 12 pieces, 150 ms apart (source.poll_ms is 400)
	gen_aside "$1" "$2" "$3" >/dev/null || return 1
	"$py" - "$w/.$1" "$w/in/$1" <<'PY'
import sys, time
data = open(sys.argv[1], "rb").read()
step = len(data) // 12 + 1
with open(sys.argv[2], "wb") as out:
    for at in range(0, len(data), step):
        out.write(data[at:at + step])  # cut anywhere, mid-line too
        out.flush()
        time.sleep(0.15)
PY
	files+=("$1") total=$((total + $3))
}

topic_of() { # FILE NAME: its topic, encoded by docs/FORMATS.md's rule
	"$py" -c 'import os, sys
n = os.fsencode(sys.argv[1])
print("user-events=" + "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "._-") else "=%02X" % b for b in n))' "$1"
}

checked() { # LABEL [DIR]: directory_check.py over every file of $files (in DIR, default the folder)
	local label=$1 dir=${2:-$w/in} args=() f base
	for f in "${files[@]}"; do
		base=${f%.gz}
		base=${base%.zst}
		args+=(--file "$(topic_of "$f")" "$w/$base.expect" "$dir/$f")
	done
	"$py" "$checker" --store "$w/store" --manifest "$w/m.git" --dataset user-events "${args[@]}" \
		>"$tmp/$label.check" 2>&1 && return 0
	sed 's/^/  | /' "$tmp/$label.check" | tail -20
	return 1
}

start() { # LOG ARGS...: kiln run in the background ($daemon), stderr in $tmp/LOG.log
	"$kiln" run "$pipeline" --set source.max_record_bytes="$limit" "${@:2}" >"$tmp/$1.out" 2>"$tmp/$1.log" &
	daemon=$!
}

stop() { # SIGTERM: the drain; the exit status in $rc
	rc=0
	kill -TERM "$daemon"
	wait "$daemon" || rc=$?
	daemon=
}

port_of() { # LOG: the control listener's port, once it says it listens
	grep -o '"event":"listening"[^}]*"port":[0-9]*' "$tmp/$1.log" 2>/dev/null | grep -o '[0-9]*$'
}

records_in() { # the daemon's kiln_records_in_total is $1
	curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics" 2>/dev/null &&
		grep -qx "kiln_records_in_total $1" "$tmp/metrics"
}

tip() { git --git-dir="$w/m.git" rev-parse -q --verify "$ref" 2>/dev/null; }
lineage_next() { # TOPIC: its entry's next at the tip
	git --git-dir="$w/m.git" show "$ref:lineage.json" | "$py" -c 'import json, sys
doc = json.load(sys.stdin)
entries = doc["partitions"]
print(next((e["next"] for e in entries if e["topic"] == sys.argv[1]), -1))' "$1"
}

# ---- files arrive while it runs; kiln snapshot commits them; SIGTERM drains
world s
gen_file s1.jsonl 1 1500
start s --set metrics.listen=127.0.0.1:0 --set snapshot.records=0 --set snapshot.seconds=3600 \
	--set source.poll_ms=400
port=
poll 20 sh -c "grep -q '\"event\":\"listening\"' '$tmp/s.log'"
port=$(port_of s)
check "the listener announced its port" test -n "$port"
check "it read the file that was there (within 20 s)" poll 20 records_in 1500
check "... and committed nothing yet (snapshot.seconds is an hour)" test -z "$(tip)"
gen_file s2.jsonl 2 1200 gz
gen_file s3.jsonl 3 900 zst
slow_file s4.jsonl 4 1000
check "it read the files that arrived, the slow one whole (within 20 s)" poll 20 records_in 4600
check "kiln snapshot exits 0" status_is 0 "$kiln" snapshot "127.0.0.1:$port"
check "kiln snapshot committed" test -n "$(tip)"
check "the slow file's entry holds all its 1000 lines" test "$(lineage_next user-events=s4.jsonl)" = 1000
check "snapshot 1 is checked" checked s1
gen_file s5.jsonl 5 800
check "it read the file that arrived after the snapshot" poll 20 records_in 5400
# a hard link makes no event of the watched kinds: the rescan finds it
gen_aside s6.jsonl 6 600 >/dev/null && ln "$w/.s6.jsonl" "$w/in/s6.jsonl" && files+=(s6.jsonl)
check "the rescan (source.poll_ms) found a file no event named" poll 20 records_in 6000
c1=$(tip)
stop
check "SIGTERM: drains and exits 0" test "$rc" = 0
check "the drain committed the last files" test "$(tip)" != "$c1"
check "it says the records and files of the run" grep -qF "+6000 records" "$tmp/s.out"
check "... from 6 files" grep -qF "from 6 files of $w/in" "$tmp/s.out"
check "no file was reported changed" test "$(grep -c file_changed "$tmp/s.log")" = 0
check "the run is checked: every record once" checked s2
check "a --stop-at-end run after it has nothing new" status_is 0 "$kiln" run "$pipeline" --stop-at-end \
	--set source.max_record_bytes="$limit"
check "... and says so" grep -qF "nothing new in $w/in" "$tmp/out"

# ---- source.done while running: snapshot.seconds commits, the files move
world d
start d --set source.done=done --set snapshot.seconds=1 --set source.poll_ms=200
for i in 1 2 3; do gen_file "d$i.jsonl" $((10 + i)) 700; ms_sleep 300; done
gen_file d4.jsonl 14 500 gz
moved() { [ "$(find "$w/in/done" -type f 2>/dev/null | wc -l)" = 4 ]; }
check "done: the 4 files were committed and moved (within 20 s)" poll 20 moved
check "done: none is left in the folder" test -z "$(find "$w/in" -maxdepth 1 -type f)"
stop
check "done: SIGTERM exits 0" test "$rc" = 0
check "done: every record once" checked d "$w/in/done"

# ---- kill -9 at random points while files arrive, then --stop-at-end
world k
killed=0
for round in 1 2 3 4 5 6; do
	start "k$round" --set snapshot.seconds=1 --set snapshot.records=2000 --set source.poll_ms=100
	gen_file "k$round-a.jsonl" $((100 + 3 * round)) 1500
	ms_sleep $((RANDOM % 400))
	gen_file "k$round-b.jsonl" $((101 + 3 * round)) 1000 gz
	ms_sleep $((RANDOM % 1500))
	gen_file "k$round-c.jsonl" $((102 + 3 * round)) 800
	ms_sleep $((RANDOM % 800))
	kill -9 "$daemon" 2>/dev/null && killed=$((killed + 1))
	wait "$daemon" 2>/dev/null
	daemon=
done
echo "  (kill -9 hit $killed of 6 runs)"
check "the --stop-at-end run after the kills exits 0" status_is 0 "$kiln" run "$pipeline" --stop-at-end \
	--set source.max_record_bytes="$limit"
check "after the kills every record is curated or quarantined once" checked k
check "the branch counts every record once" \
	test "$(git --git-dir="$w/m.git" show "$ref:stats.json" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["records_in"])')" = "$total"

check "no personal value in any log" pii_scan_logs

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
