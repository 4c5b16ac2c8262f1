#!/usr/bin/env bash
# The checks only a GPU machine can run, as one short script (docs/pipeline.md, "What ran on a
# GPU"): the gpu-marked tests, then the emulated-training throughput and MFU of smollm-135m in
# bf16 (benchmarks/bench_delay.py), the training loop's throughput with its statistics off and
# on, then the real CPU pipeline at P = 4 and 8 on the machine's
# cores (benchmarks/bench_pipeline.py). Each part has its own time limit and writes its output
# under $OUT even when a later part runs out of time.
#
# Usage, from the repository root: OUT=out/device bash benchmarks/device_checks.sh [PARTS]
# PARTS: any of env tests mfu loop pipeline (default: all). The Python used is $PY (default python3,
# which must hold torch with CUDA); wheels under $WHEELS (default .whl/: pytorch-optimizer,
# which GPU images lack) are installed into /tmp/site first.
set -u
OUT=${OUT:-out/device}
PY=${PY:-python3}
PARTS=${*:-env tests mfu loop pipeline}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
WHEELS=${WHEELS:-.whl}
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$WHEELS"/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

for part in $PARTS; do
    t0=$(date +%s)
    case $part in
    env)
        { date -u; nvidia-smi; nproc; git rev-parse HEAD 2>/dev/null
          $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
        } > "$OUT/env.txt" 2>&1 ;;
    tests)
        timeout "${TESTS_S:-240}" $PY -m pytest -p no:cacheprovider -m gpu -rA -s --tb=short \
            tests/llm_validation/pipeline/test_gpu.py \
            tests/llm_validation/pipeline/test_stage_build.py \
            tests/llm_validation/pipeline/test_profile.py \
            tests/llm_validation/pipeline/test_schedule2bw.py > "$OUT/gpu_tests.log" 2>&1 ;;
    mfu)    # MFU_RUNS: batch:mode pairs (sequences of 1024 tokens; eager or compile)
        for r in ${MFU_RUNS:-16:eager 64:eager 64:compile}; do
            b=${r%%:*} mode=${r##*:}
            timeout "${MFU_S:-150}" $PY benchmarks/bench_delay.py --json --no-cpu --gpu \
                --reps 10 --warmup 3 --gpu-batch-size "$b" $([ "$mode" = compile ] && echo --compile) \
                > "$OUT/bench_delay_gpu_b${b}_${mode}.json" 2>> "$OUT/errors.log"
        done ;;
    loop)   # the real training loop (emulated 2BW + EF, smollm-135m, bf16): statistics off / every 10 steps
        for spec in "adamw 0" "adamw 10" "muon 0" "muon 10"; do
            set -- $spec
            timeout "${LOOP_S:-120}" $PY -m delaybound train --preset smollm-135m --vocab-size 256 \
                --device cuda --dtype bfloat16 --steps "${LOOP_STEPS:-60}" --batch-size 16 \
                --seq-len 1024 --optimizer "$1" --lr 1e-3 --delay 1 --ef 1 --stats-interval "$2" \
                --eval-interval 0 --checkpoint-interval 0 --quiet --json --out "/tmp/loop_$1_$2" \
                > "$OUT/loop_$1_stats$2.json" 2>> "$OUT/errors.log"
        done ;;
    pipeline)
        timeout "${PIPE_S:-150}" $PY benchmarks/bench_pipeline.py --json --stages 4 8 \
            --microbatches 2P --log-intervals 1000 --repeats 1 \
            > "$OUT/bench_pipeline_16cores.json" 2>> "$OUT/errors.log" ;;
    *) echo "unknown part: $part (env tests mfu loop pipeline)" >&2; exit 2 ;;
    esac
    echo "$part: exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/parts.txt"
done
