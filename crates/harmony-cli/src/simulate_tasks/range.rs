//! `harmony simulate --task range|quantiles`: range queries, the CDF and quantiles of one ordered
//! column, collected with hierarchical histograms (`hh`), Haar wavelets (`haar`) or flat OUE
//! (`flat`) from `harmony_analytics::range`.
//!
//! The column is discretized to D bins: `--bins`, else the schema's `[bins]` (equal width over
//! [min, max]), else one bin per integer when the column is integer-valued with at most 1,024
//! values, else 64 equal-width bins. Every figure is given in bins and in the column's units.

use crate::data::{InvalidPolicy, SchemaFile, Table};
use crate::output::progress;
use crate::simulate::SimulateArgs;
use crate::simulate_tasks::Task;
use anyhow::{Context, Result, anyhow, bail};
use harmony_analytics::range::{
    Cdf, FlatEstimate, FlatOue, Haar, HaarEstimate, HhEstimate, Hierarchy, RangeEstimator, Z95, check_quantile,
    choose_branching, random_range, true_freqs, true_quantile,
};
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::schema::Attribute;
use serde_json::{Value, json};
use std::time::Instant;

/// The column discretized: bin t covers `[lo + t·width, lo + (t+1)·width)`.
struct Binned {
    name: String,
    d: usize,
    lo: f64,
    width: f64,
    how: String,
    values: Vec<usize>,
    raw: Vec<f64>,
}

impl Binned {
    fn edge(&self, t: usize) -> f64 {
        self.lo + t as f64 * self.width
    }
    fn units(&self, a: usize, b: usize) -> [f64; 2] {
        [self.edge(a), self.edge(b)]
    }
}

const METHODS: [&str; 3] = ["hh", "haar", "flat"];

enum Collector {
    Hh(Hierarchy),
    Haar(Haar),
    Flat(FlatOue),
}

enum Est {
    Hh(HhEstimate),
    Haar(HaarEstimate),
    Flat(FlatEstimate),
}

impl Est {
    /// The answer users get (HH: the consistent estimate).
    fn main(&self) -> &dyn RangeEstimator {
        match self {
            Est::Hh(e) => e,
            Est::Haar(e) => e,
            Est::Flat(e) => e,
        }
    }
}

impl Collector {
    fn new(method: &str, eps: f64, d: usize, branching: Option<usize>) -> Result<(Self, Option<usize>)> {
        Ok(match method {
            "hh" => {
                let b = match branching {
                    Some(b) => b,
                    None => choose_branching(eps, d)?,
                };
                (Collector::Hh(Hierarchy::new(eps, b, d)?), Some(b))
            }
            "haar" => (Collector::Haar(Haar::new(eps, d)?), None),
            "flat" => (Collector::Flat(FlatOue::new(eps, d)?), None),
            m => bail!("--method has \"{m}\", expected hh, haar or flat"),
        })
    }
    fn levels(&self) -> usize {
        match self {
            Collector::Hh(h) => h.levels(),
            Collector::Haar(h) => h.levels(),
            Collector::Flat(_) => 1,
        }
    }
    fn collect(&self, values: &[usize], rng: &mut harmony_core::fast_rng::FastRng) -> Result<Est> {
        Ok(match self {
            Collector::Hh(h) => Est::Hh(h.collect(values, rng)?),
            Collector::Haar(h) => Est::Haar(h.collect(values, rng)?),
            Collector::Flat(f) => Est::Flat(f.collect(values, rng)?),
        })
    }
}

/// Finds and discretizes the column. Errors: unknown column, a categorical column, no values.
fn bin_column(args: &SimulateArgs, file: &SchemaFile, table: &Table) -> Result<Binned> {
    let name =
        args.task.column.clone().ok_or_else(|| {
            anyhow!("--column is missing: --task range/quantiles needs the ordered column to analyse")
        })?;
    let attr = file.attributes.iter().find(|a| a.name() == name).ok_or_else(|| {
        let names: Vec<&str> = file.attributes.iter().map(|a| a.name()).collect();
        anyhow!("--column is \"{name}\", expected one of the schema's attributes: {}", names.join(", "))
    })?;
    let (min, max) = match attr {
        Attribute::Numeric { min, max, .. } => (*min, *max),
        Attribute::Categorical { categories, .. } => bail!(
            "--column \"{name}\" is categorical ({} unordered labels); range and quantile queries need an ordered (numeric) column",
            categories.len()
        ),
    };
    let col = table
        .header
        .iter()
        .position(|h| *h == name)
        .ok_or_else(|| anyhow!("--column \"{name}\" is in the schema but not in the data's header"))?;
    let (mut raw, mut skipped, mut clamped) = (Vec::with_capacity(table.rows.len()), 0usize, 0usize);
    for (i, row) in table.rows.iter().enumerate() {
        let cell = &row[col];
        let x = match cell.parse::<f64>() {
            Ok(x) if x.is_finite() => x,
            _ if cell.is_empty() => {
                skipped += 1;
                continue;
            }
            _ => match file.invalid {
                InvalidPolicy::Error => bail!("row {}, column \"{name}\": \"{cell}\" is not a number", i + 2),
                _ => {
                    skipped += 1;
                    continue;
                }
            },
        };
        if x < min || x > max {
            match file.invalid {
                InvalidPolicy::Error => {
                    bail!("row {}, column \"{name}\": {x} is outside the schema's [{min}, {max}]", i + 2)
                }
                InvalidPolicy::Skip => {
                    skipped += 1;
                    continue;
                }
                InvalidPolicy::Clamp => {
                    clamped += 1;
                    raw.push(x.clamp(min, max));
                    continue;
                }
            }
        }
        raw.push(x);
    }
    if skipped + clamped > 0 {
        eprintln!("note: column \"{name}\": {skipped} empty or invalid cells skipped, {clamped} values clamped");
    }
    if raw.is_empty() {
        bail!("column \"{name}\" is empty: no numeric values in {} rows", table.rows.len());
    }
    let integer = raw.iter().all(|x| x.fract() == 0.0) && min.fract() == 0.0 && max - min < 1024.0;
    let (d, lo, hi, how) = match (args.task.bins, file.bins.get(&name)) {
        (Some(d), _) => (d, min, max, "--bins".to_string()),
        (None, Some(&d)) => (d, min, max, "schema [bins]".to_string()),
        (None, None) if integer => ((max - min) as usize + 1, min, max + 1.0, "one bin per integer".to_string()),
        (None, None) => (64, min, max, "default 64 equal-width bins".to_string()),
    };
    if d < 2 {
        bail!("--bins is {d}, expected an integer >= 2");
    }
    if hi <= lo {
        bail!("column \"{name}\": [min, max] = [{min}, {max}] is empty, expected min < max to discretize");
    }
    let width = (hi - lo) / d as f64;
    let values = raw.iter().map(|&x| (((x - lo) / width) as usize).min(d - 1)).collect();
    Ok(Binned { name, d, lo, width, how, values, raw })
}

/// Runs `--task range` or `--task quantiles`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let quantiles = args.task.task == Task::Quantiles;
    let out = compute(args)?;
    crate::output::emit(
        &out,
        args.format,
        args.plot.as_deref(),
        |p, o| write_plot(p, o, quantiles),
        |o| print_table(o, quantiles),
    )
}

/// The simulation's JSON output.
fn compute(args: &SimulateArgs) -> Result<Value> {
    let quantiles = args.task.task == Task::Quantiles;
    let qs = args.task.quantiles.clone().unwrap_or(vec![0.1, 0.5, 0.9]);
    for &q in &qs {
        check_quantile(q).map_err(|e| anyhow!("--quantiles: {e}"))?;
    }
    let methods: Vec<String> = args.task.method.clone().unwrap_or(METHODS.iter().map(|s| s.to_string()).collect());
    if let Some(m) = methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
        bail!("--method has \"{m}\", expected hh, haar or flat");
    }
    let n_queries: usize = match &args.task.queries {
        None => 1000,
        Some(s) => s.parse().with_context(|| format!("--queries is \"{s}\", expected a number of random ranges"))?,
    };
    if n_queries == 0 {
        bail!("--queries is 0, expected >= 1");
    }
    let (data_name, file, table) = crate::simulate::load_inputs(&args.data, &args.schema, args.max_categories)?;
    let col = bin_column(args, &file, &table)?;
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]);
    let d = col.d;
    let f = true_freqs(&col.values, d);
    let mut qrng = fast_rng(stream_seed(args.seed, 0xa11));
    let queries: Vec<(usize, usize)> = (0..n_queries).map(|_| random_range(d, &mut qrng)).collect();
    let pb = progress((methods.len() * epsilons.len() * args.runs) as u64, "simulating", args.format);
    let mut results = Vec::new();
    for (mi, method) in methods.iter().enumerate() {
        for (ei, &eps) in epsilons.iter().enumerate() {
            let t0 = Instant::now();
            let (collector, b) = Collector::new(method, eps, d, args.task.branching)?;
            let mut rng = fast_rng(stream_seed(args.seed, 1 + (mi * 1000 + ei) as u64));
            let r = if quantiles {
                quantile_cell(args, &col, &f, &qs, &collector, &mut rng, &pb)?
            } else {
                range_cell(args, &col, &f, &queries, &collector, &mut rng, &pb)?
            };
            let mut obj = json!({
                "method": method, "epsilon": eps, "bins": d, "levels": collector.levels(),
                "branching": b, "seconds": t0.elapsed().as_secs_f64(),
            });
            if let Collector::Hh(h) = &collector {
                obj["level_oracles"] = json!(h.branches());
            }
            obj.as_object_mut().unwrap().extend(r.as_object().unwrap().clone());
            results.push(obj);
        }
    }
    pb.finish_and_clear();
    Ok(json!({
        "task": if quantiles { "quantiles" } else { "range" },
        "data": data_name, "column": col.name, "n": col.values.len(), "bins": d,
        "binning": col.how, "bin_lo": col.lo, "bin_width": col.width,
        "runs": args.runs, "seed": args.seed,
        "queries": if quantiles { Value::Null } else { json!(n_queries) },
        "results": results,
    }))
}

/// Empirical MSE over the ranges and runs beside the closed-form prediction (from the true
/// frequencies), plus answering speed and a few answers in units.
fn range_cell(
    args: &SimulateArgs,
    col: &Binned,
    f: &[f64],
    queries: &[(usize, usize)],
    collector: &Collector,
    rng: &mut harmony_core::fast_rng::FastRng,
    pb: &indicatif::ProgressBar,
) -> Result<Value> {
    let truth: Vec<f64> = {
        let mut p = vec![0.0; f.len() + 1];
        for (i, x) in f.iter().enumerate() {
            p[i + 1] = p[i] + x;
        }
        queries.iter().map(|&(a, b)| p[b] - p[a]).collect()
    };
    let (mut sq, mut sq_raw) = (0.0, 0.0);
    // Per-run MSE of the estimator the ratio is about (HH: raw), for the ratio's standard error.
    let mut per_run: Vec<f64> = Vec::with_capacity(args.runs);
    let mut predicted = None;
    let mut split_share = 0.0;
    let mut sample = Vec::new();
    let mut speed = json!(null);
    let (mut collect_s, mut answer_s) = (0.0, 0.0);
    for run in 0..args.runs {
        let t = Instant::now();
        let est = collector.collect(&col.values, rng)?;
        collect_s += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let run_sq_start = sq;
        let main = est.main();
        for (&(a, b), &tr) in queries.iter().zip(&truth) {
            let e = main.range_unchecked(a, b) - tr;
            sq += e * e;
        }
        answer_s += t.elapsed().as_secs_f64();
        let mut run_sq = sq - run_sq_start;
        if let Est::Hh(h) = &est {
            run_sq = 0.0;
            for (&(a, b), &tr) in queries.iter().zip(&truth) {
                let e = h.range_raw_unchecked(a, b) - tr;
                run_sq += e * e;
            }
            sq_raw += run_sq;
        }
        per_run.push(run_sq / queries.len() as f64);
        if run == 0 {
            // The prediction uses the truth (for HH: the raw estimator's exact variance).
            let (mut noise, mut split) = (0.0, 0.0);
            for &(a, b) in queries {
                let p = main.range_variance_parts(a, b, f);
                noise += p.noise;
                split += p.split;
            }
            predicted = Some((noise + split) / queries.len() as f64);
            split_share = split / (noise + split);
            speed = million_queries(&est, col.d);
            let plug = main.plug_in_freqs();
            for &(a, b) in queries.iter().take(5) {
                let est_ab = main.range_unchecked(a, b);
                let se = main.range_variance(a, b, &plug).max(0.0).sqrt();
                sample.push(json!({
                    "bins": [a, b], "units": col.units(a, b), "truth": f[a..b].iter().sum::<f64>(),
                    "estimate": est_ab, "std_error": se, "ci95": [est_ab - Z95 * se, est_ab + Z95 * se],
                }));
            }
        }
        pb.inc(1);
    }
    let m = (args.runs * queries.len()) as f64;
    let predicted = predicted.unwrap_or(f64::NAN);
    let mse = sq / m;
    let r = per_run.len() as f64;
    let run_mean = per_run.iter().sum::<f64>() / r;
    let run_sd = (per_run.iter().map(|x| (x - run_mean) * (x - run_mean)).sum::<f64>() / (r - 1.0).max(1.0)).sqrt();
    let mut v = json!({
        "empirical_mse": mse, "predicted_mse": predicted, "ratio": mse / predicted,
        "ratio_se": run_sd / r.sqrt() / predicted,
        "split_share": split_share,
        "collect_seconds": collect_s, "answer_seconds": answer_s,
        "million_queries": speed, "sample_answers": sample,
    });
    if matches!(collector, Collector::Hh(_)) {
        let raw = sq_raw / m;
        v["empirical_mse"] = json!(raw);
        v["ratio"] = json!(raw / predicted);
        v["consistent_mse"] = json!(mse);
        v["consistency_reduction"] = json!(1.0 - mse / raw);
    }
    Ok(v)
}

/// Times 10^6 random range queries answered from one collection.
fn million_queries(est: &Est, d: usize) -> Value {
    let mut rng = fast_rng(0x1e6);
    let qs: Vec<(usize, usize)> = (0..1_000_000).map(|_| random_range(d, &mut rng)).collect();
    let time = |answer: &dyn Fn(usize, usize) -> f64| {
        let t = Instant::now();
        let s: f64 = qs.iter().map(|&(a, b)| answer(a, b)).sum();
        (t.elapsed().as_secs_f64(), s)
    };
    let (secs, checksum) = time(&|a, b| est.main().range_unchecked(a, b));
    let mut v = json!({ "seconds": secs, "checksum": checksum });
    if let Est::Hh(h) = est {
        v["raw_seconds"] = json!(time(&|a, b| h.range_raw_unchecked(a, b)).0);
    }
    v
}

/// Quantiles: per q, the truth, run 0's estimate and 95% interval, coverage over runs.
fn quantile_cell(
    args: &SimulateArgs,
    col: &Binned,
    f: &[f64],
    qs: &[f64],
    collector: &Collector,
    rng: &mut harmony_core::fast_rng::FastRng,
    pb: &indicatif::ProgressBar,
) -> Result<Value> {
    let truths: Vec<usize> = qs.iter().map(|&q| true_quantile(f, q)).collect();
    let mut covered = vec![0usize; qs.len()];
    let mut abs_err = vec![0.0; qs.len()];
    let mut first: Vec<Value> = Vec::new();
    for run in 0..args.runs {
        let est = collector.collect(&col.values, rng)?;
        let cdf: Cdf = est.main().cdf();
        for (i, &q) in qs.iter().enumerate() {
            let qe = cdf.quantile(q, Z95)?;
            covered[i] += usize::from(qe.lower <= truths[i] && truths[i] <= qe.upper);
            abs_err[i] += (qe.bin as f64 - truths[i] as f64).abs();
            if run == 0 {
                first.push(json!({
                    "bin": qe.bin, "interval_bins": [qe.lower, qe.upper],
                    "units": col.units(qe.bin, qe.bin + 1),
                    "interval_units": [col.edge(qe.lower), col.edge(qe.upper + 1)],
                }));
            }
        }
        pb.inc(1);
    }
    let mut sorted = col.raw.clone();
    sorted.sort_by(f64::total_cmp);
    let per_q: Vec<Value> = qs
        .iter()
        .enumerate()
        .map(|(i, &q)| {
            let k = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            json!({
                "q": q,
                "true_bin": truths[i], "true_bin_units": col.units(truths[i], truths[i] + 1),
                "true_value": sorted[k],
                "estimate": first[i],
                "coverage": covered[i] as f64 / args.runs as f64,
                "mean_abs_bin_error": abs_err[i] / args.runs as f64,
            })
        })
        .collect();
    Ok(json!({ "quantiles": per_q }))
}

fn print_table(out: &Value, quantiles: bool) {
    println!(
        "{} column {} (n = {}, D = {} bins: {}, bin width {}), {} runs",
        out["data"].as_str().unwrap_or(""),
        out["column"].as_str().unwrap_or(""),
        out["n"],
        out["bins"],
        out["binning"].as_str().unwrap_or(""),
        out["bin_width"],
        out["runs"]
    );
    let results = out["results"].as_array().cloned().unwrap_or_default();
    if quantiles {
        println!(
            "{:<6} {:>5} {:>5} {:>14} {:>20} {:>26} {:>9}",
            "method", "eps", "q", "true (units)", "estimate (units)", "95% interval (units)", "coverage"
        );
        for r in &results {
            for q in r["quantiles"].as_array().cloned().unwrap_or_default() {
                let u = &q["estimate"]["units"];
                let iu = &q["estimate"]["interval_units"];
                println!(
                    "{:<6} {:>5} {:>5} {:>14} {:>20} {:>26} {:>9.2}",
                    r["method"].as_str().unwrap_or(""),
                    r["epsilon"],
                    q["q"],
                    format!("{}", q["true_value"]),
                    format!("[{:.4}, {:.4})", u[0].as_f64().unwrap_or(f64::NAN), u[1].as_f64().unwrap_or(f64::NAN)),
                    format!("[{:.4}, {:.4})", iu[0].as_f64().unwrap_or(f64::NAN), iu[1].as_f64().unwrap_or(f64::NAN)),
                    q["coverage"].as_f64().unwrap_or(f64::NAN),
                );
            }
        }
    } else {
        println!(
            "{:<6} {:>5} {:>3} {:>3} {:>12} {:>12} {:>15} {:>14} {:>10} {:>8}",
            "method", "eps", "B", "h", "emp. MSE", "pred. MSE", "ratio ± se", "consistent MSE", "1e6 q (s)", "seconds"
        );
        for r in &results {
            println!(
                "{:<6} {:>5} {:>3} {:>3} {:>12.4e} {:>12.4e} {:>15} {:>14} {:>10.4} {:>8.2}",
                r["method"].as_str().unwrap_or(""),
                r["epsilon"],
                r["branching"].as_u64().map(|b| b.to_string()).unwrap_or("-".into()),
                r["levels"],
                r["empirical_mse"].as_f64().unwrap_or(f64::NAN),
                r["predicted_mse"].as_f64().unwrap_or(f64::NAN),
                format!(
                    "{:.3} ± {:.3}",
                    r["ratio"].as_f64().unwrap_or(f64::NAN),
                    r["ratio_se"].as_f64().unwrap_or(f64::NAN)
                ),
                r["consistent_mse"].as_f64().map(|m| format!("{m:.4e}")).unwrap_or("-".into()),
                r["million_queries"]["seconds"].as_f64().unwrap_or(f64::NAN),
                r["seconds"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
}

/// Range: empirical and predicted MSE against ε, one line per method. Quantiles: coverage.
fn write_plot(path: &std::path::Path, out: &Value, quantiles: bool) -> Result<()> {
    use crate::plot::{Panel, Series};
    let results = out["results"].as_array().cloned().unwrap_or_default();
    let series_of = |key: &str| {
        let mut series: Vec<Series> = Vec::new();
        for r in &results {
            let label = r["method"].as_str().unwrap_or("").to_string();
            let (eps, y) = (r["epsilon"].as_f64().unwrap_or(f64::NAN), r[key].as_f64().unwrap_or(f64::NAN));
            match series.iter_mut().find(|s| s.label == label) {
                Some(s) => s.points.push((eps, y)),
                None => series.push(Series { label, points: vec![(eps, y)] }),
            }
        }
        series
    };
    let title = format!(
        "{} / {}: n = {}, {} runs",
        out["data"].as_str().unwrap_or(""),
        out["column"].as_str().unwrap_or(""),
        out["n"],
        out["runs"]
    );
    let panels = if quantiles {
        let mut series: Vec<Series> = Vec::new();
        for r in &results {
            for q in r["quantiles"].as_array().cloned().unwrap_or_default() {
                let label = format!("{} q={}", r["method"].as_str().unwrap_or(""), q["q"]);
                let p =
                    (r["epsilon"].as_f64().unwrap_or(f64::NAN), q["mean_abs_bin_error"].as_f64().unwrap_or(f64::NAN));
                match series.iter_mut().find(|s| s.label == label) {
                    Some(s) => s.points.push(p),
                    None => series.push(Series { label, points: vec![p] }),
                }
            }
        }
        vec![Panel { title: "quantiles".into(), y_label: "mean |bin error|".into(), series }]
    } else {
        let mut cons = series_of("consistent_mse");
        cons.retain(|s| s.points.iter().all(|p| p.1.is_finite()));
        cons.iter_mut().for_each(|s| s.label = format!("{} consistent", s.label));
        let mut emp = series_of("empirical_mse");
        emp.extend(cons);
        vec![
            Panel { title: "empirical MSE over random ranges".into(), y_label: "MSE (fraction²)".into(), series: emp },
            Panel {
                title: "closed-form prediction".into(),
                y_label: "MSE (fraction²)".into(),
                series: series_of("predicted_mse"),
            },
        ]
    };
    crate::plot::line_panels_png(path, &title, &panels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: SimulateArgs,
    }

    fn args(extra: &[&str]) -> SimulateArgs {
        let mut v = vec!["simulate"];
        v.extend_from_slice(extra);
        Wrap::parse_from(v).args
    }

    fn err(extra: &[&str]) -> String {
        format!("{:#}", compute(&args(extra)).expect_err("the options must be rejected"))
    }

    #[test]
    fn bad_input_gives_clear_errors() {
        let e = err(&["--task", "range", "--column", "workclass"]);
        assert!(e.contains("\"workclass\" is categorical") && e.contains("ordered"), "{e}");
        let e = err(&["--task", "range", "--column", "salary"]);
        assert!(e.contains("--column is \"salary\"") && e.contains("age"), "{e}");
        let e = err(&["--task", "range"]);
        assert!(e.contains("--column is missing"), "{e}");
        for q in ["1.5", "0", "1", "-0.1"] {
            let e = err(&["--task", "quantiles", "--column", "age", "--quantiles", &format!("0.5,{q}")]);
            assert!(e.contains("--quantiles") && e.contains("quantile q") && e.contains("(0, 1)"), "{e}");
        }
        let e = err(&["--task", "range", "--column", "age", "--method", "wavelet"]);
        assert!(e.contains("--method has \"wavelet\"") && e.contains("hh, haar or flat"), "{e}");
        let e = err(&["--task", "range", "--column", "age", "--branching", "1"]);
        assert!(e.contains("branching B is 1"), "{e}");
        let e = err(&["--task", "range", "--column", "age", "--bins", "1"]);
        assert!(e.contains("--bins is 1"), "{e}");
        let e = err(&["--task", "range", "--column", "age", "--queries", "many"]);
        assert!(e.contains("--queries is \"many\""), "{e}");
        // An empty column.
        let dir = std::env::temp_dir().join(format!("harmony-range-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (csv, toml) = (dir.join("d.csv"), dir.join("s.toml"));
        std::fs::write(&csv, "x,y\n,1\n,2\n").unwrap();
        let schema = "[[attributes]]\nname = \"x\"\nkind = \"numeric\"\nmin = 0\nmax = 9\n\n[[attributes]]\nname = \"y\"\nkind = \"numeric\"\nmin = 0\nmax = 9\n";
        std::fs::write(&toml, schema).unwrap();
        let e = err(&[
            "--task",
            "range",
            "--column",
            "x",
            "--data",
            csv.to_str().unwrap(),
            "--schema",
            toml.to_str().unwrap(),
        ]);
        assert!(e.contains("column \"x\" is empty"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn small_runs_have_the_json_fields_and_are_reproducible() {
        let a = args(&["--task", "range", "--column", "age", "--runs", "2", "--queries", "50", "--epsilon", "1,4"]);
        let o = compute(&a).unwrap();
        let mses = |v: &Value| -> Vec<f64> {
            v["results"].as_array().unwrap().iter().map(|r| r["empirical_mse"].as_f64().unwrap()).collect()
        };
        assert_eq!(mses(&o), mses(&compute(&a).unwrap()), "same seed, same errors");
        assert_eq!(o["bins"], 74);
        let r = o["results"].as_array().unwrap();
        assert_eq!(r.len(), 6);
        for x in r {
            let ratio = x["ratio"].as_f64().unwrap();
            assert!(ratio > 0.2 && ratio < 5.0, "{x}");
            assert!(x["sample_answers"][0]["units"][0].as_f64().unwrap() >= 17.0);
        }
        assert!(r[0]["consistent_mse"].as_f64().unwrap() < r[0]["empirical_mse"].as_f64().unwrap());
        let q = compute(&args(&[
            "--task",
            "quantiles",
            "--column",
            "age",
            "--runs",
            "3",
            "--epsilon",
            "2",
            "--method",
            "haar",
        ]))
        .unwrap();
        let qs = q["results"][0]["quantiles"].as_array().unwrap();
        assert_eq!(qs.len(), 3);
        assert_eq!(qs[1]["true_value"], 37.0);
    }
}
