#!/bin/bash
# The quickstart (plain Keras vs BoostModel O1) 3 times per backend, backends
# interleaved within each round; writes the result lines of each run to
# stdout (benchmarks/results/quickstart_o1_tf_jax_torch.txt was made this way, with
# the tox environments of this repository: .tox/<backend>/bin/python; set
# PYTHON to use one interpreter that has all three backends instead, and
# REPS to change the number of rounds).
cd "$(git rev-parse --show-toplevel)"
for rep in $(seq 1 "${REPS:-3}"); do
  for be in tensorflow jax torch; do
    echo "=== rep $rep backend $be $(date -u +%FT%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    KERAS_BACKEND=$be TF_CPP_MIN_LOG_LEVEL=2 "${PYTHON:-.tox/$be/bin/python}" examples/quickstart.py --quiet 2>/dev/null \
      | grep -E "^(keras.Model|BoostModel|boost /|freeze depths|  depth|  run as|  switched off)"
  done
done
