//! `harmony simulate --task train`: the rows as devices of a training collection, in order,
//! round by round, through the `train` task a server runs (harmony-tasks' rounds, device i with
//! `device_rng(seed, i)`); prints the model of each ε and scores it on the rows. `harmony submit
//! --simulate-devices --seed S` into a collection created with the same options gives the same
//! model (to floating-point summation order).

use crate::data;
use crate::output::{Format, progress};
use crate::simulate::{SimulateArgs, load_inputs};
use anyhow::{Context, Result};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, Query, TrainEstimate};
use harmony_protocol::spec::TaskSpec;
use harmony_tasks::train::TrainTask;
use harmony_tasks::{Input, Task};
use serde::Serialize;

#[derive(Serialize)]
struct CellResult {
    epsilon: f64,
    /// The model after the rounds (the estimate document `harmony query` prints).
    estimates: EstimateDocument,
    /// The model scored on the rows it was trained on.
    score: crate::server_cmds::rounds::Score,
    seconds: f64,
}

/// Runs `harmony simulate --task train`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let (data_name, file, enc) = load_inputs(&args.data, &args.schema, args.max_categories)?;
    let schema = file.schema()?;
    let inputs: Vec<Input> = enc.values.chunks_exact(schema.len()).map(Input::Record).collect();
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![1.0, 4.0]);
    let path = args.data.clone().unwrap_or_else(|| data::bundled("data/adult.csv"));
    let pb = progress(epsilons.len() as u64, "simulate", args.format);
    let mut results = Vec::new();
    for &eps in &epsilons {
        let spec = crate::server_cmds::rounds::train_spec(&schema, eps, &args.task.train)?;
        let req = CreateCollection { schema: Some(schema.clone()), epsilon: eps, task: spec.into() };
        let config =
            harmony_tasks::resolve(&req, "simulation").with_context(|| format!("--task train at epsilon {eps}"))?;
        let task = TrainTask::new(config.clone())?;
        let start = std::time::Instant::now();
        let agg = harmony_tasks::simulate::run(&task, &inputs, args.seed)?;
        let result = task.estimate(agg.as_ref(), &Query::default())?;
        let t: &TrainEstimate = (&result).try_into()?;
        let score = crate::server_cmds::rounds::score(&config, &t.state.model, &path, None)?;
        let estimates =
            EstimateDocument { collection: "simulation".into(), reports: agg.count(), epsilon: eps, result };
        results.push(CellResult { epsilon: eps, estimates, score, seconds: start.elapsed().as_secs_f64() });
        pb.inc(1);
    }
    pb.finish_and_clear();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"data": data_name, "n": enc.n, "seed": args.seed, "results": results})
            )?
        ),
        Format::Table => {
            println!("harmony simulate --task train: {data_name} — n = {} devices, seed {}", enc.n, args.seed);
            for r in &results {
                println!();
                crate::render::print(&r.estimates, None);
                let s = &r.score;
                println!(
                    "on the rows: {} {:.4} ({} predictor: {:.4}); {:.2} s",
                    s.metric, s.value, s.baseline, s.baseline_value, r.seconds
                );
            }
        }
    }
    Ok(())
}

/// The `train` task on the command line (model rounds keep no time buckets and cannot recur).
pub const CLI: super::CliTask = super::CliTask {
    name: "train",
    about: "a linear model (logistic, linear, SVM) by private gradient descent in rounds",
    options: &["target", "model", "positive", "threshold", "mechanism", "batch_size", "rounds", "devices", "schedule", "kappa", "gradient_scale", "learning_rate", "lambda", "no_enrollment"],
    help: &[
        ("target", "The target column (the other attributes are features)"),
        ("model", "logistic, linear or svm"),
        ("positive", "A categorical target's positive label (default: the 2nd)"),
        ("threshold", "A numeric target: positive above this public value"),
        ("mechanism", "The gradient randomizer: hm (default) or pm"),
        ("batch_size", "Devices per round g (default: from --devices)"),
        ("rounds", "Rounds T (needed by --schedule noise without --devices)"),
        ("devices", "Expected devices N: T = ⌊N/g⌋ rounds"),
        ("schedule", "noise (default: a constant step) or decay (γ₀/√t)"),
        ("kappa", "κ of the noise step (default 2)"),
        ("gradient_scale", "Scale c ≥ 1 before clipping (default 2, decay 1)"),
        ("learning_rate", "γ₀ of --schedule decay"),
        ("lambda", "L2 regularisation λ (default 1e-4)"),
        ("no_enrollment", "Open the rounds to any device id (default: enrolled)"),
    ],
    not_taken: &["period", "recurring"],
    simulate_examples: "# Logistic regression of income in rounds of 2,000 devices:
harmony simulate train --target income --model logistic --batch-size 2000 --devices 48842 --epsilon 4 --runs 1
# Linear regression of hours per week with PM gradients:
harmony simulate train --target hours_per_week --model linear --mechanism pm --batch-size 2000 --devices 48842 --epsilon 4 --runs 1",
    create_examples: "# Logistic regression of income, rounds of 1,000 enrolled devices:
harmony collection create train --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 4 --target income --model logistic --batch-size 1000 --devices 10000
# An SVM with the decaying step size:
harmony collection create train --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 4 --target income --model svm --batch-size 1000 --devices 10000 --schedule decay --learning-rate 0.3",
    spec,
    simulate: run,
    demo: Some(|a| {
        let t = &mut a.train;
        t.target.get_or_insert_with(|| "income".into());
        t.model.get_or_insert_with(|| "logistic".into());
        if t.rounds.is_none() && t.batch_size.is_none() {
            t.devices.get_or_insert(48_842);
        }
    }),
};

fn spec(a: &super::SpecArgs<'_>) -> Result<TaskSpec> {
    let schema = a.file()?.schema()?;
    Ok(crate::server_cmds::rounds::train_spec(&schema, a.epsilon, &a.task.train)?.into())
}
