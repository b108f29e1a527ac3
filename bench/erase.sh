#!/usr/bin/env bash
# Erasure cost: one person (user_id bench-subject, planted in 3 records of 3
# runs) erased from a dataset of RECORDS records in RUNS runs (one version
# each; shards.target_bytes sized for about SHARDS_PER_RUN shards per run),
# by `kiln erase` with the token filters (docs/FORMATS.md
# "filters/<hh>/<hash>.bloom": only the shards whose filter may hold the
# person are read) and with KILN_ERASE_NO_FILTER=1 (every shard is read, as
# before filters). Each erasure runs on its own copy of the same data.
# Prints, for both, the seconds of the erasure and of a dry run (finding
# the shards that hold the person, writing nothing), shards, shards read and
# shards rewritten, and ratio = time without filters / time with (above 1:
# the filters help).
# The defaults are the issue's figures: 1,000,000 records, 20 versions,
# 200 shards. The data is built once into bench/out/erase-data-* (kept).
#
# Usage: bench/erase.sh [KILN_BINARY]     (default: <repo>/build/kiln)
# Env:   RECORDS (1000000), RUNS (20), SHARDS_PER_RUN (10)
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
kiln=${1:-$root/build/kiln}
[[ $kiln == /* ]] || kiln=$PWD/$kiln
cd "$root"
[[ -x $kiln ]] || { echo "erase.sh: $kiln is not an executable (build kiln first)" >&2; exit 1; }
records=${RECORDS:-1000000}
runs=${RUNS:-20}
per_run=${SHARDS_PER_RUN:-10}
py=/usr/bin/python3
pipeline=$root/pipelines/user-events.yaml
out=bench/out
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. bench/lib.sh
unset KILN_BRANCH KILN_SPLIT_SALT

data=$root/$out/erase-data-$records-$runs-$per_run
plant() { # SEED: one record of the person
	printf '{"event_id":"00000000-0000-4000-8000-%012d","event_type":"click","occurred_at":"2026-11-01T10:00:00Z","user_id":"bench-subject","consent":true,"device":{"os":"linux"}}\n' "$1"
}
if [[ ! -e $data/ready ]]; then
	echo "building $records records in $runs versions into $data ..." >&2
	rm -rf "$data"
	mkdir -p "$data"
	(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$data/key")
	export KILN_INPUT=$data/in.jsonl KILN_KEY_FILE=$data/key KILN_STORE=file://$data/store KILN_MANIFEST=$data/m.git
	n=$((records / runs))
	for r in $(seq 1 "$runs"); do
		$py bench/gen-user-events.py --records "$n" --seed "$r" --invalid-rate 0 -o "$tmp/run.jsonl"
		case $r in 2 | $((runs / 2)) | $((runs - 1))) plant "$r" >>"$tmp/run.jsonl" ;; esac
		# about per_run shards: a run's curated bytes are about 1.1 times its
		# input's; train takes 80% of them, dev and test one shard each
		target=$(($(stat -c %s "$tmp/run.jsonl") * 22 / (per_run * 20 - 10)))
		cat "$tmp/run.jsonl" >>"$KILN_INPUT"
		"$kiln" run "$pipeline" --set shards.target_bytes="$target" >/dev/null 2>"$tmp/err" ||
			{ cat "$tmp/err" >&2; exit 1; }
	done
	touch "$data/ready"
fi

erase() { # NAME [ENV...]: the erasure on a fresh copy of the data; prints a table row
	local name=$1 t
	shift
	rm -rf "$tmp/copy"
	mkdir -p "$tmp/copy"
	cp -a "$data/store" "$data/m.git" "$tmp/copy/"
	export KILN_KEY_FILE=$data/key KILN_STORE=file://$tmp/copy/store KILN_MANIFEST=$tmp/copy/m.git
	t=$(secs env "$@" "$kiln" erase user-events --subject user_id=bench-subject --pipeline "$pipeline" --json)
	"$kiln" gc --apply --pipeline "$pipeline" >/dev/null 2>&1
	"$kiln" erase user-events --verify --subject user_id=bench-subject --pipeline "$pipeline" >/dev/null 2>&1 ||
		{ echo "erase.sh: $name: the person is still there after the erasure" >&2; exit 1; }
	echo "$t" >"$tmp/t.$name"
}

# A dry run (finding the shards that hold the person, writing nothing) on
# the data as built: its seconds, then shards, read, rewritten.
counts() { # ENV...
	export KILN_STORE=file://$data/store KILN_MANIFEST=$data/m.git KILN_KEY_FILE=$data/key
	secs env "$@" "$kiln" erase user-events --subject user_id=bench-subject --pipeline "$pipeline" --dry-run
	env "$@" "$kiln" erase user-events --subject user_id=bench-subject --pipeline "$pipeline" --dry-run --json |
		$py -c 'import json,sys; r=json.load(sys.stdin); print(r["shards"], r["shards_read"], r["shards_rewritten"] + r["shards_dropped"])'
}

erase filters KILN_BENCH=1
erase no-filters KILN_ERASE_NO_FILTER=1
counts KILN_BENCH=1 >"$tmp/c.filters"
counts KILN_ERASE_NO_FILTER=1 >"$tmp/c.no-filters"
{ read -r df; read -r shards read_f rew_f; } <"$tmp/c.filters"
{ read -r dn; read -r _ read_n rew_n; } <"$tmp/c.no-filters"
tf=$(cat "$tmp/t.filters")
tn=$(cat "$tmp/t.no-filters")
commits=$(git --git-dir="$data/m.git" rev-list --count refs/heads/user-events/main)
printf '\nkiln erase: one person in 3 of %s records, %s versions, %s shards\n' "$records" "$commits" "$shards"
printf '%-12s %10s %12s %8s %12s %16s\n' mode "erase s" "dry run s" shards "shards read" "shards rewritten"
printf '%-12s %10.2f %12.2f %8s %12s %16s\n' filters "$tf" "$df" "$shards" "$read_f" "$rew_f"
printf '%-12s %10.2f %12.2f %8s %12s %16s\n' no-filters "$tn" "$dn" "$shards" "$read_n" "$rew_n"
printf 'ratio (no-filters time / filters time): erase %.1f, dry run %.1f\n' "$(echo "$tn / $tf" | bc -l)" \
	"$(echo "$dn / $df" | bc -l)"
