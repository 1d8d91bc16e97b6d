#!/bin/bash
# The CUDA half of the checks, on a machine with a GPU (CI has none, so it never runs this):
#   bash benchmarks/cuda_check.sh [OUTDIR]        (default: cuda_out/)
# 1. tests/test_cuda.py and the CUDA test of tests/test_gamp.py (same seeds on CPU and CUDA);
# 2. GD steps/s of the simulator on CPU (1 thread) and CUDA, d = 1000..8000 (python -m benchmarks --only simulator);
# 3. one GAMP iteration at d = 4000 with numpy, torch/CPU and torch/CUDA (python -m benchmarks.gamp_iteration --torch);
# 4. the GAMP CLI at d = 8000 on CUDA, 60 iterations (checks the path end to end; it stops before convergence);
# 5. the histogram task (paper App. A) trained on CUDA from both initialisations, with their test accuracies.
# Each step has its own time limit, so one that hangs does not take the others with it.
set -u
OUT=${1:-cuda_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
E=$OUT/stderr.txt
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc
  python3 -c "import torch,numpy,scipy,sympy,platform;print(platform.python_version(), 'torch', torch.__version__, torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '', 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sympy', sympy.__version__)"
} > "$OUT/env.txt" 2>>"$E"
cat "$OUT/env.txt"
echo "== tests"; t=$SECONDS
timeout 170 python3 -m pytest -q -p no:cacheprovider -rs tests/test_cuda.py tests/test_gamp.py -k "cuda or torch_backend" \
    > "$OUT/pytest_cuda.txt" 2>&1; echo "rc $? in $((SECONDS-t)) s" | tee -a "$OUT/pytest_cuda.txt"; tail -3 "$OUT/pytest_cuda.txt"
echo "== simulator"; t=$SECONDS
timeout 130 python3 -m benchmarks --only simulator --out "$OUT/bench_sim.json" 2>>"$E"; echo "rc $? in $((SECONDS-t)) s"
echo "== GAMP iteration"; t=$SECONDS
timeout 150 python3 -m benchmarks.gamp_iteration --torch --json > "$OUT/gamp_iter.json" 2>>"$E"; echo "rc $? in $((SECONDS-t)) s"
python3 -c "
import json, sys
for x in json.load(open(sys.argv[1]))['rows']:
    print(x['backend'], x['device'], 'every start each', x['multistart_every'], 'iteration(s):',
          'iteration', round(x['iteration_median_s'], 4), 's, output channel', round(x['channel_median_s'], 4), 's')" \
    "$OUT/gamp_iter.json" 2>>"$E"
echo "== GAMP CLI, d = 8000, CUDA"; t=$SECONDS
timeout 100 python3 -m numerics.gamp attention --omega 0.3 --alpha 2 --d 8000 --init semantic --seeds 1 --max-iter 60 \
    --device cuda --json > "$OUT/gamp_cli.json" 2>>"$E"; echo "rc $? in $((SECONDS-t)) s (1: not converged in 60 iterations)"
echo "== histogram task on CUDA"; t=$SECONDS
for init in positional semantic; do
  timeout 120 python3 -m numerics.simulate histogram --init $init --device cuda --json --quiet > "$OUT/histogram_$init.json" 2>>"$E"
  echo "$init: rc $? in $((SECONDS-t)) s"
done
python3 -c "
import json, sys
for f in sys.argv[1:]:
    r = json.load(open(f)); print(r['init'], 'test accuracy', r['test_accuracy'], 'positional index', r['positional_index'])" \
    "$OUT/histogram_positional.json" "$OUT/histogram_semantic.json" 2>>"$E"
echo "== stderr (tail)"; tail -8 "$E"
