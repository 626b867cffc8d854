#!/usr/bin/env bash
# torchtitan 0.3.0 and the part of its dependencies that its llama3 debug-model
# training path imports, for tests/torchtitan/run_torchtitan_check.py.
#
# Every package is installed with --no-deps at a pinned version, one at a time,
# and torch is checked after each: nothing here may replace torch 2.13.0 (CPU).
# torchtitan's declared dependencies that this path does not import are left
# out: torch_checkpointing (only its alternative checkpointer), safetensors
# (HF-format checkpoints), wandb (off by default), einops (other models).
# torchdata 0.11.0 declares torch>=2 (satisfied), tensorboard's declared grpcio,
# markdown, tensorboard-data-server and werkzeug are not imported by
# torch.utils.tensorboard's SummaryWriter, which is all torchtitan imports.
#
#   scripts/install_torchtitan.sh            install (from PyPI)
#   TORCHTITAN_WHEEL=/path/torchtitan-0.3.0-py3-none-any.whl scripts/install_torchtitan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_WANTED=2.13.0

torch_version() {
  # torch alone: an installed torch_openreg would be autoloaded, and is not what is checked here.
  TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" -c "import torch; print(torch.__version__)"
}

before=$(torch_version) || { echo "install_torchtitan: torch does not import; run scripts/bootstrap.sh first"; exit 1; }
case "$before" in
  "$TORCH_WANTED"*) ;;
  *) echo "install_torchtitan: torch is $before, not $TORCH_WANTED; run scripts/bootstrap.sh first"; exit 1 ;;
esac

# What this path imports, beyond what torch, scripts/bootstrap.sh and the
# machine image already bring (next list). Order: each before what imports it.
packages=(
  "${TORCHTITAN_WHEEL:-torchtitan==0.3.0}"
  # torchtitan.config (the command line)
  docstring-parser==0.18.0
  typeguard==4.6.1
  tyro==1.0.17
  # torchtitan.trainer, models, distributed
  spmd_types==0.2.3
  # torchtitan.components.dataloader: StatefulDataLoader
  torchdata==0.11.0
  # torchtitan.components.metrics: torch.utils.tensorboard.SummaryWriter
  protobuf==7.36.2
  absl-py==2.5.1
  tensorboard==2.21.0
  # torchtitan.components.tokenizer
  tokenizers==0.23.3
  # torchtitan.hf_datasets: load_dataset (local JSON lines) and split_dataset_by_node
  pyarrow==26.0.1
  h11==0.16.0
  httpcore==1.0.9
  anyio==4.16.0
  httpx==0.28.1
  tqdm==4.70.1
  huggingface_hub==1.33.0
  dill==0.4.0
  multiprocess==0.70.18
  xxhash==4.1.0
  datasets==4.7.0
)

# Imported too, and normally already there (torch's own dependencies, scripts/bootstrap.sh's
# requirements-test.txt, the machine image): installed at these versions only when missing.
present=(
  numpy==2.4.6
  pandas==3.1.1
  python-dateutil==2.9.0.post0
  six==1.17.0
  requests==2.34.2
  urllib3==2.7.0
  charset-normalizer==3.4.7
  idna==3.13
  certifi==2026.5.20
  filelock==4.3.2
  fsspec==2026.9.0
  PyYAML==6.0.3
  packaging==26.2
  typing_extensions==4.15.0
  click==8.4.0
)

install() {
  "$PYTHON" -m pip install -q --no-deps "$1"
  after=$(torch_version)
  if [[ "$after" != "$before" ]]; then
    echo "install_torchtitan: installing $1 changed torch from $before to $after"
    exit 1
  fi
}

start=$SECONDS
for spec in "${present[@]}"; do
  name=${spec%%==*}
  if ! "$PYTHON" -m pip show -q "$name" > /dev/null 2>&1; then
    echo "install_torchtitan: $name is missing: installing $spec"
    install "$spec"
  fi
done
for spec in "${packages[@]}"; do
  install "$spec"
done

TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PYTHON" - <<'EOF'
import importlib
import importlib.metadata as md

for module in ("tyro", "spmd_types", "torchdata.stateful_dataloader", "tensorboard", "torch.utils.tensorboard",
               "tokenizers", "datasets", "datasets.distributed"):
    importlib.import_module(module)
names = ["torch", "torchtitan", "tyro", "spmd_types", "torchdata", "tensorboard", "tokenizers", "datasets"]
print("install_torchtitan: " + ", ".join(f"{n} {md.version(n)}" for n in names))
EOF
echo "install_torchtitan: done in $((SECONDS - start)) s; torch is still $(torch_version)"
