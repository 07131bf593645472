#!/usr/bin/env bash
# `harmony load` against a plain and an HTTPS `harmony serve` (SQLite each, same release build),
# in alternating pairs; prints reports/s of each run and the https/http ratio (docs/SERVER.md,
# "TLS"). Needs openssl (test CA + a certificate for 127.0.0.1) and a release build:
#   cargo build --release -p harmony-cli && bench/server/tls_load.sh   (PAIRS=3 N=1000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/target/release/harmony}
PAIRS=${PAIRS:-3}; N=${N:-1000000}
D=$(mktemp -d)
trap 'kill $P1 $P2 2>/dev/null; wait $P1 $P2 2>/dev/null || true; rm -rf "$D"' EXIT
P1=; P2=
q() { openssl "$@" >/dev/null 2>&1; }
q req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $D/ca.key -out $D/ca.pem -days 1 -subj /CN=test-ca
q req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $D/key.pem -out $D/leaf.csr -subj /CN=localhost
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n" > $D/ext.cnf
q x509 -req -in $D/leaf.csr -CA $D/ca.pem -CAkey $D/ca.key -CAcreateserial -out $D/cert.pem -days 1 -extfile $D/ext.cnf
$BIN serve --db sqlite://$D/plain.sqlite --listen 127.0.0.1:18481 --admin-token tok --log-level warn 2>$D/plain.log & P1=$!
$BIN serve --db sqlite://$D/tls.sqlite --listen 127.0.0.1:18482 --admin-token tok --log-level warn \
  --tls-cert $D/cert.pem --tls-key $D/key.pem 2>$D/tls.log & P2=$!
sleep 1
rate() { python3 -c 'import json,sys; print(json.load(sys.stdin)["reports_per_second"])'; }
for i in $(seq $PAIRS); do
  h=$($BIN load --server http://127.0.0.1:18481 --token tok --reports $N --estimate-queries 5 --json 2>/dev/null | rate)
  s=$($BIN load --server https://127.0.0.1:18482 --ca-cert $D/ca.pem --token tok --reports $N --estimate-queries 5 --json 2>/dev/null | rate)
  python3 -c "print(f'pair $i: http {float($h):.0f} reports/s, https {float($s):.0f} reports/s, https/http {float($s)/float($h):.3f}')"
done
