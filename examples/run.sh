#!/usr/bin/env bash
# Run the documented workflow on the example dumps shipped with the repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/pytorch_mlp_bug_stat"
msprobe -f pytorch compare -i ./compare.json -o ./compare_result/accuracy_compare -s
cd "$here/mindspore_L0_statistics_diff"
msprobe -f mindspore compare -i ./compare.json -o ./compare_result/accuracy_compare -s
