//! `harmony simulate --task marginals`: k-way marginals by CALM and baselines
//! (harmony_analytics::marginals). Categorical attributes are used as they are; numeric ones
//! need `[bins]` in the schema (equal-width bins over [min, max]).
//!
//! `--k 2|3` is the marginal order (the default `optimal` means both 2 and 3); `--attributes`
//! the attributes (default: every categorical and binned numeric one); `--method
//! calm,calm-raw,direct,fourier` (default all); `--calm-l` forces CALM's marginal size.

use crate::data::{self, SchemaFile};
use crate::output::{Format, progress};
use crate::plot::{Panel, Series, line_panels_png};
use crate::simulate::SimulateArgs;
use anyhow::{Context, Result, bail};
use harmony_analytics::marginals::calm::{self, CalmOptions, CalmPlan, Post};
use harmony_analytics::marginals::{Dataset, MarginalEstimate, all_queries, consistency, direct, fourier};
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::schema::{Attribute, Value};
use serde::Serialize;
use std::time::Instant;

const METHODS: [&str; 7] = ["calm", "calm-family", "calm-local", "calm-gls", "calm-raw", "direct", "fourier"];
/// The methods run when `--method` is not given.
const DEFAULT_METHODS: [&str; 4] = ["calm", "calm-raw", "direct", "fourier"];

/// Encodes the chosen attributes of the table as category codes (numeric ones binned).
pub fn dataset(file: &SchemaFile, table: &data::Table, attributes: &Option<Vec<String>>) -> Result<Dataset> {
    let schema = file.schema()?;
    let attrs = schema.attributes();
    let chosen: Vec<usize> = match attributes {
        Some(list) => list
            .iter()
            .map(|s| {
                let j = attrs.iter().position(|a| a.name() == s).with_context(|| {
                    format!(
                        "--attributes names \"{s}\", which the schema does not have (attributes: {})",
                        attrs.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
                    )
                })?;
                if attrs[j].is_numeric() && !file.bins.contains_key(s) {
                    bail!(
                        "attribute \"{s}\" is numeric without bins: marginals need categories; add `[bins]` \
                         with `{s} = N` (equal-width bins over [min, max]) to the schema"
                    );
                }
                Ok(j)
            })
            .collect::<Result<_>>()?,
        None => {
            let skipped: Vec<&str> = attrs
                .iter()
                .filter(|a| a.is_numeric() && !file.bins.contains_key(a.name()))
                .map(|a| a.name())
                .collect();
            if !skipped.is_empty() {
                eprintln!("note: numeric attributes without [bins] left out: {}", skipped.join(", "));
            }
            (0..attrs.len()).filter(|&j| !attrs[j].is_numeric() || file.bins.contains_key(attrs[j].name())).collect()
        }
    };
    if chosen.len() < 2 {
        bail!("--attributes: {} usable attribute(s), expected at least 2", chosen.len());
    }
    let mut cards = Vec::with_capacity(chosen.len());
    for &j in &chosen {
        cards.push(match &attrs[j] {
            Attribute::Categorical { categories, .. } => categories.len(),
            Attribute::Numeric { name, .. } => {
                let b = file.bins[name];
                if b < 2 {
                    bail!("[bins] {name} = {b}, expected at least 2 bins");
                }
                b
            }
        });
    }
    let enc = data::encode(table, &schema, file.invalid)?;
    if enc.skipped + enc.clamped > 0 {
        eprintln!("note: {} rows skipped, {} values clamped by the schema's policy", enc.skipped, enc.clamped);
    }
    let d = schema.len();
    let mut codes = Vec::with_capacity(enc.n * chosen.len());
    for row in enc.values.chunks_exact(d) {
        for (&j, &c) in chosen.iter().zip(&cards) {
            codes.push(match row[j] {
                Value::Category(v) => v,
                Value::Unit(u) => (((u + 1.0) / 2.0 * c as f64).floor() as i64).clamp(0, c as i64 - 1) as u32,
            });
        }
    }
    let names = chosen.iter().map(|&j| attrs[j].name().to_string()).collect();
    Ok(Dataset::new(names, cards, codes)?)
}

fn orders(k: &str) -> Result<Vec<usize>> {
    Ok(match k {
        "optimal" => vec![2, 3],
        "2" => vec![2],
        "3" => vec![3],
        other => bail!("--k is \"{other}\", expected 2 or 3 for --task marginals (default: both)"),
    })
}

#[derive(Serialize, Clone)]
struct MarginalOut {
    attributes: Vec<String>,
    sse: f64,
    tvd: f64,
    predicted_sse: Option<f64>,
}

#[derive(Serialize, Default, Clone)]
struct Timing {
    collect_s: f64,
    estimate_s: f64,
    answer_s: f64,
}

#[derive(Serialize, Clone)]
struct PlanOut {
    l: usize,
    m: usize,
    sets: Vec<Vec<String>>,
    predicted_total_sse: f64,
    predicted_gls_total_sse: f64,
    /// (l, m, predicted raw total, predicted GLS total) per candidate.
    candidates: Vec<(usize, usize, f64, f64)>,
}

#[derive(Serialize)]
struct Summary {
    method: String,
    k: usize,
    epsilon: f64,
    queries: usize,
    avg_sse: f64,
    avg_tvd: f64,
    avg_predicted_sse: Option<f64>,
    /// Mean seconds per run: collection + raw estimation, post-processing (CALM), answering.
    timing: Timing,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    consistency_violations: Option<usize>,
    /// CALM's post-processing as run: "joint" (one non-negative joint table), "family"
    /// (consistent non-negative marginals) or "gls" (weighted consistency only).
    #[serde(skip_serializing_if = "Option::is_none")]
    postprocessing: Option<&'static str>,
    /// Mean iterations per run of the joint fit ("joint") or of the alternating projections
    /// ("local").
    #[serde(skip_serializing_if = "Option::is_none")]
    postprocess_iterations: Option<f64>,
    marginals: Vec<MarginalOut>,
}

#[derive(Serialize)]
struct Report {
    task: &'static str,
    data: String,
    n: usize,
    attributes: Vec<(String, usize)>,
    runs: usize,
    seed: u64,
    results: Vec<Summary>,
}

pub fn run(args: &SimulateArgs) -> Result<()> {
    let t = &args.task;
    let methods: Vec<String> = match &t.method {
        Some(m) => m.iter().map(|s| s.trim().to_lowercase()).collect(),
        None => DEFAULT_METHODS.iter().map(|s| s.to_string()).collect(),
    };
    for m in &methods {
        if !METHODS.contains(&m.as_str()) {
            bail!("--method {m:?} is not a marginals method, expected one of: {}", METHODS.join(", "));
        }
    }
    let ks = orders(&args.means.k)?;
    let (data_name, file, table) = crate::simulate::load_inputs(&args.data, &args.schema, args.max_categories)?;
    let ds = dataset(&file, &table, &t.attributes)?;
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or_else(|| vec![0.5, 1.0, 2.0, 4.0]);
    let all: Vec<usize> = (0..ds.d()).collect();
    let mut results = Vec::new();
    let total = (ks.len() * epsilons.len() * methods.len() * args.runs) as u64;
    let pb = progress(total, "marginals", args.format);
    let mut stream = 0u64;
    for &k in &ks {
        let queries = all_queries(&all, k, ds.names())?;
        let truths: Vec<Vec<f64>> = queries.iter().map(|q| ds.true_marginal(q)).collect();
        for &eps in &epsilons {
            let opts = CalmOptions { l: t.calm_l, ..Default::default() };
            let plan = if methods.iter().any(|m| m.starts_with("calm")) {
                let p = CalmPlan::choose(&ds, eps, &queries, opts)?;
                eprintln!("k={k}: {}", p.describe());
                Some(p)
            } else {
                None
            };
            for m in &methods {
                let mut sse = vec![0.0; queries.len()];
                let mut tvd = vec![0.0; queries.len()];
                let mut pred = vec![0.0; queries.len()];
                let mut has_pred = vec![true; queries.len()];
                let mut timing = Timing::default();
                let mut violations = 0usize;
                let mut used: Option<Post> = None;
                let mut iterations = 0usize;
                for _ in 0..args.runs {
                    stream += 1;
                    let mut rng = fast_rng(stream_seed(args.seed, stream));
                    let t0 = Instant::now();
                    let answers: Vec<MarginalEstimate> = match m.as_str() {
                        "calm" | "calm-family" | "calm-local" | "calm-gls" | "calm-raw" => {
                            let plan = plan.as_ref().expect("planned");
                            let raw = calm::collect(plan, &ds, &mut rng)?;
                            let t1 = Instant::now();
                            timing.collect_s += (t1 - t0).as_secs_f64();
                            let mut t2 = t1;
                            let out = if m != "calm-raw" {
                                let how = match m.as_str() {
                                    "calm" => Post::Joint,
                                    "calm-family" => Post::Family,
                                    "calm-local" => Post::Local,
                                    _ => Post::Gls,
                                };
                                let post = calm::postprocess_with(plan, &raw, how);
                                used = Some(post.used);
                                iterations += post.iterations;
                                let margs = post.marginals;
                                let checked = if how == Post::Gls {
                                    consistency::check_consistent(&plan.sets, ds.cards(), &margs, 1e-9)
                                } else {
                                    consistency::check(&plan.sets, ds.cards(), &margs, 1e-9)
                                };
                                if checked.is_err() {
                                    violations += 1;
                                }
                                t2 = Instant::now();
                                timing.estimate_s += (t2 - t1).as_secs_f64();
                                calm::answer(plan, &margs, &raw.sizes)
                            } else {
                                calm::answer_raw(plan, &raw)
                            };
                            timing.answer_s += t2.elapsed().as_secs_f64();
                            out
                        }
                        "direct" => {
                            let out = direct::run(&ds, eps, &queries, &mut rng)?;
                            timing.collect_s += t0.elapsed().as_secs_f64();
                            out
                        }
                        _ => {
                            let out = fourier::run(&ds, eps, &queries, &mut rng)?;
                            timing.collect_s += t0.elapsed().as_secs_f64();
                            out
                        }
                    };
                    for (qi, a) in answers.iter().enumerate() {
                        sse[qi] += a.sse(&truths[qi]);
                        tvd[qi] += a.tvd(&truths[qi]);
                        match a.predicted_sse {
                            Some(p) => pred[qi] += p,
                            None => has_pred[qi] = false,
                        }
                    }
                    pb.inc(1);
                }
                let r = args.runs as f64;
                if let Some(u) = used {
                    let how = match u {
                        Post::Joint => format!("one joint table, {:.0} iterations/run", iterations as f64 / r),
                        Post::Family => "consistent family (Norm-Sub + refit)".into(),
                        Post::Local => format!("local-polytope projection, {:.0} rounds/run", iterations as f64 / r),
                        Post::Gls => "GLS consistency only".into(),
                    };
                    eprintln!("k={k} ε={eps}: {m} post-processing: {how}");
                }
                let nq = queries.len() as f64;
                let marginals: Vec<MarginalOut> = (0..queries.len())
                    .map(|qi| MarginalOut {
                        attributes: queries[qi].iter().map(|&a| ds.names()[a].clone()).collect(),
                        sse: sse[qi] / r,
                        tvd: tvd[qi] / r,
                        predicted_sse: has_pred[qi].then(|| pred[qi] / r),
                    })
                    .collect();
                let avg_pred = has_pred.iter().all(|&h| h).then(|| pred.iter().sum::<f64>() / r / nq);
                let plan_out = plan.as_ref().filter(|_| m.starts_with("calm")).map(|p| PlanOut {
                    l: p.l,
                    m: p.m(),
                    sets: p.sets.iter().map(|s| s.iter().map(|&a| ds.names()[a].clone()).collect()).collect(),
                    predicted_total_sse: p.predicted_total_sse,
                    predicted_gls_total_sse: p.predicted_gls_total_sse,
                    candidates: p
                        .candidates
                        .iter()
                        .map(|c| (c.l, c.m, c.predicted_total_sse, c.predicted_gls_total_sse))
                        .collect(),
                });
                results.push(Summary {
                    method: m.clone(),
                    k,
                    epsilon: eps,
                    queries: queries.len(),
                    avg_sse: sse.iter().sum::<f64>() / r / nq,
                    avg_tvd: tvd.iter().sum::<f64>() / r / nq,
                    avg_predicted_sse: avg_pred,
                    timing: Timing {
                        collect_s: timing.collect_s / r,
                        estimate_s: timing.estimate_s / r,
                        answer_s: timing.answer_s / r,
                    },
                    plan: plan_out,
                    consistency_violations: (m.starts_with("calm") && m != "calm-raw").then_some(violations),
                    postprocessing: used.map(|u| match u {
                        Post::Joint => "joint",
                        Post::Family => "family",
                        Post::Gls => "gls",
                        Post::Local => "local",
                    }),
                    postprocess_iterations: matches!(used, Some(Post::Joint | Post::Local))
                        .then(|| iterations as f64 / r),
                    marginals,
                });
            }
        }
    }
    pb.finish_and_clear();
    if let Some(path) = &args.plot {
        let panels: Vec<Panel> = ks
            .iter()
            .map(|&k| Panel {
                title: format!(
                    "{k}-way marginals ({} queries)",
                    results.iter().find(|s| s.k == k).map_or(0, |s| s.queries)
                ),
                y_label: "average SSE".into(),
                series: methods
                    .iter()
                    .map(|m| Series {
                        label: m.clone(),
                        points: results
                            .iter()
                            .filter(|s| s.k == k && &s.method == m)
                            .map(|s| (s.epsilon, s.avg_sse))
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        line_panels_png(path, &format!("k-way marginals: {data_name}"), &panels)?;
        eprintln!("wrote {}", path.display());
    }
    let report = Report {
        task: "marginals",
        data: data_name,
        n: ds.n(),
        attributes: ds.names().iter().cloned().zip(ds.cards().iter().copied()).collect(),
        runs: args.runs,
        seed: args.seed,
        results,
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Table => {
            println!(
                "k-way marginals: {} ({} users, {} attributes), {} run(s), seed {}",
                report.data,
                report.n,
                report.attributes.len(),
                report.runs,
                report.seed
            );
            println!(
                "{:<11} {:>2} {:>5} {:>6} {:>11} {:>11} {:>13} {:>9} {:>10} {:>9}",
                "method",
                "k",
                "ε",
                "#marg",
                "avg SSE",
                "avg TVD",
                "predicted SSE",
                "collect s",
                "postproc s",
                "answer s"
            );
            for s in &report.results {
                println!(
                    "{:<11} {:>2} {:>5} {:>6} {:>11.4e} {:>11.4} {:>13} {:>9.3} {:>10.3} {:>9.3}",
                    s.method,
                    s.k,
                    s.epsilon,
                    s.queries,
                    s.avg_sse,
                    s.avg_tvd,
                    s.avg_predicted_sse.map_or("—".into(), |p| format!("{p:.4e}")),
                    s.timing.collect_s,
                    s.timing.estimate_s,
                    s.timing.answer_s
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adult() -> (SchemaFile, data::Table) {
        let (_, file, table) = crate::simulate::load_inputs(&None, &None, 100).expect("bundled Adult data and schema");
        (file, table)
    }

    #[test]
    fn attributes_default_to_categorical_and_binned_and_bad_ones_are_errors() {
        let (mut file, table) = adult();
        let ds = dataset(&file, &table, &None).unwrap();
        // 9 categorical + 5 binned numeric (age has no bins in the bundled schema).
        assert_eq!(ds.d(), 14);
        assert_eq!(ds.names()[0], "workclass");
        assert_eq!(ds.cards()[1], file.bins["fnlwgt"]);
        file.bins.insert("age".into(), 8);
        let e = dataset(&file, &table, &Some(vec!["age".into(), "nope".into()])).unwrap_err().to_string();
        assert!(e.contains("\"nope\"") && e.contains("schema does not have"), "{e}");
        file.bins.remove("age");
        let e = dataset(&file, &table, &Some(vec!["age".into(), "sex".into()])).unwrap_err().to_string();
        assert!(e.contains("\"age\" is numeric without bins") && e.contains("[bins]"), "{e}");
        let e = dataset(&file, &table, &Some(vec!["sex".into()])).unwrap_err().to_string();
        assert!(e.contains("at least 2"), "{e}");
        // k larger than the number of attributes.
        let ds = dataset(&file, &table, &Some(vec!["sex".into(), "income".into()])).unwrap();
        let e = all_queries(&[0, 1], 3, ds.names()).unwrap_err().to_string();
        assert!(e.contains("k") && e.contains("(2)"), "{e}");
        assert_eq!(orders("optimal").unwrap(), vec![2, 3]);
        assert!(orders("4").unwrap_err().to_string().contains("expected 2 or 3"));
    }
}
