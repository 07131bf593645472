//! Quick randomize-rate probe: `cargo run --release -p harmony-core --example rate`.
use harmony_core::FrequencyOracle;
use harmony_core::frequency::{Grr, Olh, Oue};
use harmony_core::sampling::fast_rng;
use std::time::Instant;

fn rate<O: FrequencyOracle>(name: &str, o: &O, n: usize) {
    let d = o.domain_size();
    let inputs: Vec<usize> = (0..n).map(|i| (i * 7919) % d).collect();
    let mut rng = fast_rng(1);
    let mut out = Vec::with_capacity(n);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        out.clear();
        let t = Instant::now();
        o.randomize_batch(&inputs, &mut rng, &mut out).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&out);
    }
    println!("{name:>10} d={d:>6}: {:>8.1} M/s", n as f64 / best / 1e6);
}

fn packed(d: usize, n: usize) {
    let o = Oue::new(1.0, d).unwrap();
    let inputs: Vec<usize> = (0..n).map(|i| (i * 7919) % d).collect();
    let mut rng = fast_rng(1);
    let mut out = Vec::with_capacity(n * o.words());
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        out.clear();
        let t = Instant::now();
        o.randomize_packed(&inputs, &mut rng, &mut out).unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        std::hint::black_box(&out);
    }
    println!("oue-packed d={d:>6}: {:>8.1} M/s", n as f64 / best / 1e6);
}

fn main() {
    packed(16, 1 << 20);
    packed(1024, 1 << 16);
    let n = 1 << 20;
    for d in [16, 1024, 65536] {
        rate("grr", &Grr::new(1.0, d).unwrap(), n);
    }
    rate("oue", &Oue::new(1.0, 16).unwrap(), n);
    rate("oue", &Oue::new(1.0, 1024).unwrap(), n / 16);
    for d in [16, 1024, 65536] {
        rate("olh", &Olh::new(1.0, d).unwrap(), n);
    }
}
