//! `harmony simulate --poison FRACTION [--attack …] [--poison-target LABEL]`: fake devices make
//! a fraction of all devices and send the reports of an attack (harmony_tasks::poison) through
//! the real validation and aggregator. `--task frequency --column C` targets the frequency of
//! one category of C (GRR, OUE, OLH by default; `--categorical-mechanism` takes a
//! comma-separated list); `--task means` targets the mean of one numeric attribute (`--column`,
//! default the first numeric one; PM and HM by default, `--numeric-mechanism` a list). Per
//! mechanism, ε and attack: the measured shift of the target (mean over runs of poisoned −
//! honest, the same honest devices), its closed form, their ratio and z, beside the honest
//! estimate's standard error (shift / SE: the susceptibility). docs/POISONING.md.

use crate::output::progress;
use crate::simulate::{SimulateArgs, load_inputs};
use anyhow::{Result, anyhow, bail};
use clap::Args;
use harmony_core::FrequencyOracle;
use harmony_core::kinds::{OracleKind, RecordNumeric};
use harmony_core::schema::{Attribute, Value};
use harmony_tasks::poison::{Attack, Attacker, fake_devices, frequency_task, mean_task, measure};
use harmony_tasks::{Input, Task};
use serde::Serialize;

/// The poisoning options of `harmony simulate`.
#[derive(Args, Debug, Default)]
pub struct PoisonArgs {
    /// Poisoning: fake devices make this fraction β of all devices (m = round(β·n/(1 − β))
    /// beside the n rows), with `--task frequency` or `--task means`.
    #[arg(long)]
    pub poison: Option<f64>,
    /// Poisoning: the attacks, comma-separated: input (the honest randomizer on the target),
    /// output (uniform valid reports), maximal-gain (the valid report raising the target most).
    #[arg(long, value_delimiter = ',', default_value = "input,output,maximal-gain")]
    pub attack: Vec<String>,
    /// Poisoning, `--task frequency`: the targeted category's label (default: the least
    /// frequent one).
    #[arg(long)]
    pub poison_target: Option<String>,
}

#[derive(Serialize)]
struct Output {
    data: String,
    attribute: String,
    target: String,
    /// The target's true value (a frequency, or the mean on [-1, 1]).
    truth: f64,
    n: usize,
    fake_devices: usize,
    beta: f64,
    runs: usize,
    seed: u64,
    results: Vec<Cell>,
}

#[derive(Serialize)]
struct Cell {
    mechanism: String,
    epsilon: f64,
    attack: &'static str,
    /// Mean over the runs of (poisoned − honest) estimate of the target.
    shift: f64,
    /// Its standard error over the runs.
    shift_std_error: f64,
    /// β·(E[Y_fake] − truth).
    closed_form: f64,
    ratio: f64,
    z: f64,
    /// The honest estimate's standard error (closed form, n honest devices).
    honest_std_error: f64,
    /// shift / honest_std_error.
    susceptibility: f64,
}

/// The targeted attribute alone: its one-attribute column and its index.
fn column(args: &SimulateArgs, schema: &harmony_core::schema::Schema) -> Result<usize> {
    let numeric = args.task.task.is(&crate::specs::MEANS);
    let found = match &args.task.column {
        Some(c) => schema.attributes().iter().position(|a| a.name() == c),
        None if numeric => schema.attributes().iter().position(|a| matches!(a, Attribute::Numeric { .. })),
        None => bail!("--column is missing: --poison with --task frequency needs the categorical attribute"),
    };
    let j = found.ok_or_else(|| anyhow!("--column names no attribute of the schema"))?;
    match (&schema.attributes()[j], numeric) {
        (Attribute::Numeric { .. }, true) | (Attribute::Categorical { .. }, false) => Ok(j),
        (a, _) => bail!(
            "--column is \"{}\", expected a {} attribute",
            a.name(),
            if numeric { "numeric" } else { "categorical" }
        ),
    }
}

fn list(given: &Option<String>, default: &str) -> Vec<String> {
    given.as_deref().unwrap_or(default).split(',').map(|s| s.trim().to_string()).collect()
}

/// An error unless the task takes `--poison` (its `CliTask` lists the option), naming those that do.
fn check_task(args: &SimulateArgs) -> Result<()> {
    if args.task.task.cli().options.contains(&"poison") {
        return Ok(());
    }
    let takers: Vec<String> =
        super::ALL.iter().filter(|c| c.options.contains(&"poison")).map(|c| format!("--task {}", c.name)).collect();
    bail!("--poison with --task {}, expected {}", args.task.task.name(), takers.join(" or "))
}

/// Runs `harmony simulate --poison`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let beta = args.poison.poison.ok_or_else(|| anyhow!("--poison is missing"))?;
    check_task(args)?;
    let attacks = args.poison.attack.iter().map(|a| Attack::parse(a)).collect::<Result<Vec<_>, _>>()?;
    let (data, file, enc) = load_inputs(&args.data, &args.schema, args.max_categories)?;
    let schema = file.schema()?;
    let j = column(args, &schema)?;
    let attr = schema.attributes()[j].clone();
    let rows: Vec<[Value; 1]> = enc.values.chunks_exact(schema.len()).map(|r| [r[j]]).collect();
    let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
    let n = rows.len();
    let m = fake_devices(beta, n)?;
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]);
    let (target, truth, freqs) = target(args, &attr, &rows)?;
    let mechanisms = match args.task.task.is(&super::frequency::CLI) {
        true => list(&args.means.categorical_mechanism, "grr,oue,olh"),
        false => list(&args.means.numeric_mechanism, "pm,hm"),
    };
    let pb = progress((mechanisms.len() * epsilons.len()) as u64, "poison", args.format);
    let mut results = Vec::new();
    for name in &mechanisms {
        for &eps in &epsilons {
            // The task, its attacker and the honest estimate's closed-form variance.
            let (task, attacker, variance): (Box<dyn Task>, Attacker, f64) = match (&attr, freqs.as_ref()) {
                (Attribute::Categorical { .. }, Some(freqs)) => {
                    let t = frequency_task(attr.clone(), name.parse::<OracleKind>()?, eps)?;
                    let var = t.oracle().aggregate_variance(freqs, target) / n as f64;
                    let attacker = Attacker::frequency(&t, target)?;
                    (Box::new(t), attacker, var)
                }
                _ => {
                    let t = mean_task(attr.clone(), name.parse::<RecordNumeric>()?, eps)?;
                    let sum_t2: f64 = rows.iter().map(|r| if let Value::Unit(x) = r[0] { x * x } else { 0.0 }).sum();
                    let var = t.mechanism().numeric_variance(0, truth * n as f64, sum_t2, n as f64);
                    let attacker = Attacker::mean(&t)?;
                    (Box::new(t), attacker, var)
                }
            };
            let measured = measure(task.as_ref(), &attacker, &inputs, m, &attacks, args.runs, args.seed)?;
            let se_honest = variance.sqrt();
            for (a, got) in attacks.iter().zip(&measured) {
                let closed = attacker.expected_shift(*a, n, m, truth);
                let se = (got.shift.variance() / got.shift.n as f64).sqrt();
                results.push(Cell {
                    mechanism: name.clone(),
                    epsilon: eps,
                    attack: a.name(),
                    shift: got.shift.mean,
                    shift_std_error: se,
                    closed_form: closed,
                    ratio: got.shift.mean / closed,
                    z: (got.shift.mean - closed) / se,
                    honest_std_error: se_honest,
                    susceptibility: got.shift.mean / se_honest,
                });
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let out = Output {
        data,
        attribute: attr.name().to_string(),
        target: match &attr {
            Attribute::Categorical { categories, .. } => categories[target].clone(),
            _ => "mean".into(),
        },
        truth,
        n,
        fake_devices: m,
        beta: m as f64 / (n + m) as f64,
        runs: args.runs,
        seed: args.seed,
        results,
    };
    crate::output::emit(&out, args.format, None, |_, _| Ok(()), print_table)
}

/// The target's index (the category, 0 for a mean), its true value and, for a frequency, every
/// category's true frequency.
fn target(args: &SimulateArgs, attr: &Attribute, rows: &[[Value; 1]]) -> Result<(usize, f64, Option<Vec<f64>>)> {
    let n = rows.len().max(1) as f64;
    match attr {
        Attribute::Categorical { categories, .. } => {
            let mut f = vec![0.0; categories.len()];
            for r in rows {
                if let Value::Category(v) = r[0] {
                    f[v as usize] += 1.0 / n;
                }
            }
            let t = match &args.poison.poison_target {
                Some(label) => categories.iter().position(|c| c == label).ok_or_else(|| {
                    anyhow!("--poison-target is \"{label}\", expected one of: {}", categories.join(", "))
                })?,
                None => (0..f.len()).min_by(|&a, &b| f[a].total_cmp(&f[b])).unwrap_or(0),
            };
            Ok((t, f[t], Some(f)))
        }
        Attribute::Numeric { .. } => {
            if args.poison.poison_target.is_some() {
                bail!("--poison-target applies to --task frequency (a mean's attackers push toward the maximum)");
            }
            let sum: f64 = rows.iter().map(|r| if let Value::Unit(x) = r[0] { x } else { 0.0 }).sum();
            Ok((0, sum / n, None))
        }
    }
}

fn print_table(out: &Output) {
    println!(
        "harmony simulate --poison: {} — n = {} honest devices + {} fake (β = {:.4}), {} runs, seed {}",
        out.data, out.n, out.fake_devices, out.beta, out.runs, out.seed
    );
    let scale = if out.target == "mean" { " (on [-1, 1])" } else { "" };
    println!("target: {} = {}{scale}, true value {:.5}", out.attribute, out.target, out.truth);
    println!("shift = mean over runs of (poisoned − honest estimate) ± SE; closed = β·(E[Y_fake] − truth);");
    println!(
        "z = (shift − closed)/SE; honest SE = the target's closed-form SE without attackers; shift/SE = susceptibility."
    );
    println!();
    println!(
        "{:>5}  {:<6} {:<13} {:>11} {:>10} {:>11} {:>7} {:>6} {:>10} {:>9}",
        "eps", "mech", "attack", "shift", "± SE", "closed", "ratio", "z", "honest SE", "shift/SE"
    );
    for c in &out.results {
        println!(
            "{:>5}  {:<6} {:<13} {:>11.4e} {:>10.2e} {:>11.4e} {:>7.3} {:>6.2} {:>10.3e} {:>9.2}",
            c.epsilon,
            c.mechanism,
            c.attack,
            c.shift,
            c.shift_std_error,
            c.closed_form,
            c.ratio,
            c.z,
            c.honest_std_error,
            c.susceptibility
        );
    }
}
