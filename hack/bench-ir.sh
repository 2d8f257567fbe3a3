#!/usr/bin/env bash
# bench-ir.sh: the instructions redis-server executes per task (Ir, counted by
# valgrind's callgrind, user space only) for bench rows, dtq and its peer side
# by side. Unlike CPU time these counts are the same on every machine and do
# not move with the load, so a change to a script shows as a number that
# repeats (docs/benchmarks.md, "Instructions per task").
#
#   hack/bench-ir.sh ['Submission/keyed'] [tasks]
#
# Each side runs twice on one fresh redis-server under callgrind: once with
# tasks/4 tasks to warm it (scripts loaded, tables grown), then, counted, with
# tasks tasks (the drain rows: 20,000 tasks each time, submitted and drained); the bench flushes Redis before each run, so the count includes
# flushing the warm-up's keys (a few percent). Redis runs with the
# stream-node-max-entries docs/operations.md recommends, as the bench's own
# redis-server does (20 since 45f0af6; before, Redis's default 100). Needs valgrind (installed with
# apt when missing) and redis-server (make redis).
set -euo pipefail
cd "$(dirname "$0")/.."
row=${1:-Submission/keyed}
tasks=${2:-16000}
if ! command -v valgrind >/dev/null; then
	echo "bench-ir: installing valgrind with apt" >&2
	{ apt-get install -y valgrind || sudo apt-get install -y valgrind; } >/dev/null ||
		{ echo "bench-ir: valgrind is missing and apt could not install it" >&2; exit 1; }
fi
command -v redis-server >/dev/null || { echo "bench-ir: redis-server missing: run make redis" >&2; exit 1; }
counted=$tasks
case $row in Workers/*) counted=20000 ;; esac # the drain rows run 20,000 tasks whatever -tasks says
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd test/bench && go build -o "$work/bench" .)
printf '%-10s %-40s %12s\n' side row "Ir/task"
for side in dtq peer; do
	port=$((20000 + RANDOM % 20000))
	valgrind --tool=callgrind --callgrind-out-file="$work/cg.$side.%p" \
		redis-server --port "$port" --save '' --appendonly no --stream-node-max-entries 20 >"$work/vg.$side.log" 2>&1 &
	vg=$!
	for _ in $(seq 1 150); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
	"$work/bench" -addr "127.0.0.1:$port" -run "$row" -only "$side" -tasks $((tasks / 4)) >/dev/null
	callgrind_control -z "$vg" >/dev/null 2>&1
	"$work/bench" -addr "127.0.0.1:$port" -run "$row" -only "$side" -tasks "$tasks" >/dev/null
	callgrind_control -d "$vg" >/dev/null 2>&1
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "$vg" || true
	total=$(callgrind_annotate "$(ls "$work"/cg."$side".*.1)" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
	printf '%-10s %-40s %12d\n' "$side" "$row" $((total / counted))
done
