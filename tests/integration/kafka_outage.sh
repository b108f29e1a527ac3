#!/usr/bin/env bash
# SIGTERM during broker outages, at scale (make hostile; docs/STREAMING.md,
# "Signals and exit status"): kafka_ops.sh's "broker gone" scenario, repeated
# with several members of one consumer group and SIGTERM sent at different
# moments. Each round starts a broker (a new mock cluster), MEMBERS `kiln
# run` daemons in one group, commits a first part of the records, then
# SIGKILLs the broker and sends SIGTERM:
#   kill       - at once, the assignments still held (the drain commits
#                nothing new: it needs no broker);
#   lost       - once every member holding partitions has logged that its
#                assignment was lost (session.timeout.ms);
#   failing    - with the store gone: once every holder has failed to
#                land a batch three times (it is in a backoff of 2 s or
#                more), 1 s into that backoff, the broker killed, at once.
#                The first part went to partition 0 only, so the partitions
#                that fail have no lineage entry and are read again from
#                the earliest offset; those records are fetched meanwhile
#                and wait unpolled in librdkafka's queue when the consumer
#                closes: this aborted the run (exit 134, librdkafka's "res
#                != RD_KAFKA_OP_RES_PASS") until kiln set a consume callback;
#   staggered  - one member at once, the next when the first has exited,
#                the rest when the second has: a member that leaves may
#                start a rebalance the others cannot finish without the
#                broker, and then they never see their assignment as lost
#                (seen once: the next member left unclosed after 10 s);
#   failing_lost - with the store gone and batches failing, the broker
#                killed, once every holder has lost its assignment.
# Every member must exit within snapshot.drain_seconds (its watchdog's exit
# 3, or still running then, fails), with 0 (or 2 where a last snapshot
# failed while stopping, as docs/STREAMING.md says). Then the store is put
# back, a new broker gets the same records on the same partitions (the same
# offsets) and more, a `--stop-at-end` run resumes from lineage.json, and
# kafka_check.py finds every record exactly once.
# make hostile (KILN_HOSTILE=1): 5 rounds (each mode once) of 4 members on
# 8 partitions; make check: the failing round of 2 members (kafka_ops.sh
# covers kill and lost with one member).
# Prints each round's exit times.
set -uo pipefail

src=${KILN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$src/tests/integration/lib.sh"
kiln=${KILN:-$src/build/kiln}
py=/usr/bin/python3

need kcat git
[ -x "$kiln" ] || { echo "FAIL: no kiln binary at $kiln (set KILN)"; exit 1; }

if [ "${KILN_HOSTILE:-0}" = 1 ]; then
	members=4 modes=(kill lost failing staggered failing_lost) records=3000
else
	members=2 modes=(failing) records=1000
fi
partitions=$((members * 2))
drain=20 # snapshot.drain_seconds

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}" $(cat "$tmp"/*.pid 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "${KEEP_TMP:-}" ] && { echo "kept $tmp"; return; }
	rm -rf "$tmp"
}
trap cleanup EXIT
(umask 077 && head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$tmp/key")

start_broker() { # NAME: a broker for topic "down"; its pid in $broker, bootstrap in $bs
	"$kiln" broker --partitions "$partitions" --topics down --port-file "$tmp/$1.pf" >"$tmp/$1.broker.out" 2>&1 &
	broker=$!
	pids+=("$broker")
	bs=''
	for _ in $(seq 300); do [ -s "$tmp/$1.pf" ] && break; ms_sleep 100; done
	bs=$(head -1 "$tmp/$1.pf" 2>/dev/null)
	[ -n "$bs" ] || { echo "  the broker did not start"; return 1; }
}
produce() { # PREFIX: PREFIX.<p> to partition p
	local p ok=0
	for p in $(seq 0 $((partitions - 1))); do
		kcat -P -b "$bs" -t down -p "$p" -l "$1.$p" 2>>"$tmp/kcat.err" || ok=1
	done
	return $ok
}
by_partition() { # INPUT PREFIX [FIRST LAST]: the records in turn to PREFIX.<p>, p from FIRST to LAST
	local first=${3:-0} last=${4:-$((partitions - 1))}
	awk -v f="$first" -v n=$((last - first + 1)) -v pre="$2" '{ print > (pre "." (f + (NR - 1) % n)) }' "$1"
	for p in $(seq 0 $((partitions - 1))); do touch "$2.$p"; done
}
committed() { # DATASET
	git --git-dir="$tmp/m.git" show "refs/heads/$1/main:stats.json" 2>/dev/null |
		"$py" -c 'import json,sys; print(json.load(sys.stdin)["records_in"])' 2>/dev/null || echo 0
}
has_committed() { [ "$(committed "$1")" -ge "$2" ]; }
count() { grep -c -- "$2" "$1" 2>/dev/null; } # FILE STRING
holds() { [ "$(count "$1" '"event":"assigned"')" -gt "$(count "$1" '"event":"revoked"')" ]; } # LOG
lost_since() { [ "$(count "$1" '"msg":"the assignment was lost"')" -gt "$2" ]; } # LOG N
all_lost() { # ROUND: every member that held partitions at the kill has lost them since
	local i v
	for i in $(seq 1 "$members"); do
		v=held_$1_$i
		[ "${!v}" = 1 ] || continue
		v=lost0_$1_$i
		lost_since "$tmp/r$1.m$i.log" "${!v}" || return 1
	done
}
failures() { grep -Ec '"event":"(batch|snapshot)_failed"' "$1"; } # LOG
all_failing() { # ROUND: every holder logged 3 failures since the store went (its backoff is 2 s or more)
	local i v
	for i in $(seq 1 "$members"); do
		v=held_$1_$i
		[ "${!v}" = 1 ] || continue
		v=failed0_$1_$i
		[ "$(failures "$tmp/r$1.m$i.log")" -ge $((${!v} + 3)) ] || return 1
	done
}
start_member() { # ROUND MEMBER: `kiln run` in the background; a watcher writes its
	# pid to r<R>.m<I>.pid, then "STATUS MICROSECONDS" to r<R>.m<I>.exit when it exits
	local m=$tmp/r$1.m$2
	(
		"$kiln" run "$tmp/r$1.yaml" >"$m.out" 2>"$m.log" &
		echo $! >"$m.pid"
		rc=0
		wait $! || rc=$?
		echo "$rc ${EPOCHREALTIME/./}" >"$m.exit"
	) &
	pids+=($!)
	poll 10 test -s "$m.pid"
}
term() { # ROUND MEMBER: SIGTERM, and when (microseconds)
	echo "${EPOCHREALTIME/./}" >"$tmp/r$1.m$2.term"
	kill -TERM "$(cat "$tmp/r$1.m$2.pid")" 2>/dev/null
}
gone() { # ROUND MEMBER: it exited; killed if it outlived drain_seconds + 10 s after SIGTERM
	local m=$tmp/r$1.m$2
	[ -s "$m.exit" ] && return 0
	[ $((${EPOCHREALTIME/./} - $(cat "$m.term"))) -gt $(((drain + 10) * 1000000)) ] &&
		kill -KILL "$(cat "$m.pid")" 2>/dev/null
	return 1
}
all_gone() { # ROUND
	local i
	for i in $(seq 1 "$members"); do gone "$1" "$i" || return 1; done
}

times_all=()
for r in $(seq 1 "${#modes[@]}"); do
	mode=${modes[$((r - 1))]}
	ds=out$r st=$tmp/store$r
	echo "round $r: $mode"
	start_broker "r$r" || { check "round $r ($mode): a broker" false; continue; }
	cat >"$tmp/r$r.yaml" <<EOF
dataset: $ds
contract: $src/contracts/user-events.yaml
source:
  kind: kafka
  brokers: $bs
  topics: [down]
  group: g-down-$r
  batch: {records: 100, ms: 50}
  options: {session.timeout.ms: "3000", heartbeat.interval.ms: "500"}
pseudonymise: {key_file: $tmp/key}
split: {key: user_id, salt: s1, ratios: {train: 0.8, dev: 0.1, test: 0.1}}
store: {url: file://$st}
manifest: {repo: $tmp/m.git}
snapshot: {records: 50, seconds: 1, drain_seconds: $drain}
EOF
	"$py" "$src/bench/gen-user-events.py" --records "$records" --seed $((50 + r)) --invalid-rate 0.03 -o "$tmp/r$r.jsonl"
	a=$((records / 2)) b=$((records / 4))
	head -n "$a" "$tmp/r$r.jsonl" >"$tmp/r$r.a.jsonl"
	sed -n "$((a + 1)),$((a + b))p" "$tmp/r$r.jsonl" >"$tmp/r$r.b.jsonl"
	tail -n +$((a + b + 1)) "$tmp/r$r.jsonl" >"$tmp/r$r.c.jsonl"
	case $mode in
	failing*)
		# the first part on partition 0 only: the others have no lineage
		# entry when their first records fail to land, and are read again
		# from the earliest offset
		by_partition "$tmp/r$r.a.jsonl" "$tmp/r$r.a" 0 0
		by_partition "$tmp/r$r.b.jsonl" "$tmp/r$r.b" 1 $((partitions - 1))
		;;
	*)
		by_partition "$tmp/r$r.a.jsonl" "$tmp/r$r.a"
		by_partition "$tmp/r$r.b.jsonl" "$tmp/r$r.b"
		;;
	esac
	by_partition "$tmp/r$r.c.jsonl" "$tmp/r$r.c"

	check "round $r ($mode): kcat produced the first part" produce "$tmp/r$r.a"
	for i in $(seq 1 "$members"); do start_member "$r" "$i"; done
	check "round $r ($mode): the group committed the first part" poll 120 has_committed "$ds" "$a"
	for i in $(seq 1 "$members"); do
		eval "lost0_${r}_$i=$(count "$tmp/r$r.m$i.log" '"msg":"the assignment was lost"')"
		eval "failed0_${r}_$i=$(failures "$tmp/r$r.m$i.log")"
		if holds "$tmp/r$r.m$i.log"; then eval "held_${r}_$i=1"; else eval "held_${r}_$i=0"; fi
	done
	case $mode in
	failing | failing_lost)
		mv "$st" "$st.away" && : >"$st" # every write now fails
		check "round $r ($mode): kcat produced the second part" produce "$tmp/r$r.b"
		check "round $r ($mode): every holder fails to land it, three times" poll 90 all_failing "$r"
		# into the backoff: the records to read again are fetched meanwhile
		# and wait in librdkafka's queue, unpolled, when the consumer closes
		# (which aborted the run before it set a consume callback)
		ms_sleep 1000
		;;
	esac
	kill -KILL "$broker"
	wait "$broker" 2>/dev/null
	case $mode in
	kill | failing)
		for i in $(seq 1 "$members"); do term "$r" "$i"; done
		;;
	lost | failing_lost)
		check "round $r ($mode): every holder loses its assignment" poll 60 all_lost "$r"
		for i in $(seq 1 "$members"); do term "$r" "$i"; done
		;;
	staggered)
		# one member at once, the next once it is gone, then the rest: a
		# member that leaves starts a rebalance the others cannot finish
		term "$r" 1
		until gone "$r" 1; do ms_sleep 50; done
		term "$r" 2
		until gone "$r" 2; do ms_sleep 50; done
		for i in $(seq 3 "$members"); do term "$r" "$i"; done
		;;
	esac
	until all_gone "$r"; do ms_sleep 50; done
	exits_ok=true times=()
	for i in $(seq 1 "$members"); do
		read -r rc at <"$tmp/r$r.m$i.exit"
		us=$((at - $(cat "$tmp/r$r.m$i.term")))
		secs=$(printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000)))
		times+=("$secs") times_all+=("$secs")
		case "$rc:$mode" in
		0:*) ;;
		2:failing | 2:failing_lost)
			grep -q '"level":"error","event":"snapshot_failed"' "$tmp/r$r.m$i.log" ||
				{ exits_ok=false; echo "  member $i: exit 2 without a last failed snapshot"; }
			;;
		*)
			exits_ok=false
			echo "  member $i: exit $rc after $secs s"
			tail -3 "$tmp/r$r.m$i.log" | sed 's/^/  | /'
			;;
		esac
		[ "$us" -le $((drain * 1000000)) ] || {
			exits_ok=false
			echo "  member $i: exited $secs s after SIGTERM"
		}
	done
	echo "  round $r ($mode): $members members exited ${times[*]} s after SIGTERM"
	check "round $r ($mode): every member exits within drain_seconds ($drain s) with 0 (or 2 after a failed last snapshot)" $exits_ok

	# the store back, the same records at the same offsets of a new broker, and the rest
	if [ -f "$st" ]; then rm "$st" && mv "$st.away" "$st"; fi
	start_broker "r$r.back" || { check "round $r ($mode): a broker again" false; continue; }
	ok=true
	for part in a b c; do produce "$tmp/r$r.$part" || ok=false; done
	check "round $r ($mode): kcat produced the same records again, then the rest" $ok
	check "round $r ($mode): a new run resumes and exits 0" status_is 0 timeout 180 "$kiln" run "$tmp/r$r.yaml" \
		--stop-at-end --set "source.brokers=$bs"
	cp "$tmp/out" "$tmp/r$r.resume.out"
	cp "$tmp/err" "$tmp/r$r.resume.err"
	check "round $r ($mode): every record exactly once" "$py" "$src/tests/integration/kafka_check.py" --repo "$tmp/m.git" \
		--dataset "$ds" --store "$st" --topic down "$tmp/r$r.a.jsonl" "$tmp/r$r.b.jsonl" "$tmp/r$r.c.jsonl"
	kill -KILL "$broker" 2>/dev/null
	wait "$broker" 2>/dev/null
done

echo "  ${#modes[@]} rounds, $((members * ${#modes[@]})) SIGTERMs: exit after $("$py" -c '
import sys
v = sorted(float(x) for x in sys.argv[1:])
print("median %.1f s, max %.1f s" % (v[len(v) // 2], v[-1]) if v else "nothing")' "${times_all[@]}") (bound $drain s)"
check "git fsck" git --git-dir "$tmp/m.git" fsck --strict --no-dangling --no-progress
check "no personal data in any log" pii_scan_logs

echo "kafka_outage: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
