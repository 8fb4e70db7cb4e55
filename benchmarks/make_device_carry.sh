#!/usr/bin/env bash
# Fill .devcarry/ (git-ignored) with what a GPU machine whose Python 3.12 image has torch,
# numpy, pandas, pyarrow, scipy, matplotlib, seaborn, typer, rich and pyyaml, but not Ray,
# Optuna or pydantic, needs to run sweepgrok with no network (benchmarks/device_env.sh
# installs it there):
#
#   .devcarry/wheels/*.whl   cp312 manylinux x86_64 wheels of every missing package, each at the
#                            version this checkout's .venv has (one version of each: pip refuses
#                            two in one --no-deps install)
#   .devcarry/ray.tar.xz     Ray's cp312 wheel unpacked without the parts a Tune sweep on one
#                            machine never loads (Java jars, RLlib, the dashboard's web client),
#                            packed with xz: the whole wheel (79 MB) is over a 64 MiB carry.
#
# Run from anywhere: benchmarks/make_device_carry.sh  (PY=... to read versions from another venv)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEST=.devcarry
LIMIT_MIB=45

# Missing on the device image: sweepgrok's Ray Tune / Optuna / pydantic dependencies and their
# transitive requirements that the image lacks (Requires-Dist of each wheel, extras default and
# tune, compared with the image's package list). typing-extensions and packaging are on the image
# but may be older than pydantic-core (>= 4.14) and Ray (packaging >= 24.2) need; the newer ones
# shadow them on PYTHONPATH. ray[default]'s dashboard stack is left out: a sweep runs without it.
WHEELS=(
    optuna alembic sqlalchemy mako colorlog
    pydantic pydantic-core annotated-types typing-inspection typing-extensions
    jsonschema jsonschema-specifications referencing rpds-py
    tensorboardx packaging
)
# Unused by a one-machine Tune sweep, and big: Java workers, RLlib, the dashboard's JS build.
RAY_PRUNE=(ray/jars ray/rllib ray/dashboard/client)

version() {  # the installed version of distribution $1 in $PY's environment
    "$PY" -c 'import sys; from importlib.metadata import version; print(version(sys.argv[1]))' "$1"
}

PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux1_x86_64; do
    PLATFORMS+=(--platform "$p")
done
download() {  # download NAME==VERSION ... into $1 (cp312 binary wheels, no dependencies)
    local dir=$1
    shift
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${PLATFORMS[@]}" -d "$dir" "$@"
}

rm -rf "$DEST"
mkdir -p "$DEST/wheels"
pins=()
for name in "${WHEELS[@]}"; do
    pins+=("$name==$(version "$name")")
done
echo "wheels: ${pins[*]}"
download "$DEST/wheels" "${pins[@]}"

ray_version=$(version ray)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "ray==$ray_version: download, unpack, prune ${RAY_PRUNE[*]}, repack"
download "$work" "ray==$ray_version"
(cd "$work" && unzip -q ray-*.whl && rm ray-*.whl && rm -rf "${RAY_PRUNE[@]}")
# The wheel's dist-info travels too: importlib.metadata.version("ray") is what provenance reads.
tar -C "$work" -cf - ray "ray-$ray_version.dist-info" | xz -6 -T2 > "$DEST/ray.tar.xz"

# What the device needs of Ray must be in the tarball: the extension (the wheel is cp312's, and
# names it _raylet.so), Tune, the two daemons a local cluster starts, the CLI's module.
listing=$(tar -tJf "$DEST/ray.tar.xz")
for need in 'ray/_raylet\.so$' 'ray/tune/__init__\.py' \
            'ray/core/src/ray/raylet/raylet$' 'ray/core/src/ray/gcs/gcs_server$' \
            'ray/scripts/scripts\.py' "ray-$ray_version\.dist-info/METADATA"; do
    grep -qE "^$need" <<<"$listing" || { echo "ray.tar.xz lacks $need" >&2; exit 1; }
done

du -b "$DEST"/ray.tar.xz "$DEST"/wheels/*.whl | sort -n | awk '{printf "%8.2f MiB  %s\n", $1/2^20, $2}'
total=$(du -cb "$DEST" | tail -1 | cut -f1)
printf 'total %.1f MiB in %s (limit %d MiB)\n' "$(bc -l <<<"$total/2^20")" "$DEST" "$LIMIT_MIB"
if (( total > LIMIT_MIB * 1024 * 1024 )); then
    echo "$DEST is over $LIMIT_MIB MiB: the checkout and it must fit in one 64 MiB carry" >&2
    exit 1
fi
