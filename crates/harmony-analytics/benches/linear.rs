//! Micro-benchmarks (divan) of the linear-query mechanisms, seeded fast RNG:
//!
//! ```text
//! cargo bench -p harmony-analytics --bench linear
//! ```
//! Per-user cost of the Gaussian report (d reals) and of aggregation, the server-side
//! projections (exact l1 ball at J = 1000; FISTA on a random 50 × 200 workload), HR's workload
//! variance (two FWHTs per block and query) and the adaptive 1-bit report.

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use harmony_analytics::linear::{
    AdaptiveQuery, Domain, GaussianReport, GaussianWorkload, HrWorkload, Hull, ProjectOptions, Workload, project,
};
use harmony_core::Aggregator;
use harmony_core::sampling::{fast_rng, uniform_below, uniform01};
use std::sync::Arc;

const N: usize = 2000;

fn main() {
    divan::main();
}

fn values(j: usize) -> Vec<usize> {
    let mut rng = fast_rng(1);
    (0..N).map(|_| uniform_below(&mut rng, j as u64) as usize).collect()
}

fn identity(j: usize) -> Arc<Workload> {
    Arc::new(Workload::identity(&Domain::indices(j).unwrap()).unwrap())
}

fn random_workload(d: usize, j: usize) -> Arc<Workload> {
    let mut rng = fast_rng(2);
    let rows = (0..d).map(|_| (0..j).map(|_| (uniform01(&mut rng) < 0.3) as u8 as f64).collect()).collect();
    Arc::new(Workload::from_rows((0..d).map(|t| format!("q{t}")).collect(), j, rows).unwrap())
}

#[divan::bench(args = [42, 1000])]
fn gaussian_randomize_and_add(bencher: Bencher, d: usize) {
    let g = GaussianWorkload::new(1.0, 1e-6, identity(d)).unwrap();
    let vs = values(d);
    let mut rng = fast_rng(3);
    let mut buf = GaussianReport { values: vec![0i64; d] };
    bencher.counter(ItemsCount::new(N)).bench_local(|| {
        let mut agg = g.aggregator();
        for &v in &vs {
            g.randomize_into(v, &mut rng, &mut buf.values).unwrap();
            agg.add(&buf).unwrap();
        }
        black_box(agg.count())
    });
}

#[divan::bench]
fn project_identity_j1000(bencher: Bencher) {
    let w = identity(1000);
    let mut rng = fast_rng(4);
    let y: Vec<f64> = (0..1000).map(|_| 0.5 * (uniform01(&mut rng) - 0.5)).collect();
    bencher.bench_local(|| black_box(project(&w, &y, Hull::Symmetric, ProjectOptions::default()).gap));
}

#[divan::bench]
fn project_fista_50x200(bencher: Bencher) {
    let w = random_workload(50, 200);
    let mut rng = fast_rng(5);
    let y: Vec<f64> = (0..50).map(|_| 2.0 * uniform01(&mut rng)).collect();
    bencher.bench_local(|| black_box(project(&w, &y, Hull::Symmetric, ProjectOptions::default()).iterations));
}

#[divan::bench(args = [100, 1000])]
fn hr_workload_variances(bencher: Bencher, j: usize) {
    let h = HrWorkload::new(1.0, random_workload(20, j)).unwrap();
    let p = vec![1.0 / j as f64; j];
    bencher.counter(ItemsCount::new(20usize)).bench_local(|| black_box(h.variances(&p, 1000)));
}

#[divan::bench]
fn adaptive_randomize(bencher: Bencher) {
    let q = AdaptiveQuery::new(1.0, random_workload(1, 100).row(0)).unwrap();
    let vs = values(100);
    let mut rng = fast_rng(6);
    bencher.counter(ItemsCount::new(N)).bench_local(|| {
        let mut agg = q.aggregator();
        for &v in &vs {
            agg.add(q.randomize(v, &mut rng).unwrap());
        }
        black_box(agg.count())
    });
}
