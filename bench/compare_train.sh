#!/bin/sh
# Training throughput and accuracy, Chutney against PyTorch, on the benchmark
# workloads (docs/benchmarks.md), runs interleaved:
#
#   bench/compare_train.sh [MODELS] [THREADS] [REPEATS] [EPOCHS]
#       MODELS   default "mlp cnn lstm"
#       THREADS  default "1 2"
#       REPEATS  default 3
#       EPOCHS   default 1
#
# For PyTorch at 2 threads both splits of the two threads between OpenMP and
# BLAS are run and the faster kept, as docs/benchmarks.md asks. Prints one
# line per model and thread count: median samples/s of each, the ratio
# Chutney / PyTorch, and the last run's test accuracies. With STATIC=1 each
# repeat also trains with --mode static (the step as one compiled program):
# two more columns, its samples/s and its ratio to eager mode.
set -eu
cd "$(dirname "$0")/.."
models=${1:-mlp cnn lstm}
threads=${2:-1 2}
repeats=${3:-3}
epochs=${4:-1}
CHUTNEY=${CHUTNEY:-build/chutney}
PY=/usr/bin/python3

field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" | tail -n 1; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

STATIC=${STATIC:-0}
printf '%-5s %3s %12s %12s %7s %9s %9s' model thr chutney/s torch/s ratio acc_cn acc_pt
[ "$STATIC" = 1 ] && printf ' %12s %9s' static/s st/eager
printf '\n'
for m in $models; do
    for t in $threads; do
        cs="" ps="" ca="" pa="" ss=""
        r=0
        while [ "$r" -lt "$repeats" ]; do
            out=$("$CHUTNEY" train --model "$m" --epochs "$epochs" --threads "$t" --mode eager --json 2>/dev/null | tail -n 1)
            cs="$cs $(echo "$out" | field samples_per_sec)"
            ca=$(echo "$out" | field test_accuracy)
            if [ "$STATIC" = 1 ]; then
                sout=$("$CHUTNEY" train --model "$m" --epochs "$epochs" --threads "$t" --mode static --json 2>/dev/null | tail -n 1)
                ss="$ss $(echo "$sout" | field samples_per_sec)"
            fi
            best=0
            if [ "$t" -eq 1 ]; then splits="1:1"; else splits="$t:1 1:$t"; fi
            for s in $splits; do
                omp=${s%:*} blas=${s#*:}
                pout=$($PY bench/torch_train.py --model "$m" --epochs "$epochs" --threads "$t" \
                    --omp "$omp" --blas "$blas" --json 2>/dev/null | tail -n 1)
                v=$(echo "$pout" | field samples_per_sec)
                pa=$(echo "$pout" | field test_accuracy)
                best=$(awk -v a="$best" -v b="$v" 'BEGIN { print (b > a) ? b : a }')
            done
            ps="$ps $best"
            r=$((r + 1))
        done
        cm=$(echo $cs | tr ' ' '\n' | median)
        pm=$(echo $ps | tr ' ' '\n' | median)
        ratio=$(awk -v a="$cm" -v b="$pm" 'BEGIN { printf "%.2f", a / b }')
        printf '%-5s %3s %12.0f %12.0f %7s %9s %9s' "$m" "$t" "$cm" "$pm" "$ratio" "$ca" "$pa"
        if [ "$STATIC" = 1 ]; then
            sm=$(echo $ss | tr ' ' '\n' | median)
            printf ' %12.0f %9s' "$sm" "$(awk -v a="$sm" -v b="$cm" 'BEGIN { printf "%.2f", a / b }')"
        fi
        printf '\n'
    done
done
