#!/usr/bin/env bash
# Regenerates the result tables of docs/LEARN.md: every `harmony train` command of that page,
# JSON to bench/learn/results/NAME.json (stderr and wall time in NAME.stderr.txt), figures to
# docs/figures/, then the Markdown tables (bench/learn/tables.py) to bench/learn/results/tables.md.
#
#   bench/learn/run.sh               # all, about 25 min on 2 idle cores
#   bench/learn/run.sh adult_svm     # some
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p harmony-cli
H=target/release/harmony
R=bench/learn/results
F=docs/figures
mkdir -p "$R"
CENSUS=(--data data/census_income_kdd.csv.xz)
C6=(--schema examples/census_income_learn.toml)
C33=(--schema examples/census_income_kdd.toml)
names=("$@")
want() { [ ${#names[@]} -eq 0 ] && return 0; for n in "${names[@]}"; do [ "$n" = "$1" ] && return 0; done; return 1; }
run() {
    local name=$1; shift
    want "$name" || return 0
    local t0=$(date +%s.%N)
    "$H" train "$@" --format json > "$R/$name.json" 2> "$R/$name.stderr.txt"
    printf 'wall %.1f s, load %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$R/$name.stderr.txt"
    echo "done $name: $(tail -1 "$R/$name.stderr.txt")" >&2
}
run adult_logistic --target income --task logistic --plot $F/adult_logistic.png
run adult_logistic_papers --target income --task logistic --schedule papers
run adult_svm --target income --task svm --plot $F/adult_svm.png
run adult_linear --target hours_per_week --task linear --plot $F/adult_linear.png
run adult_linear_papers --target hours_per_week --task linear --schedule papers --mechanism hm,pm,harmony-1bit,hm-attr
run census6_logistic "${CENSUS[@]}" "${C6[@]}" --target income --task logistic --repeats 5 --plot $F/census6_logistic.png
run census6_logistic_r20 "${CENSUS[@]}" "${C6[@]}" --target income --task logistic --repeats 20 --mechanism hm-attr,hm,pm --epsilon 4
run census6_svm "${CENSUS[@]}" "${C6[@]}" --target income --task svm --repeats 1 --plot $F/census6_svm.png
run census_logistic "${CENSUS[@]}" "${C33[@]}" --target income --task logistic --repeats 1 --plot $F/census_logistic.png
run census_svm "${CENSUS[@]}" "${C33[@]}" --target income --task svm --repeats 1 --plot $F/census_svm.png
run census_linear "${CENSUS[@]}" "${C33[@]}" --target weeks_worked_in_year --task linear --repeats 1 --plot $F/census_linear.png
run census_linear_floor "${CENSUS[@]}" "${C33[@]}" --target weeks_worked_in_year --task linear --repeats 1 --mechanism non-private --epsilon 4
python3 bench/learn/tables.py $(ls $R/*.json) > $R/tables.md
echo "wrote $R/tables.md" >&2
