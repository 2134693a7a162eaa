#!/usr/bin/env bash
# The GPU session's one call (docs/benchmark.md, "GPU figures"): on the lent machine, in the
# repository root, with .whl/ carried (built here by scripts/gpu_wheels.sh):
#   run(command="bash scripts/gpu_run.sh", carry=[".whl"], timeout_s=600)
# Steps, each under its own `timeout` so that one hang loses only itself, all within DEADLINE_S:
#   1. install the carried wheels into /tmp/site (the machine's transformers 5 is too new);
#   2. python -m mars_demo.bench --llm-options --llm-shape 7b: every quantization x decoding
#      option of the 7B-shaped LLM, and the NLI model in half precision against float32
#      (the JSON is rewritten after each option: a step stopped half-way keeps what it measured);
#   3. python -m mars_demo.bench --evaluate --llm-shape 7b on 64 questions in one batch (today's
#      defaults);
#   4. the tests of the LLM options and of the LLM adapter with CUDA visible.
# What comes back under $OUT (8 files at most): env.txt, options-7b.json, options-7b.log,
# evaluate-7b.json, evaluate-7b.log, tests.log. STEPS and OPTIONS (environment) choose fewer
# steps or options for a rerun; MODELS is where the 7B-shaped models are built (about 18 GB).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
DEADLINE_S=${DEADLINE_S:-565}   # leave the 600 s call limit some room
MODELS=${MODELS:-/tmp/mars-bench-7b}
left() { echo $((DEADLINE_S - SECONDS)); }
cap() { local want=$1 l; l=$(left); [ "$l" -lt "$want" ] && want=$l; echo $((want > 5 ? want : 5)); }

SITE=${SITE:-/tmp/site}
python3 -m pip install -q --no-index --no-deps --target "$SITE" .whl/*.whl 2>&1 | tail -3
export PYTHONPATH=$SITE:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch, transformers, bitsandbytes, torchao; print(sys.version); \
print('torch', torch.__version__, 'cuda', torch.version.cuda); print('transformers', \
transformers.__version__); print('bitsandbytes', bitsandbytes.__version__); print('torchao', \
torchao.__version__)" 2>&1 | grep -v "^W[0-9]"
  nproc; free -g | head -2; df -h /tmp | tail -1
} > "$OUT/env.txt" 2>&1
echo "[gpu_run] installed in ${SECONDS} s"

STEPS=${STEPS:-sweep evaluate tests}  # a rerun may name fewer, e.g. STEPS=sweep OPTIONS=...

# 2. the options: the baseline, then those that compile nothing (cheap), then the compiled ones
# (each pays its compilation); the sweep starts no option after --budget-s, and the step's
# timeout ends it in any case
OPTIONS=${OPTIONS:-nf4:dynamic,torchao-int4:dynamic,none:dynamic,torchao-int4:static-compiled,nf4:static-compiled,none:static-compiled}
if [[ " $STEPS " == *" sweep "* ]]; then
  T=$(cap 380)
  echo "[gpu_run] options sweep, at most ${T} s"
  timeout -k 10 "$T" python3 -m mars_demo.bench --llm-options --llm-shape 7b --options "$OPTIONS" \
    --answer-tokens 64 --repeats 1 --budget-s $((T - 90)) --models-dir "$MODELS" \
    --json "$OUT/options-7b.json" > "$OUT/options-7b.log" 2>&1
  echo "[gpu_run] options sweep: exit $? at ${SECONDS} s"
  grep -v "^\[bench\]" "$OUT/options-7b.log" | tail -25
fi

# 3. evaluate mode on 64 questions in one batch (nf4 + dynamic, today's defaults), reusing the
# models built above
if [[ " $STEPS " == *" evaluate "* ]]; then
  T=$(cap 90)
  echo "[gpu_run] evaluate, at most ${T} s"
  timeout -k 10 "$T" python3 -m mars_demo.bench --evaluate --llm-shape 7b --questions 64 \
    --batch-sizes 64 --models-dir "$MODELS" --json "$OUT/evaluate-7b.json" \
    > "$OUT/evaluate-7b.log" 2>&1
  echo "[gpu_run] evaluate: exit $? at ${SECONDS} s"
  tail -8 "$OUT/evaluate-7b.log"
fi

# 4. the tests this work touches, with CUDA visible (tests/test_llm.py's
# test_logprobs_equal_a_teacher_forced_pass is known to fail there: /work/shared/GPU.md)
if [[ " $STEPS " == *" tests "* ]]; then
  T=$(cap 75)
  echo "[gpu_run] tests, at most ${T} s"
  timeout -k 10 "$T" python3 -m pytest -p no:cacheprovider -q -n 4 tests/test_llm_options.py \
    tests/test_bench_llm_options.py tests/test_llm.py tests/test_model_loading.py \
    > "$OUT/tests.log" 2>&1
  echo "[gpu_run] tests: exit $? at ${SECONDS} s"
  tail -5 "$OUT/tests.log"
fi
