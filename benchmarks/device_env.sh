# Source at the start of a command on a GPU machine without network whose Python has torch but
# not Ray, Optuna or pydantic (made here by benchmarks/make_device_carry.sh, carried as
# .devcarry/):  source benchmarks/device_env.sh || exit
#
# Installs the wheels and the pruned Ray into $SWEEPGROK_SITE (default /tmp/site), puts it and
# this checkout first on PYTHONPATH (sweepgrok runs from source), adds `sweepgrok` and `ray`
# commands, and checks that everything a sweep imports imports. Returns non-zero (and says why)
# when something is missing. Sourced, so it sets no shell options of its own.

_sg_env() {
    local root site py bin name
    root=$(pwd)
    site=${SWEEPGROK_SITE:-/tmp/site}
    py=$(command -v python3) || { echo "device_env: no python3 on PATH" >&2; return 1; }
    if [ ! -d "$root/.devcarry/wheels" ] || [ ! -f "$root/.devcarry/ray.tar.xz" ]; then
        echo "device_env: $root/.devcarry is missing or incomplete: run" \
             "benchmarks/make_device_carry.sh here and carry .devcarry" >&2
        return 1
    fi
    mkdir -p "$site" || return 1
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --disable-pip-version-check --target "$site" "$root"/.devcarry/wheels/*.whl || {
        echo "device_env: pip could not install .devcarry/wheels into $site" >&2; return 1; }
    # tar -J needs the xz program, which a slim image may lack; Python's lzma does the same.
    if command -v xz > /dev/null; then
        tar -xJf "$root/.devcarry/ray.tar.xz" -C "$site"
    else
        "$py" -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2], filter="data")' "$root/.devcarry/ray.tar.xz" "$site"
    fi || { echo "device_env: could not unpack .devcarry/ray.tar.xz into $site" >&2; return 1; }

    export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}"
    export PATH="$site/bin:$PATH"
    export RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1

    # Console scripts of what is not pip-installed: Ray's CLI (`ray start`) and sweepgrok's.
    # Tests call them beside the interpreter (Path(sys.executable).parent / "sweepgrok"): put
    # them there too when that folder lacks them and is writable (a bare, throwaway machine).
    bin=$("$py" -c 'import sys, os; print(os.path.dirname(sys.executable))')
    mkdir -p "$site/bin"
    for name in ray sweepgrok; do
        _sg_script "$py" "$name" > "$site/bin/$name" && chmod +x "$site/bin/$name"
        if [ ! -e "$bin/$name" ] && [ -w "$bin" ]; then
            cp "$site/bin/$name" "$bin/$name"
        fi
    done

    "$py" -c 'import ray.tune, optuna, pydantic, sweepgrok, sweepgrok.tune.grid, torch
print(f"device_env: ray {ray.__version__}, optuna {optuna.__version__}, pydantic "
      f"{pydantic.VERSION}, torch {torch.__version__}, cuda {torch.cuda.is_available()}",
      f"({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "")' || {
        echo "device_env: an import failed (PYTHONPATH=$PYTHONPATH)" >&2; return 1; }
}

_sg_script() {  # a console script: python $1 running entry point $2 (ray or sweepgrok)
    local entry
    case $2 in
        ray) entry="from ray.scripts.scripts import main" ;;
        sweepgrok) entry="from sweepgrok.cli import app as main" ;;
    esac
    printf '#!%s\nimport sys\n%s\nsys.exit(main())\n' "$1" "$entry"
}

_sg_env
