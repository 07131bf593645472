#!/usr/bin/env bash
# Per-task ingest throughput and GET estimates latency, one row per task, side by side in one run
# (docs/SERVER.md). From the repository root after `cargo build --release -p harmony-cli`.
BIN=${BIN:-target/release/harmony}
N=${N:-1000000}
run() { # label, args...
  local label="$1"; shift
  $BIN load --reports $N --batch 5000 --concurrency 4 --json "$@" 2>/dev/null | python3 -c "
import json,sys; d=json.load(sys.stdin)
print('| %s | %.1f | %s | %.1f ms | %.1f ms | %.1f ms |' % ('$label', d['report_bytes'], format(int(d['reports_per_second']),','), d['batch_p99_ms'], d['estimate_first_ms'], d['estimate_p99_ms']))"
}
echo "| task (options) | bytes/report | reports/s | batch p99 | GET first | GET p99 (20 more) |"
echo "|---|---|---|---|---|---|"
run "means (sample-k)"
run "frequency (education, default oracle)" --task frequency --column education
run "range (age, hh)" --task range --column age --method hh
run "range (age, haar)" --task range --column age --method haar
run "range (age, flat)" --task range --column age --method flat
run "linear-queries (hr, native_country)" --task linear-queries --method hr --attributes native_country
run "linear-queries (gaussian, education, prefix)" --task linear-queries --method gaussian --attributes education --queries prefix
run "heavy-hitters (education, pem)" --task heavy-hitters --column education --method pem
run "heavy-hitters (education, treehist)" --task heavy-hitters --column education --method treehist
run "marginals (5 attributes, calm)" --task marginals --attributes sex,race,income,workclass,relationship
run "marginals (5 attributes, direct)" --task marginals --attributes sex,race,income,workclass,relationship --method direct
run "marginals (5 attributes, fourier)" --task marginals --attributes sex,race,income,workclass,relationship --method fourier
run "marginals (all 14 attributes, calm)" --task marginals
run "means (sample-k)"
