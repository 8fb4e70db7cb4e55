#!/usr/bin/env bash
# Paper 1's headline on one GPU machine: search_spaces/grids/paper1_headline_gpu.yaml (LayerNorm,
# RMSNorm and the sphere at weight decay 1.0, 10 packed seeds each, one commit, one evaluation
# schedule), then its report. It needs ~12-13 minutes of GPU time on an H200 (the LayerNorm arm
# alone took 353 s there), more than one 10-minute device call: the sweep stops at the time cap
# with Ctrl-C's contract (every evaluation kept), and the next call goes on with --resume when
# the sweep folder is carried back as .devruns/ (git-ignored).
#
#   call 1:  source benchmarks/device_env.sh && benchmarks/paper1_headline.sh [OUTDIR]
#   here:    mkdir -p .devruns && tar -xJf <files_at>/paper1_headline_gpu.tar.xz -C .devruns
#   call 2:  the same command, carrying .devcarry and .devruns
#
# Output (OUTDIR, default $OUT): launch.log, status.txt (what finished), report/ (sweepgrok
# report's runs.csv, groups, report.md and figures, interim while runs are unfinished) and
# paper1_headline_gpu.tar.xz (the sweep folder, to carry back). Exit status: launch's (0 when
# every run ended; 1 or 130 when the cap stopped it: run it again).
#
# PAPER1_CAP: seconds the sweep may run in this call (default 480, leaving time for the report
# and the transfer within a 600-second call). --cpu-dry-run: the same steps on this machine's
# CPU at a tiny size (2 seeds, 200 steps), to check the script before spending device time.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

dry=0
if [ "${1:-}" = "--cpu-dry-run" ]; then
    dry=1
    shift
fi
dir=${1:-${OUT:-}}
if [ -z "$dir" ]; then
    echo "usage: $0 [--cpu-dry-run] OUTDIR  (or set OUT)" >&2
    exit 2
fi
mkdir -p "$dir" || exit 2
dir=$(cd "$dir" && pwd)
cap=${PAPER1_CAP:-480}
py=${PYTHON:-python3}
grid=search_spaces/grids/paper1_headline_gpu.yaml
storage=.devruns
name=paper1_headline_gpu
export RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1

if [ "$dry" = 1 ]; then  # no GPU here: the same grid, tiny, on one CPU
    py=${PYTHON:-.venv/bin/python}
    storage=$(mktemp -d)
    trap 'rm -rf "$storage"' EXIT
    grid=$storage/paper1_headline_cpu.yaml
    "$py" - "$grid" <<'PY' || exit 2
import sys, yaml
doc = yaml.safe_load(open("search_spaces/grids/paper1_headline_gpu.yaml"))
doc["base"]["task"]["p"] = 23
doc["base"]["model"].update(d_model=32, d_mlp=64)
doc["base"]["train"].update(max_steps=200, eval_every=50)
doc.update(seeds=[1, 2], seeds_per_trial=2, resources={"cpu": 1})
yaml.safe_dump(doc, open(sys.argv[1], "w"), sort_keys=False)
PY
fi

resume=--fresh
[ -d "$storage/$name" ] && resume=--resume  # a folder carried back from the last call
echo "paper1_headline: $(date -u +%FT%TZ), $resume, cap ${cap} s, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee "$dir/launch.log"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$dir/launch.log"
# SIGINT is Ctrl-C: the sweep keeps every evaluation and says how to continue.
timeout -s INT -k 60 "$cap" "$py" -m sweepgrok launch "$grid" --storage "$storage" "$resume" \
    >> "$dir/launch.log" 2>&1
rc=$?
echo "=== launch: exit $rc" | tee -a "$dir/launch.log"
"$py" -m sweepgrok status "$storage/$name" > "$dir/status.txt" 2>&1
"$py" -m sweepgrok report "$storage/$name" --by model.norm --baseline model.norm=layernorm \
    --censor-interrupted --out "$dir/report" >> "$dir/launch.log" 2>&1 \
    || echo "=== report: failed (see launch.log)" | tee -a "$dir/launch.log"
tar -cJf "$dir/$name.tar.xz" -C "$storage" "$name"
tail -n 5 "$dir/status.txt"
exit "$rc"
