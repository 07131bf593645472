//! Prints the shuffled central ε (upper and lower bound), the closed form and the time taken:
//! `cargo run --release -p harmony-core --example shuffle_probe -- N EPS0 DELTA STEP ITERATIONS`
//! (STEP 1 = exact, as `harmony plan --shuffle`; STEP 100, ITERATIONS 10 = the Python's example).

use harmony_core::shuffle::{Options, closed_form_epsilon, numerical_epsilon};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 6 {
        eprintln!("usage: shuffle_probe N EPS0 DELTA STEP ITERATIONS");
        std::process::exit(2);
    }
    let n: u64 = a[1].parse().expect("N: an integer");
    let e0: f64 = a[2].parse().expect("EPS0: a number");
    let d: f64 = a[3].parse().expect("DELTA: a number");
    let step: u64 = a[4].parse().expect("STEP: an integer");
    let iterations: u32 = a[5].parse().expect("ITERATIONS: an integer");
    let t = std::time::Instant::now();
    let up = numerical_epsilon(n, e0, d, Options { step, iterations, upper: true }).expect("valid parameters");
    let lo = numerical_epsilon(n, e0, d, Options { step, iterations, upper: false }).expect("valid parameters");
    let closed = closed_form_epsilon(n, e0, d).expect("valid parameters");
    println!("upper {up:.15} lower {lo:.15} closed form {closed:?} ({:?})", t.elapsed());
}
