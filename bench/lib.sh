# shellcheck shell=bash disable=SC2154 # root, kiln, py and tmp are set by the caller
# Shared by the benchmarks: `. bench/lib.sh` after setting root, kiln, py
# and tmp (secs writes $tmp/err).

# bench_version DIR RECORDS SHARD [sign]: a promoted user-events version v1
# of RECORDS generated records in shards of SHARD (shards.target_bytes),
# built once into DIR (kept between runs: DIR/ready), signed with
# DIR/sign.key when the fourth argument is "sign". Exports KILN_INPUT,
# KILN_KEY_FILE, KILN_STORE (file://DIR/store) and KILN_MANIFEST (DIR/m.git).
bench_version() {
	local data=$1 records=$2 shard=$3 sign=()
	export KILN_INPUT=$data/in.jsonl KILN_KEY_FILE=$data/key KILN_STORE=file://$data/store KILN_MANIFEST=$data/m.git
	[[ -e $data/ready ]] && return 0
	echo "building the bench version into $data ..." >&2
	rm -rf "$data"
	mkdir -p "$data"
	(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$data/key")
	$py "$root/bench/gen-user-events.py" --records "$records" --seed 1 -o "$KILN_INPUT"
	"$kiln" run "$root/pipelines/user-events.yaml" --set shards.target_bytes="$shard" >/dev/null
	if [[ ${4:-} == sign ]]; then
		"$kiln" keygen --out "$data/sign.key" >/dev/null
		sign=(--set manifest.signing_key="$data/sign.key")
	fi
	"$kiln" promote user-events@main --pipeline "$root/pipelines/user-events.yaml" "${sign[@]}" \
		--set promote.min_records.train=1 --set promote.min_records.dev=0 --set promote.min_records.test=0 \
		--set promote.ratio_tolerance=1 --set promote.max_quarantine_rate=1 >/dev/null
	touch "$data/ready"
}

secs() { # COMMAND...: seconds it took (stdout and stderr dropped; a failure stops the bench)
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>"$tmp/err" || { echo "$(basename "$0"): failed: $*" >&2; cat "$tmp/err" >&2; exit 1; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
