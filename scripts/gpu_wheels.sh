#!/usr/bin/env bash
# Build .whl/: the wheels the lent GPU machine lacks (docs/benchmark.md, "GPU figures";
# /work/shared/GPU.md). That machine has Python 3.12 with torch 2.11 + CUDA 13 but transformers 5
# (too new: flair pins transformers<5) and no bitsandbytes or torchao, and it cannot download
# anything: these wheels travel with the working tree (carry ".whl"; 64 MiB for the whole tree).
#   transformers 4.57.6, tokenizers 0.22.1, huggingface_hub 0.36.0: the project's versions;
#   bitsandbytes 0.50.2: 43 MB, trimmed to its CPU and CUDA 13 libraries (about 7 MB);
#   torchao 0.18.0: the release built for torch 2.11 and newer (quantization torchao-int4).
# Run in the repository root: bash scripts/gpu_wheels.sh  (.whl/ is in .gitignore)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
P="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
   --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
   --platform any"
rm -rf .whl && mkdir .whl
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps $P -d .whl transformers==4.57.6 tokenizers==0.22.1 \
  huggingface_hub==0.36.0 bitsandbytes==0.50.2 torchao==0.18.0
# bitsandbytes: keep only the CPU and CUDA 13 libraries
mkdir .whl/b
(cd .whl/b && unzip -q ../bitsandbytes-*manylinux*.whl && rm ../bitsandbytes-*manylinux*.whl \
  && rm -f bitsandbytes/libbitsandbytes_cuda1[12]*.so bitsandbytes/libbitsandbytes_rocm*.so \
           bitsandbytes/libbitsandbytes_xpu*.so \
  && zip -q -r ../bitsandbytes-0.50.2-py3-none-any.whl .)
rm -rf .whl/b
ls -l .whl
total=$(du -sb .whl | cut -f1)
echo "total: $((total / 1024 / 1024)) MiB of the 64 MiB carry limit (the tree adds about 3 MiB)"
if [ "$total" -gt $((56 * 1024 * 1024)) ]; then
  echo "error: .whl/ is too large to travel with the tree" >&2
  exit 1
fi
