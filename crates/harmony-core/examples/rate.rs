//! Quick randomize-rate probe of the mechanisms of the speed table (docs/BENCHMARKS.md), one thread, seeded
//! `FastRng`, best of 5 batches:
//!
//! ```text
//! cargo run --release -p harmony-core --example rate                 # everything
//! cargo run --release -p harmony-core --example rate -- grr duchi    # names containing these
//! ```
//!
//! `words` is the raw `FastRng::fill_words` rate. For `valgrind --tool=callgrind` instruction
//! counts set `RATE_REPS=1` (one batch per case).
use harmony_core::FrequencyOracle;
use harmony_core::frequency::{Grr, HadamardResponse, Olh, Oue};
use harmony_core::numeric::{AnyNumeric, NumericMechanism};
use harmony_core::sampling::{fast_rng, uniform01};
use std::time::Instant;

fn reps() -> usize {
    std::env::var("RATE_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(5)
}

/// Best-of-`reps()` rate of `f` over `n` items, printed as M items/s.
fn best<F: FnMut()>(label: &str, n: usize, mut f: F) {
    let mut best = f64::INFINITY;
    for _ in 0..reps() {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("{label:>22}: {:>10.4} M/s", n as f64 / best / 1e6);
}

fn oracle<O: FrequencyOracle>(name: &str, o: &O, n: usize) {
    let d = o.domain_size();
    let inputs: Vec<usize> = (0..n).map(|i| (i * 7919) % d).collect();
    let mut rng = fast_rng(1);
    let mut out = Vec::with_capacity(n);
    best(&format!("{name} d={d}"), n, || {
        out.clear();
        o.randomize_batch(&inputs, &mut rng, &mut out).unwrap();
        std::hint::black_box(&out);
    });
}

fn packed(d: usize, n: usize) {
    let o = Oue::new(1.0, d).unwrap();
    let inputs: Vec<usize> = (0..n).map(|i| (i * 7919) % d).collect();
    let mut rng = fast_rng(1);
    let mut out = Vec::with_capacity(n * o.words());
    best(&format!("oue-packed d={d}"), n, || {
        out.clear();
        o.randomize_packed(&inputs, &mut rng, &mut out).unwrap();
        std::hint::black_box(&out);
    });
}

fn numeric(name: &str, n: usize) {
    let m = AnyNumeric::by_name(name, 1.0).unwrap();
    let mut rng = fast_rng(2);
    let inputs: Vec<f64> = (0..n).map(|_| 2.0 * uniform01(&mut rng) - 1.0).collect();
    let mut out = Vec::with_capacity(n);
    best(name, n, || {
        out.clear();
        m.randomize_batch(&inputs, &mut rng, &mut out).unwrap();
        std::hint::black_box(&out);
    });
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let on = |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let n = 1 << 20;
    if on("words") {
        let mut rng = fast_rng(3);
        let mut buf = vec![0u64; n];
        best("words", n, || {
            rng.fill_words(&mut buf);
            std::hint::black_box(&buf);
        });
    }
    for d in [16, 1024, 65536] {
        if on("oue") {
            packed(d, (n * 16 / d).max(1 << 12));
        }
    }
    for d in [16, 1024] {
        if on("grr") {
            oracle("grr", &Grr::new(1.0, d).unwrap(), n);
        }
        if on("olh") {
            oracle("olh", &Olh::new(1.0, d).unwrap(), n);
        }
        if on("hr") {
            oracle("hr", &HadamardResponse::new(1.0, d).unwrap(), n);
        }
    }
    if on("duchi-signs") {
        let m = harmony_core::numeric::Duchi::new(1.0).unwrap();
        let mut rng = fast_rng(2);
        let inputs: Vec<f64> = (0..n).map(|_| 2.0 * uniform01(&mut rng) - 1.0).collect();
        let mut out = Vec::with_capacity(n / 64);
        best("duchi-signs", n, || {
            out.clear();
            m.randomize_signs(&inputs, &mut rng, &mut out).unwrap();
            std::hint::black_box(&out);
        });
    }
    if on("laplace-units") {
        let m = harmony_core::numeric::Laplace::new(1.0).unwrap();
        let mut rng = fast_rng(2);
        let inputs: Vec<f64> = (0..n).map(|_| 2.0 * uniform01(&mut rng) - 1.0).collect();
        let mut out = Vec::with_capacity(n);
        best("laplace-units", n, || {
            out.clear();
            m.randomize_units(&inputs, &mut rng, &mut out).unwrap();
            std::hint::black_box(&out);
        });
    }
    for name in ["duchi", "laplace", "pm", "hm"] {
        if on(name) {
            numeric(name, n);
        }
    }
}
