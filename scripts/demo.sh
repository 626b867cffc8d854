#!/usr/bin/env bash
# The main job: trains a small GPT on openreg under torch.profiler and shows
# what the profiler saw. Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec "${PYTHON:-python3}" -m torch_openreg demo "$@"
