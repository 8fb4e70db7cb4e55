#!/usr/bin/env bash
# One prepared check of sweepgrok on a GPU machine, at most ~8 minutes on an H200:
#
#   bench_trainer   the one-seed step (paper-1 Z_113, LayerNorm): sweepgrok (train.cuda_graph
#                   off and on, where the config has it) against the eager notebook loop and the
#                   CUDA-graph notebook loop
#   bench_seeds     one trial packing E = 1, 8, 64, 256 seeds: ms per member-step and the ratio
#                   to the float32 floor
#   ray_grid        search_spaces/grids/gpu_smoke.yaml through `sweepgrok launch` (4 trials sharing
#                   the GPU, a quarter each)
#   tests           the fast test tier (-m "not slow") with 8 xdist workers, 1 thread each
#
# The benchmarks run first, so that their numbers are written even if a later part overruns.
# Every part has a time cap (and the whole a budget, GPU_CHECK_BUDGET seconds, default 450); a
# part that fails or overruns is recorded and the next one runs. Everything lands in the output
# folder (at most 8 files): summary.txt (what failed, and the lines `E=1: <r>x the CUDA graph`
# and `E=256: <ms> ms per member-step`), bench.log, bench_trainer.json, bench_seeds.json,
# ray_grid.log, tests.log, tests.xml (JUnit). Exit status 1 when a part did not pass.
#
# Usage:  source benchmarks/device_env.sh && benchmarks/gpu_check.sh [OUTDIR]   (default $OUT)
#         benchmarks/gpu_check.sh --cpu-dry-run [OUTDIR]   (or GPU_CHECK_DRY=1): the same parts
#         on this machine's CPU at tiny sizes (a one-file test tier, a 2-trial CPU grid), to
#         check the script end to end before spending device time.
# Extra benchmark options (e.g. --set train.matmul_precision=high): GPU_CHECK_BENCH_ARGS.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

dry=${GPU_CHECK_DRY:-0}
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
budget=${GPU_CHECK_BUDGET:-450}
read -r -a bench_args <<< "${GPU_CHECK_BENCH_ARGS:-}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1

if [ "$dry" = 1 ]; then
    py=${PYTHON:-.venv/bin/python}
    [ -x "$py" ] || py=python3
    device=cpu
    # Tiny sizes: the same code paths, seconds instead of minutes.
    tiny=(--set task.p=23 --set model.d_model=32 --set model.d_mlp=64)
    trainer_args=(--threads 1 --rounds 2 --steps 1 "${tiny[@]}")
    seeds_args=(--members 1 2 --repeats 2 --steps 1 "${tiny[@]}")
    test_args=(tests/project/test_benchmarks.py)
    caps=(bench_trainer=120 bench_seeds=120 ray_grid=240 tests=240)
else
    py=${PYTHON:-python3}
    device=cuda
    trainer_args=(--threads 1 --rounds 5 --steps 20)
    seeds_args=(--members 1 8 64 256 --repeats 3 --steps 10)
    test_args=(-n 8 tests)
    caps=(bench_trainer=60 bench_seeds=90 ray_grid=90 tests=200)
fi
cap_of() { local kv; for kv in "${caps[@]}"; do [ "${kv%%=*}" = "$1" ] && echo "${kv#*=}"; done; }

start=$SECONDS
results=()  # NAME=RC:SECONDS:CAP for gpu_summary (rc 124 or 137: it ran into its cap)
part() {  # part NAME LOG COMMAND...: run COMMAND capped, output appended to LOG
    local name=$1 log=$2 cap left t0 rc seen
    shift 2
    cap=$(cap_of "$name")
    left=$((budget - (SECONDS - start)))
    ((left < cap)) && cap=$left
    if ((cap < 15)); then
        echo "=== $name: skipped (the ${budget} s budget is spent)" | tee -a "$log"
        results+=("$name=skipped:0:$cap")
        return
    fi
    echo "=== $name (cap ${cap} s): $*" | tee -a "$log"
    seen=$(wc -l < "$log")
    t0=$SECONDS
    # SIGINT first (pytest still writes its report; Python prints where it was), KILL 15 s on.
    timeout -s INT -k 15 "$cap" "$@" >> "$log" 2>&1
    rc=$?
    tail -n +"$((seen + 1))" "$log" | tail -n 15 | sed 's/^/    /'  # this part's last lines
    echo "=== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$log"
    results+=("$name=$rc:$((SECONDS - t0)):$cap")
}

grid=search_spaces/grids/gpu_smoke.yaml
if [ "$dry" = 1 ]; then  # no GPU here: the same grid on CPUs, 2 trials of 40 steps
    grid=$scratch/gpu_smoke_cpu.yaml
    "$py" - "$grid" <<'EOF' || exit 2
import sys, yaml
doc = yaml.safe_load(open("search_spaces/grids/gpu_smoke.yaml"))
doc["base"]["train"].update(max_steps=40, eval_every=20)
doc.update(seeds=[1, 2], resources={"cpu": 1}, max_concurrent=2)
doc["zip"] = [{"model.norm": ["sphere"], "optim.weight_decay": [0.0]}]
yaml.safe_dump(doc, open(sys.argv[1], "w"), sort_keys=False)
EOF
fi

{
    echo "gpu_check: $(date -u +%FT%TZ), dry run: $dry, python: $("$py" -c 'import sys; print(sys.version.split()[0])')"
    command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
} | tee "$dir/bench.log"

part bench_trainer "$dir/bench.log" "$py" -m benchmarks.bench_trainer --device "$device" \
    --cases "paper-1 Z_113, layernorm" --json "$dir/bench_trainer.json" \
    "${trainer_args[@]}" "${bench_args[@]}"
part bench_seeds "$dir/bench.log" "$py" -m benchmarks.bench_seeds --device "$device" \
    --json "$dir/bench_seeds.json" "${seeds_args[@]}" "${bench_args[@]}"
part ray_grid "$dir/ray_grid.log" "$py" -m sweepgrok launch "$grid" \
    --storage "$scratch/sweeps" --fresh
# Tests that import what this Python lacks (test-only packages: duckdb, mlflow, ...) are left
# out, each named in tests.log ("not run: ..."), rather than counted as failures.
mapfile -t unrunnable < <("$py" -m benchmarks.unrunnable tests 2>> "$dir/tests.log")
# One thread per worker (torch reads OMP_NUM_THREADS); the per-test timeout is pyproject's.
part tests "$dir/tests.log" env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 "$py" -m pytest -q \
    -m "not slow" -p no:cacheprovider --continue-on-collection-errors \
    --junitxml="$dir/tests.xml" "${unrunnable[@]}" "${test_args[@]}"

"$py" -m benchmarks.gpu_summary "$dir" --sweep "$scratch/sweeps/gpu_smoke" \
    --elapsed $((SECONDS - start)) "${results[@]/#/--part=}"
for r in "${results[@]}"; do  # exit 1 when a part failed, overran or was skipped
    rc=${r#*=}
    [ "${rc%%:*}" = 0 ] || exit 1
done
