#!/usr/bin/env bash
# Wheels for the device machine (Python 3.12, no package index): what its image lacks for
# scripts/gpu_check.sh. DeepSpeed is a source distribution on PyPI: built here into a
# pure-Python wheel (no compiled ops: they build at first use on the device). Writes .whl/
# (git-ignored); carry it with the device tool (`carry: [".whl"]`), a few MiB in all.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p .whl
PLATFORM=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64)
# pure-Python packages and pydantic's compiled core, pinned to what this project resolves here
for spec in gymnasium farama-notifications pydantic pydantic-core annotated-types typing-inspection hjson \
    pydantic-settings python-dotenv common-expression-language prompt-toolkit wcwidth; do
  version=$("$PY" -m pip show "$spec" 2>/dev/null | sed -n 's/^Version: //p')
  "$PY" -m pip download -q --no-deps --only-binary=:all: "${PLATFORM[@]}" -d .whl "$spec${version:+==$version}"
done
version=$("$PY" -m pip show deepspeed 2>/dev/null | sed -n 's/^Version: //p')
DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation -w .whl "deepspeed${version:+==$version}"
du -sh .whl
ls .whl
