//! `harmony simulate --task frequency --column COL`: one categorical attribute through one
//! frequency oracle, run through the `frequency` task a server runs (harmony-tasks), with the
//! estimate document of run 1 beside the truth and, over the runs, the MSE beside the closed form.

use crate::data;
use crate::output::{Format, progress};
use crate::render::{self, Truth};
use crate::simulate::{SimulateArgs, load_inputs};
use anyhow::{Context, Result, anyhow};
use harmony_core::FrequencyOracle;
use harmony_core::estimate::Moments;
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, Query, TaskEstimate};
use harmony_protocol::spec::TaskSpec;
use harmony_tasks::frequency::FrequencyTask;
use harmony_tasks::simulate::run_seed;
use harmony_tasks::{Input, Task};
use serde::Serialize;

#[derive(Serialize)]
struct Output {
    data: String,
    n: usize,
    runs: usize,
    seed: u64,
    attribute: String,
    truth: Vec<f64>,
    results: Vec<CellResult>,
}

#[derive(Serialize)]
struct CellResult {
    epsilon: f64,
    mechanism: String,
    /// Mean over categories and runs of the squared error.
    mse: f64,
    /// Its standard error over the runs.
    mse_std_error: f64,
    /// The closed form (the oracle's variance at the true frequencies), mean over categories.
    predicted_mse: f64,
    ci_coverage: f64,
    seconds_per_run: f64,
    /// Run 1's estimate document (what `harmony query` prints for the same devices).
    estimates: EstimateDocument,
}

/// Runs `harmony simulate --task frequency`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let (data_name, file, table) = load_inputs(&args.data, &args.schema, args.max_categories)?;
    let schema = file.schema()?;
    let enc = data::encode(&table, &schema, file.invalid)?;
    let spec = crate::specs::frequency(&args.task, &args.means)?;
    let j = schema
        .attributes()
        .iter()
        .position(|a| a.name() == spec.attribute)
        .ok_or_else(|| anyhow!("--column is \"{}\", expected one of the schema's attributes", spec.attribute))?;
    let n = enc.n;
    let truth = render::record_truth(&schema, &enc.values).swap_remove(j);
    let inputs: Vec<Input> = enc.values.chunks_exact(schema.len()).map(Input::Record).collect();
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]);
    let pb = progress((epsilons.len() * args.runs) as u64, "simulate", args.format);
    let mut results = Vec::new();
    for &eps in &epsilons {
        let req =
            CreateCollection { schema: Some(schema.clone()), epsilon: eps, task: TaskSpec::Frequency(spec.clone()) };
        let task = harmony_tasks::resolve(&req, "simulation")
            .and_then(FrequencyTask::new)
            .with_context(|| format!("--task frequency at epsilon {eps}"))?;
        let start = std::time::Instant::now();
        let (mut runs, mut covered, mut first) = (Moments::default(), 0usize, None);
        for r in 0..args.runs {
            let agg = harmony_tasks::simulate::run(&task, &inputs, run_seed(args.seed, r as u64))?;
            let doc = EstimateDocument {
                collection: "simulation".into(),
                reports: agg.count(),
                epsilon: eps,
                result: task.estimate(agg.as_ref(), &Query::default())?,
            };
            let TaskEstimate::Frequency(f) = &doc.result else { unreachable!("a frequency task") };
            let sq: f64 = f.categories.iter().zip(&truth).map(|(c, t)| (c.frequency.value() - t).powi(2)).sum();
            runs.push(sq / truth.len() as f64);
            covered += render::coverage(&doc, &Truth::Frequency(truth.clone())).0;
            first.get_or_insert(doc);
            pb.inc(1);
        }
        let o = task.oracle();
        let predicted =
            (0..truth.len()).map(|v| o.aggregate_variance(&truth, v)).sum::<f64>() / (truth.len() * n) as f64;
        results.push(CellResult {
            epsilon: eps,
            mechanism: o.name().to_string(),
            mse: runs.mean,
            mse_std_error: (runs.variance() / runs.n as f64).sqrt(),
            predicted_mse: predicted,
            ci_coverage: covered as f64 / (args.runs * truth.len()) as f64,
            seconds_per_run: start.elapsed().as_secs_f64() / args.runs as f64,
            estimates: first.expect("at least one run"),
        });
    }
    pb.finish_and_clear();
    let out =
        Output { data: data_name, n, runs: args.runs, seed: args.seed, attribute: spec.attribute, truth, results };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Table => print_table(&out),
    }
    Ok(())
}

fn print_table(out: &Output) {
    println!(
        "harmony simulate --task frequency: {} — n = {} devices, attribute {}, {} runs, seed {}",
        out.data, out.n, out.attribute, out.runs, out.seed
    );
    println!(
        "{:>6} {:<12} {:>12} {:>12} {:>12} {:>8} {:>9}",
        "eps", "oracle", "MSE", "pred", "ratio", "cover", "s/run"
    );
    for r in &out.results {
        println!(
            "{:>6} {:<12} {:>12.3e} {:>12.3e} {:>5.2}±{:<5.2} {:>7.1}% {:>9.3}",
            r.epsilon,
            r.mechanism,
            r.mse,
            r.predicted_mse,
            r.mse / r.predicted_mse,
            r.mse_std_error / r.predicted_mse,
            100.0 * r.ci_coverage,
            r.seconds_per_run
        );
    }
    if let Some(r) = out.results.first() {
        println!();
        render::print(&r.estimates, Some(&Truth::Frequency(out.truth.clone())));
    }
}
