#!/bin/bash
# Re-runs, with 400 runs and another seed, the cells whose ratio fell outside [0.85, 1.15] in the
# 50-run census pass of run.py (flat and small-D cells have few independent errors per run).
cd "$(dirname "$0")/../.."
H=./target/debug/harmony
C="--data data/census_income_kdd.csv.xz --schema examples/census_income_kdd.toml"
run() { echo "### $*"; nice $H simulate --task range --seed 2 --runs 400 "$@" 2>/dev/null | tail -n +2; }
run $C --column age --method flat --epsilon 0.5,1
run $C --column weeks_worked_in_year --method flat --epsilon 2
run $C --column num_persons_worked_for_employer --method haar,flat --epsilon 2,4
run $C --column own_business_or_self_employed --method flat --epsilon 2
run $C --column veterans_benefits --method haar --epsilon 4
