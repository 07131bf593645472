//! Single-thread randomization throughput (reports per second), printed, not asserted (shared CI
//! machines are too noisy for a hard floor). Timed by the thread's on-CPU time
//! (`/proc/thread-self/schedstat`, Linux) so other processes on a busy machine do not count;
//! wall-clock time elsewhere. Run in release:
//! `cargo test -p harmony-core --release --test numeric_perf -- --ignored --nocapture`.
//! Targets (5× a vectorised numpy reference): Duchi ≥ 180 M/s, Laplace ≥ 75 M/s, PM and
//! HM ≥ 50 M/s.

use harmony_core::numeric::{
    AnyNumeric, DuchiMulti, DuchiMultiReport, HarmonyBit, NUMERIC_NAMES, NumericMechanism, VectorMechanism,
};
use harmony_core::sampling::fast_rng;
use std::hint::black_box;
use std::time::Instant;

/// Seconds this thread has been running on a CPU (Linux), else None.
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? * 1e-9)
}

/// Times `f` by on-CPU time when available, else by wall-clock time.
fn timed(mut f: impl FnMut()) -> f64 {
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    f();
    match (cpu, cpu_seconds()) {
        (Some(a), Some(b)) => b - a,
        _ => wall.elapsed().as_secs_f64(),
    }
}

#[test]
#[ignore = "heavy: run in release with --ignored"]
fn randomize_batch_throughput() {
    let n = 4_000_000;
    let ts: Vec<f64> = (0..n).map(|i| ((i * 7919) % 2001) as f64 / 1000.0 - 1.0).collect();
    let mut out = Vec::with_capacity(n);
    for name in NUMERIC_NAMES {
        let m = AnyNumeric::by_name(name, 1.0).unwrap();
        let mut rng = fast_rng(1);
        let mut best = f64::MAX;
        for _ in 0..5 {
            out.clear();
            best = best.min(timed(|| m.randomize_batch(black_box(&ts), &mut rng, &mut out).unwrap()));
            black_box(&out);
        }
        println!("{name:>10}: {:7.1} M reports/s (best of 5, n = {n}, eps = 1)", n as f64 / best / 1e6);
    }
    for d in [16usize, 1000] {
        let m = DuchiMulti::new(1.0, d).unwrap();
        let rows = n / d.max(64);
        let t: Vec<f64> = (0..d).map(|j| (j as f64 * 0.37).sin()).collect();
        let mut rng = fast_rng(2);
        let mut report = DuchiMultiReport { bits: Vec::new() };
        let s = timed(|| {
            for _ in 0..rows {
                m.randomize_into(black_box(&t), &mut rng, &mut report);
                black_box(&report);
            }
        });
        println!(
            "duchi-multi d={d}: {:7.2} M reports/s ({:.0} M coordinates/s)",
            rows as f64 / s / 1e6,
            (rows * d) as f64 / s / 1e6
        );
    }
    let m = HarmonyBit::new(1.0, 20).unwrap();
    let rows: Vec<[f64; 20]> = (0..n / 20).map(|i| [((i % 200) as f64) / 100.0 - 1.0; 20]).collect();
    let mut rng = fast_rng(3);
    let mut out = Vec::with_capacity(rows.len());
    let s = timed(|| m.randomize_batch(&rows, &mut rng, &mut out).unwrap());
    println!("harmony-1bit d=20: {:7.1} M reports/s", rows.len() as f64 / s / 1e6);
    black_box(&out);
}
