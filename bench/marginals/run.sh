#!/usr/bin/env bash
# Reproduces the marginals results in docs/ANALYTICS-MARGINALS.md (seed 1 throughout).
#   bench/marginals/run.sh [name ...]     (default: all; names below)
# Needs a release build: cargo build --release -p harmony-cli. Each experiment writes
# bench/marginals/<name>.txt (table, stdout) and <name>.stderr.txt (plans, post-processing,
# timings). Long ones: adultbits19 (~1 min), census20 (~5 min), census_k3 (~3 min), census_cat (~5 min).
set -euo pipefail
cd "$(dirname "$0")/../.."
H=${HARMONY:-target/release/harmony}
B=bench/marginals
ALL_CALM=calm,calm-family,calm-local,calm-gls,calm-raw,direct,fourier
ADULT8=age,fnlwgt,education_num,capital_gain,capital_loss,hours_per_week,sex,income
CAT9=workclass,education,marital_status,occupation,relationship,race,sex,native_country,income
first() { python3 -c "import re,sys; print(','.join(re.findall(r'name = \"(\w+)\"', open(sys.argv[1]).read())[:int(sys.argv[2])]))" "$1" "$2"; }
CENSUS_CAT=$(python3 -c "
import re
s = open('examples/census_income_kdd.toml').read()
blocks = s.split('[[attributes]]')[1:]
print(','.join(re.search(r'name = \"(\w+)\"', b).group(1) for b in blocks if 'categories' in b))")

run() { # name, then harmony arguments
    local name=$1; shift
    echo "== $name: harmony $*" >&2
    { /usr/bin/time -f "wall %e s" nice -n 5 "$H" "$@" > "$B/$name.txt"; } 2> "$B/$name.stderr.txt"
    cat "$B/$name.txt"
}
adult16() { python3 $B/binarize.py adult16 < data/adult.csv; }
census32() { xz -dc data/census_income_kdd.csv.xz | python3 $B/binarize.py census32; }
adultbits() { python3 $B/binarize.py adultbits < data/adult.csv; }

want() { [ $# -eq 0 ] || [[ " $* " == *" $name "* ]]; }
names=("$@")
for name in adult adult_binary8 adult16_8 adult16 census20 census32 adultbits8 adultbits11 adultbits15 adultbits19 adult_categorical9 census_cat census_k3; do
    want "${names[@]}" || continue
    case $name in
    # Main table: all 2- and 3-way marginals of Adult's 14 attributes (9 categorical + 5 binned).
    adult) run adult simulate --task marginals --runs 3 --plot $B/adult.png ;;
    # Natively binary attributes.
    adult_binary8) run adult_binary8 simulate --task marginals --schema $B/adult_binary.toml \
        --attributes $ADULT8 --k 3 --runs 20 --method $ALL_CALM ;;
    adult16_8) adult16 | run adult16_8 simulate --task marginals --data - --schema $B/adult16.toml \
        --attributes "$(first $B/adult16.toml 8)" --k 3 --runs 20 --method $ALL_CALM ;;
    adult16) adult16 | run adult16 simulate --task marginals --data - --schema $B/adult16.toml \
        --k 3 --runs 5 --method calm,calm-family,calm-local,calm-gls,calm-raw,direct,fourier ;;
    census20) census32 | run census20 simulate --task marginals --data - --schema $B/census32.toml \
        --attributes "$(first $B/census32.toml 20)" --k 3 --epsilon 1 --runs 3 \
        --method calm,calm-family,calm-local,calm-raw,direct,fourier ;;
    census32) census32 | run census32 simulate --task marginals --data - --schema $B/census32.toml \
        --k 3 --epsilon 1 --runs 3 --method calm,calm-local,calm-raw,direct,fourier ;;
    # Adult's categorical attributes bit-encoded (binarize.py adultbits: label index in binary,
    # one yes/no attribute per bit), the first d bits: 3-way marginals over the bits.
    adultbits8|adultbits11|adultbits15|adultbits19) adultbits | run $name simulate --task marginals --data - \
        --schema $B/adultbits.toml --attributes "$(first $B/adultbits.toml ${name#adultbits})" --k 3 --epsilon 1 \
        --runs 10 --method calm,calm-raw,direct,fourier ;;
    # Categorical attributes, bit-encoded for the Fourier method.
    adult_categorical9) run adult_categorical9 simulate --task marginals --attributes $CAT9 --k 3 --runs 3 ;;
    census_cat) run census_cat simulate --task marginals --data data/census_income_kdd.csv.xz \
        --schema examples/census_income_kdd.toml --attributes "$CENSUS_CAT" --k 3 --epsilon 1 --runs 3 ;;
    # Speed record: all 3-way marginals of census_income_kdd's 34 attributes, one run.
    census_k3) run census_k3 simulate --task marginals --data data/census_income_kdd.csv.xz \
        --schema examples/census_income_kdd.toml --k 3 --epsilon 1 --runs 1 ;;
    esac
done
