//! `harmony plan`: closed-form predicted standard errors per attribute for every strategy and
//! mechanism, before any data exists; the recommended choice; and the users needed for a target.

use crate::data::SchemaFile;
use crate::output::Format;
use anyhow::{Result, anyhow, bail};
use clap::Args;
use harmony_core::kinds::OracleKind;
use harmony_core::schema::{Attribute, Schema};
use harmony_core::strategy::plan;
use serde::Serialize;
use std::path::PathBuf;

/// Options of `harmony plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Schema (TOML). Default: the bundled examples/adult.toml.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Number of devices (`--users` is an alias).
    #[arg(long, alias = "users")]
    pub devices: Option<u64>,
    /// Privacy budgets, comma-separated (default: the schema's, else 1).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub epsilon: Option<Vec<f64>>,
    /// Target standard error (on [-1, 1] for numeric, on frequencies for categorical): prints
    /// the users each choice needs so that every attribute meets it.
    #[arg(long, allow_negative_numbers = true)]
    pub target_error: Option<f64>,
    /// Also compare this categorical frequency oracle (any of them: oue, olh, cms, hcms,
    /// rappor, ...; the sketches with their default parameters) with split (duchi-multi) and
    /// sample-k (hm). Default: the schema's `categorical_mechanism`, if any.
    #[arg(long)]
    pub categorical_mechanism: Option<String>,
    /// Shuffle-model accounting instead (docs/SHUFFLE.md): the central (ε, δ) of a shuffled
    /// round of this many devices, each ε-LDP with the given --epsilon (Feldman–McMillan–Talwar's
    /// numerical bound).
    #[arg(long)]
    pub shuffle: Option<u64>,
    /// With --shuffle: the central δ.
    #[arg(long, default_value_t = 1e-6)]
    pub delta: f64,
    /// With --shuffle: the central ε to reach; prints the largest ε per device that reaches it.
    #[arg(long)]
    pub target_epsilon: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// One row of `harmony plan --shuffle`.
#[derive(Serialize)]
struct ShuffleRow {
    devices: u64,
    delta: f64,
    /// ε₀ per device.
    local_epsilon: f64,
    /// The certified central ε (upper bound) of a shuffled round of `devices` reports.
    central_epsilon: f64,
    /// The paper's closed form at the same point, when valid (looser).
    closed_form_epsilon: Option<f64>,
}

/// `harmony plan --shuffle N`: central ε per --epsilon, or with --target-epsilon the ε₀ per
/// device that reaches it.
fn shuffle_plan(args: &PlanArgs, n: u64) -> Result<Vec<ShuffleRow>> {
    use harmony_core::shuffle::{Options, closed_form_epsilon, local_epsilon_for, numerical_epsilon};
    let d = args.delta;
    let local: Vec<f64> = match (args.target_epsilon, &args.epsilon) {
        (Some(t), None) => {
            if !(t > 0.0 && t.is_finite()) {
                bail!("--target-epsilon is {t}, expected a finite number > 0");
            }
            vec![local_epsilon_for(n, t, d, Options::default()).map_err(|e| anyhow!("--shuffle: {e}"))?]
        }
        (None, Some(e)) => e.clone(),
        (Some(_), Some(_)) => {
            bail!("give --epsilon E0 (central ε of E0) or --target-epsilon E (E0 reaching E), not both")
        }
        (None, None) => bail!("--shuffle needs --epsilon E0 (the ε per device) or --target-epsilon E"),
    };
    local
        .into_iter()
        .map(|e0| {
            let central = numerical_epsilon(n, e0, d, Options::default()).map_err(|e| anyhow!("--shuffle: {e}"))?;
            let closed = closed_form_epsilon(n, e0, d).map_err(|e| anyhow!("--shuffle: {e}"))?;
            Ok(ShuffleRow {
                devices: n,
                delta: d,
                local_epsilon: e0,
                central_epsilon: central,
                closed_form_epsilon: closed,
            })
        })
        .collect()
}

fn print_shuffle(rows: &[ShuffleRow]) {
    println!(
        "harmony plan --shuffle: central (ε, δ) of a shuffled round (Feldman, McMillan, Talwar, FOCS 2021, numerical bound)"
    );
    println!("{:>12} {:>10} {:>12} {:>14} {:>14}", "devices", "delta", "eps0/device", "central eps", "closed form");
    for r in rows {
        let closed = r.closed_form_epsilon.map_or("-".into(), |c| format!("{c:.4}"));
        println!(
            "{:>12} {:>10.1e} {:>12.4} {:>14.4} {:>14}",
            r.devices, r.delta, r.local_epsilon, r.central_epsilon, closed
        );
    }
}

#[derive(Serialize)]
struct Choice {
    epsilon: f64,
    strategy: &'static str,
    numeric_mechanism: &'static str,
    categorical_mechanism: &'static str,
    k: usize,
    /// Mean over attributes of the worst-case standard error at `users`.
    mean_std_error: Option<f64>,
    /// Users needed so every attribute's worst-case SE ≤ target.
    users_needed: Option<u64>,
    attributes: Vec<AttrPlan>,
}

#[derive(Serialize)]
struct AttrPlan {
    name: String,
    kind: &'static str,
    /// Worst-case variance contributed per user (divide by n).
    variance_per_user: f64,
    /// Worst-case standard error at `users` ([-1, 1] scale for numeric; frequency for categorical).
    std_error: Option<f64>,
    /// The same in the attribute's units (numeric only).
    std_error_units: Option<f64>,
}

#[derive(Serialize)]
struct PlanOutput {
    users: Option<u64>,
    target_error: Option<f64>,
    choices: Vec<Choice>,
    recommended: Vec<usize>,
    /// What the recommendation minimises: "users_needed" (with `--target-error`: the fewest users
    /// that bring every attribute's worst-case SE to the target) or "mean_std_error".
    recommended_by: &'static str,
}

/// Runs `harmony plan`.
pub fn run(args: PlanArgs) -> Result<()> {
    if let Some(n) = args.shuffle {
        let rows = shuffle_plan(&args, n)?;
        match args.format {
            Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
            Format::Table => print_shuffle(&rows),
        }
        return Ok(());
    }
    let path = args.schema.clone().unwrap_or_else(|| crate::data::bundled("examples/adult.toml"));
    let out = plan(&args, &path)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Table => print_table(&out, &path.display().to_string()),
    }
    Ok(())
}

/// The plan for the schema at `path`: every combination's predicted errors and the recommendation.
fn plan(args: &PlanArgs, path: &std::path::Path) -> Result<PlanOutput> {
    let file = SchemaFile::load(path)?;
    let schema = file.schema()?;
    if args.devices.is_none() && args.target_error.is_none() {
        bail!("give --devices N (predicted errors) and/or --target-error E (users needed)");
    }
    if let Some(u) = args.devices
        && u == 0
    {
        bail!("--devices is 0, expected an integer >= 1");
    }
    if let Some(t) = args.target_error
        && !(t > 0.0 && t.is_finite())
    {
        bail!("--target-error is {t}, expected a finite number > 0");
    }
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![1.0]);
    let mut choices = Vec::new();
    let mut recommended = Vec::new();
    let extra = args.categorical_mechanism.clone().or(file.categorical_mechanism.clone());
    let extra = match extra.as_deref() {
        Some(cat) => Some(cat.parse::<OracleKind>().map_err(|e| anyhow!("--categorical-mechanism: {e}"))?),
        None => None,
    };
    for (i, &eps) in epsilons.iter().enumerate() {
        let first = choices.len();
        let (compared, refused) = plan::compare_accepted(&schema, eps, extra)?;
        if i == 0 {
            for r in &refused {
                eprintln!(
                    "note: {} / {} / {} left out: {}",
                    r.strategy.name(),
                    r.numeric_mechanism,
                    r.categorical_mechanism,
                    r.reason
                );
            }
        }
        choices.extend(compared.iter().map(|c| choice(args, &schema, eps, c)));
        // With a target, the question is how many users each choice needs: recommend the fewest;
        // otherwise the least mean SE at the given users.
        let key = |c: &Choice| match c.users_needed {
            Some(u) => u as f64,
            None => c.mean_std_error.unwrap_or(f64::INFINITY),
        };
        let best = (first..choices.len())
            .min_by(|&a, &b| key(&choices[a]).total_cmp(&key(&choices[b])))
            .expect("at least one combination");
        recommended.push(best);
    }
    let recommended_by = if args.target_error.is_some() { "users_needed" } else { "mean_std_error" };
    Ok(PlanOutput { users: args.devices, target_error: args.target_error, choices, recommended, recommended_by })
}

/// One compared combination at ε = `eps` as printed: per-attribute SEs at `--devices`, users
/// needed for `--target-error`.
fn choice(args: &PlanArgs, schema: &Schema, eps: f64, c: &plan::PlanChoice) -> Choice {
    let attributes: Vec<AttrPlan> = schema
        .attributes()
        .iter()
        .zip(&c.variances)
        .map(|(a, &v)| {
            let se = args.devices.map(|n| (v / n as f64).sqrt());
            AttrPlan {
                name: a.name().to_string(),
                kind: if a.is_numeric() { "numeric" } else { "categorical" },
                variance_per_user: v,
                std_error: se,
                std_error_units: match a {
                    Attribute::Numeric { min, max, .. } => se.map(|s| s * 0.5 * (max - min)),
                    _ => None,
                },
            }
        })
        .collect();
    let mean_se = args
        .devices
        .map(|_| attributes.iter().map(|a| a.std_error.unwrap_or(0.0)).sum::<f64>() / attributes.len() as f64);
    Choice {
        epsilon: eps,
        strategy: c.strategy.name(),
        numeric_mechanism: c.numeric_mechanism,
        categorical_mechanism: c.categorical_mechanism,
        k: c.k,
        mean_std_error: mean_se,
        users_needed: args.target_error.map(|t| plan::users_needed(c, t)),
        attributes,
    }
}

fn print_table(out: &PlanOutput, schema: &str) {
    println!("harmony plan: {schema} — closed-form worst-case standard errors (no data needed)");
    if let Some(u) = out.users {
        println!("devices: {u}; SE on [-1, 1] for numeric attributes, on frequencies for categorical ones");
    }
    println!();
    println!(
        "{:>5}  {:<9} {:<12} {:<14} {:>3}  {:>12} {:>12} {:>14}",
        "eps", "strategy", "numeric", "categorical", "k", "mean SE", "worst SE", "users needed"
    );
    for (i, c) in out.choices.iter().enumerate() {
        let worst = c.attributes.iter().filter_map(|a| a.std_error).fold(0.0, f64::max);
        let mark = if out.recommended.contains(&i) { "  <- recommended" } else { "" };
        println!(
            "{:>5}  {:<9} {:<12} {:<14} {:>3}  {:>12} {:>12} {:>14}{mark}",
            c.epsilon,
            c.strategy,
            c.numeric_mechanism,
            c.categorical_mechanism,
            c.k,
            c.mean_std_error.map(|x| format!("{x:.3e}")).unwrap_or("-".into()),
            if out.users.is_some() { format!("{worst:.3e}") } else { "-".into() },
            c.users_needed.map(|x| x.to_string()).unwrap_or("-".into()),
        );
    }
    println!();
    match out.recommended_by {
        "users_needed" => println!(
            "recommended: the fewest users for a worst-case SE of {} on every attribute",
            out.target_error.unwrap_or(f64::NAN)
        ),
        _ => println!("recommended: the least mean SE"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(users: Option<u64>, target: Option<f64>) -> PlanArgs {
        PlanArgs {
            schema: None,
            devices: users,
            epsilon: Some(vec![0.5, 1.0, 4.0]),
            target_error: target,
            categorical_mechanism: None,
            shuffle: None,
            delta: 1e-6,
            target_epsilon: None,
            format: Format::Json,
        }
    }

    /// A categorical oracle named on the command line (a sketch here) is planned with split
    /// and sample-k, beside the fixed combinations; a name that is no oracle names the option.
    #[test]
    fn a_named_categorical_oracle_is_compared_too() {
        let path = crate::data::bundled("examples/adult.toml");
        let mut a = args(Some(100_000), None);
        a.categorical_mechanism = Some("hcms".into());
        let out = plan(&a, &path).unwrap();
        let hcms: Vec<&Choice> = out.choices.iter().filter(|c| c.categorical_mechanism == "hcms").collect();
        assert_eq!(hcms.len(), 2 * 3, "split and sample-k at three epsilons");
        assert_eq!(out.choices.len(), (plan::COMBOS.len() + 2) * 3);
        assert!(hcms.iter().all(|c| c.mean_std_error.is_some_and(|s| s.is_finite() && s > 0.0)));
        a.categorical_mechanism = Some("cms:k=64".into());
        let e = format!("{:#}", plan(&a, &path).err().unwrap());
        assert!(e.contains("--categorical-mechanism") && e.contains("cms:k=64") && e.contains("rappor"), "{e}");
    }

    /// With a target the recommendation is the choice needing the fewest users; without one, the
    /// least mean SE; one recommendation per ε.
    #[test]
    fn recommendation_answers_the_question_asked() {
        let path = crate::data::bundled("examples/adult.toml");
        let by_target = plan(&args(Some(100_000), Some(0.01)), &path).unwrap();
        let by_users = plan(&args(Some(100_000), None), &path).unwrap();
        assert_eq!((by_target.recommended_by, by_users.recommended_by), ("users_needed", "mean_std_error"));
        for out in [&by_target, &by_users] {
            assert_eq!(out.recommended.len(), 3);
            for (&best, eps) in out.recommended.iter().zip([0.5, 1.0, 4.0]) {
                let same: Vec<&Choice> = out.choices.iter().filter(|c| c.epsilon == eps).collect();
                assert_eq!(out.choices[best].epsilon, eps);
                if out.recommended_by == "users_needed" {
                    let least = same.iter().map(|c| c.users_needed.unwrap()).min().unwrap();
                    assert_eq!(out.choices[best].users_needed, Some(least));
                } else {
                    let least = same.iter().map(|c| c.mean_std_error.unwrap()).fold(f64::INFINITY, f64::min);
                    assert_eq!(out.choices[best].mean_std_error, Some(least));
                }
            }
        }
        // Users needed = ⌈worst-case variance / target²⌉, and its SE at that many users meets it.
        for c in &by_target.choices {
            let worst = c.attributes.iter().map(|a| a.variance_per_user).fold(0.0, f64::max);
            let n = c.users_needed.unwrap();
            assert!((worst / n as f64).sqrt() <= 0.01 && (worst / (n - 1) as f64).sqrt() > 0.01 - 1e-15);
        }
    }

    #[test]
    fn bad_options_are_named() {
        let path = crate::data::bundled("examples/adult.toml");
        let e = plan(&args(None, None), &path).err().unwrap().to_string();
        assert!(e.contains("--devices") && e.contains("--target-error"), "{e}");
        let e = plan(&args(Some(0), None), &path).err().unwrap().to_string();
        assert!(e.contains("--devices is 0"), "{e}");
        let e = plan(&args(Some(10), Some(-1.0)), &path).err().unwrap().to_string();
        assert!(e.contains("--target-error is -1"), "{e}");
    }
}
