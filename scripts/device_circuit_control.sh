#!/usr/bin/env bash
# ON one H200 (nvidia-h200), after the payload install, as scripts/device_long_context.sh: does the tiny MLA model's
# hand-set retrieval circuit make a clean build drift more? The same clean control -- gpu-mla-120k (CUDA graphs,
# prefix caching) against gpu-mla-120k-ref (eager), suites $CC_SUITES -- on the same trained weights twice, in one
# call: without the circuit (make-tiny-model --without-retrieval-circuit; $OUT/without, kept in
# /tmp/keep-without-circuit) and with it ($OUT/with, kept in /tmp/keep, where later calls on the warm machine find it).
# The 2026-12-02d control with the circuit failed prefix_reuse (drift 0.587) and teacher_forcing (1.57) against the
# tiny MLA's 0.25 limit; if the model without the circuit drifts as much, the limit is what is wrong for this bf16
# pair, else the circuit is (docs/evidence/cpu-circuit-noise-2026-12-03.md could not tell on CPU).
#
#   bash scripts/device_circuit_control.sh          (CC_SUITES=prefix_reuse,teacher_forcing CC_HALF_S=280)
#
# $OUT/circuit-control.tar.gz: per variant, what device_long_context.sh leaves (runs.tar.gz with both arms'
# comparisons, timings.tsv, tiny_model.json) and noise.txt: benchmarks/reference_noise_floor.py on the control (per
# request and per position, at limit 0.25 / tie gap 0.5). One file: a device call brings back only a few files.
set -uo pipefail
OUT=${OUT:-/tmp/out}
SUITES=${CC_SUITES:-prefix_reuse,teacher_forcing}
HALF_S=${CC_HALF_S:-280}
for variant in without with; do
  if [ "$variant" = without ]; then keep=/tmp/keep-without-circuit circuit=0; else keep=/tmp/keep circuit=1; fi
  mkdir -p "$OUT/$variant"
  LF_KEEP=$keep LF_CIRCUIT=$circuit LF_FAULTS=none LF_EAGER=0 LF_CONTROL_SUITES=$SUITES \
    LF_CONTROL_S=$((HALF_S - 20)) LF_DEADLINE_S=$HALF_S OUT=$OUT/$variant bash scripts/device_long_context.sh \
    > "$OUT/$variant/script.log" 2>&1
  echo "$variant circuit: control qualify exit $?"
  tail -5 "$OUT/$variant/script.log"
  ${PY:-python3} benchmarks/reference_noise_floor.py "$keep/runs/control" --drift-limit 0.25 --tie-gap 0.5 \
    | tee "$OUT/$variant/noise.txt"
done
tar czf "$OUT/circuit-control.tar.gz" -C "$OUT" without with && rm -rf "$OUT/without" "$OUT/with"
