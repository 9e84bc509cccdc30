#!/bin/bash
# Reference runs for bench/run_all.py --import-ref-runs: each case leaves R/<case>/{log.txt (ends with
# /usr/bin/time -v output), rc, start, end, out/}. Run in the background; it takes over an hour.
# CASES="stats_1m ranks8" PARALLEL=1 bench/run_reference.sh: some cases, at once (one core each).
set -u
cd "$(dirname "$0")/.."
R=${R:-/var/tmp/msprobe_ref_runs}
REF=${REF:-${MSPROBE_REF:?set MSPROBE_REF (or REF) to the reference msprobe executable}}
# multi-rank pair: 8 ranks x 25k entries
M=/var/tmp/msprobe_bench_ranks8
if [ ! -f $M/compare.json ]; then
  rm -rf $M; mkdir -p $M/npu/step0 $M/bench/step0
  for r in 0 1 2 3 4 5 6 7; do
    python3 bench/gen_stats.py --entries 25000 --seed $((r+1)) --out $M/tmp$r > /dev/null
    mv $M/tmp$r/npu/step0/rank $M/npu/step0/rank$r; mv $M/tmp$r/bench/step0/rank $M/bench/step0/rank$r; rm -rf $M/tmp$r
  done
  printf '{"npu_path": "%s", "bench_path": "%s", "is_print_compare_log": true}\n' $M/npu/step0 $M/bench/step0 > $M/compare.json
fi
T=/var/tmp/msprobe_bench_tensors_2g
if [ ! -f $T/compare.json ]; then python3 bench/gen_tensors.py --gb 2 --out $T > $R/gen_tensors_2g.log 2>&1; fi
run() {  # case compare.json
  local c=$1; rm -rf $R/$c; mkdir -p $R/$c
  date -u +%FT%TZ > $R/$c/start
  ( cd $R/$c && /usr/bin/time -v $REF -f pytorch compare -i $2 -o $R/$c/out -s > $R/$c/log.txt 2>&1; echo $? > $R/$c/rc )
  date -u +%FT%TZ > $R/$c/end
}
declare -A INPUT=([tensor_2g]=$T/compare.json [ranks8]=$M/compare.json
                  [stats_1m]=/var/tmp/msprobe_bench_stats_1m/compare.json [stats_200k]=/var/tmp/msprobe_bench_stats_200k/compare.json)
# CASES picks and orders the cases (default: all, one after the other); PARALLEL=1 runs them at once
for c in ${CASES:-tensor_2g ranks8 stats_1m stats_200k}; do
  if [ "${PARALLEL:-0}" = 1 ]; then run "$c" "${INPUT[$c]}" & else run "$c" "${INPUT[$c]}"; fi
done
wait
echo done > $R/ALLDONE
