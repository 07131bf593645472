//! `harmony simulate --task range|quantiles --column COL`: range queries, the CDF and quantiles
//! of one numeric column, run through the `range` task a server runs (the experiment runner):
//! hierarchical histograms (`hh`), Haar wavelets (`haar`) or flat OUE (`flat`), per ε.
//!
//! The column is discretized to D equal-width bins over the schema's [min, max] (`--bins`, else
//! the schema's `[bins]`, else the task's 64), as a collection created with the same options
//! does. Each run is scored on `--queries` random ranges (default 1,000, in bins): the MSE of
//! the answers (`hh`: the consistent ones), the MSE of the unbiased estimator whose closed-form
//! variance is exact (`hh`: the raw hierarchical one; the others: the answers) beside that
//! closed form, the CDF's CI coverage, and the quantiles' bin errors and coverage. Run 1's
//! estimate document (ranges `--ranges`, quantiles `--quantiles`) is what `harmony query`
//! prints for the same devices.

use crate::experiment::{self, Analysis, Column, Metrics, Setting, Show};
use crate::population::Population;
use crate::render::{self, Truth};
use crate::simulate::{SimulateArgs, load_inputs};
use anyhow::{Context, Result, bail};
use harmony_analytics::range::{cumulative, random_range, true_quantile};
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::schema::Schema;
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, Query, RangeEstimate};
use harmony_protocol::spec::{RangeMethod, RangeSpec, TaskSpec};
use harmony_tasks::range::RangeTask;
use harmony_tasks::{Task, TaskAggregator};

/// Random ranges scored per run when `--queries` is not given.
const DEFAULT_RANGES: usize = 1000;

struct Range {
    title: String,
    schema: Schema,
    population: Population,
    /// One spec per method.
    specs: Vec<RangeSpec>,
    epsilons: Vec<f64>,
    quantiles: bool,
    query: Query,
    /// The true fraction of devices in each bin.
    freqs: Vec<f64>,
    /// The random ranges [a, b) (bins) scored each run.
    ranges: Vec<(usize, usize)>,
}

impl Analysis for Range {
    fn title(&self) -> String {
        self.title.clone()
    }
    fn schema(&self) -> Option<Schema> {
        Some(self.schema.clone())
    }
    fn settings(&self) -> Result<Vec<Setting>> {
        let specs = self.specs.iter().map(|s| (s.method.name().to_string(), TaskSpec::from(s.clone())));
        Ok(Setting::grid(specs, &self.epsilons))
    }
    fn inputs(&self) -> Vec<harmony_tasks::Input<'_>> {
        self.population.inputs()
    }
    fn query(&self) -> Query {
        self.query.clone()
    }
    fn metrics(
        &self,
        _: &Setting,
        task: &dyn Task,
        agg: &dyn TaskAggregator,
        doc: &EstimateDocument,
    ) -> Result<Metrics> {
        let (Some(est), _) = RangeTask::new(task.config().clone())?.estimator(agg)? else {
            bail!("a level of the collection has no report: more devices are needed");
        };
        let cum = cumulative(&self.freqs);
        let (mut sq, mut sq_unbiased, mut predicted) = (0.0, 0.0, 0.0);
        for &(a, b) in &self.ranges {
            let truth = cum[b] - cum[a];
            sq += (est.answers().range_unchecked(a, b) - truth).powi(2);
            sq_unbiased += (est.unbiased_unchecked(a, b) - truth).powi(2);
            let p = est.answers().range_variance_cum(a, b, &cum);
            predicted += p.noise + p.split;
        }
        let m = self.ranges.len() as f64;
        let (covered, cells) = render::coverage(doc, &Truth::Range { bins: self.freqs.clone() });
        let r: &RangeEstimate = (&doc.result).try_into()?;
        let (mut q_covered, mut q_error) = (0.0, 0.0);
        for q in &r.quantiles {
            let t = true_quantile(&self.freqs, q.q);
            let (Some(bin), Some([lo, hi])) = (q.bin, q.interval_bins) else { bail!("a quantile without estimate") };
            q_covered += f64::from(lo <= t && t <= hi);
            q_error += (bin as f64 - t as f64).abs();
        }
        let nq = r.quantiles.len().max(1) as f64;
        Ok(vec![
            ("mse", sq / m),
            ("unbiased_mse", sq_unbiased / m),
            ("predicted_mse", predicted / m),
            ("cdf_ci_coverage", covered as f64 / cells.max(1) as f64),
            ("quantile_coverage", q_covered / nq),
            ("quantile_bin_error", q_error / nq),
        ])
    }
    fn columns(&self) -> Vec<Column> {
        if self.quantiles {
            return vec![
                Column { header: "|bin error|", metric: "quantile_bin_error", show: Show::Sci },
                Column { header: "q cover", metric: "quantile_coverage", show: Show::Percent },
                Column { header: "CDF cover", metric: "cdf_ci_coverage", show: Show::Percent },
            ];
        }
        vec![
            Column { header: "MSE", metric: "mse", show: Show::Sci },
            Column { header: "unbiased MSE", metric: "unbiased_mse", show: Show::Sci },
            Column { header: "pred", metric: "predicted_mse", show: Show::Sci },
            Column { header: "ratio", metric: "unbiased_mse", show: Show::Ratio("predicted_mse") },
            Column { header: "CDF cover", metric: "cdf_ci_coverage", show: Show::Percent },
        ]
    }
    fn truth(&self) -> Option<Truth> {
        Some(Truth::Range { bins: self.freqs.clone() })
    }
    fn plot_metric(&self) -> (&'static str, &'static str) {
        if self.quantiles { ("quantile_bin_error", "mean |bin error|") } else { ("mse", "MSE (fraction²)") }
    }
}

/// `--queries`: the number of random ranges scored per run.
fn ranges_scored(args: &SimulateArgs) -> Result<usize> {
    let n = match &args.task.queries {
        None => DEFAULT_RANGES,
        Some(s) => s.parse().with_context(|| format!("--queries is \"{s}\", expected a number of random ranges"))?,
    };
    if n == 0 {
        bail!("--queries is 0, expected >= 1");
    }
    Ok(n)
}

/// The analysis `harmony simulate --task range|quantiles` runs.
fn analysis(args: &SimulateArgs) -> Result<Range> {
    let query = crate::specs::range_query(args.task.ranges.as_deref(), args.task.quantiles.as_deref(), None)?;
    let n_ranges = ranges_scored(args)?;
    let (data_name, file, enc) = load_inputs(&args.data, &args.schema, args.max_categories)?;
    let specs = crate::specs::range_methods(&args.task)?
        .into_iter()
        .map(|m| crate::specs::range(&args.task, &file, m))
        .collect::<Result<Vec<_>>>()?;
    let schema = file.schema()?;
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]);
    let population = Population::records(&schema, enc.values);
    // The bins of the devices, as the task maps them (the first spec; all share the bins).
    let req = CreateCollection { schema: Some(schema.clone()), epsilon: epsilons[0], task: specs[0].clone().into() };
    let task = RangeTask::new(harmony_tasks::resolve(&req, "simulation").context("--column/--bins")?)?;
    let freqs = render::range_bins(&task, &population.inputs())?;
    let d = task.bins();
    let mut rng = fast_rng(stream_seed(args.seed, 0xa11));
    let ranges = (0..n_ranges).map(|_| random_range(d, &mut rng)).collect();
    let quantiles = args.task.task.is(&QUANTILES);
    let scored = if quantiles { String::new() } else { format!(", {n_ranges} random ranges") };
    let title = format!(
        "harmony simulate --task {}: {data_name} — n = {} devices, {} in D = {d} bins{scored}",
        args.task.task.name(),
        enc.n,
        specs[0].attribute
    );
    Ok(Range { title, schema, population, specs, epsilons, quantiles, query, freqs, ranges })
}

/// Runs `harmony simulate --task range` or `--task quantiles`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let a = analysis(args)?;
    experiment::emit(&a, args.runs, args.seed, args.format, args.plot.as_deref())
}

/// The options of `range` and `quantiles`.
pub const RANGE_OPTIONS: &[&str] = &["column", "bins", "branching", "method", "queries", "ranges", "quantiles"];

/// The `range` task on the command line.
pub const CLI: super::CliTask = super::CliTask {
    name: "range",
    about: "range queries [a, b), the CDF and quantiles of one numeric column",
    options: super::range::RANGE_OPTIONS,
    help: &[],
    not_taken: &[],
    simulate_examples: "# Ranges and quantiles of age, every method:
harmony simulate range --column age --epsilon 1 --runs 2
# The hierarchical method over 32 bins, with the ranges of a report:
harmony simulate range --column age --method hh --bins 32 --ranges 18:30,30:65 --epsilon 1 --runs 2",
    create_examples: "# Ranges and quantiles of age:
harmony collection create range --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --column age
# The Haar method over 32 bins:
harmony collection create range --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --column age --method haar --bins 32",
    spec,
    simulate: run,
    demo: None,
};

/// `quantiles`: a range collection, simulated and scored on its quantiles.
pub const QUANTILES: super::CliTask = super::CliTask {
    name: "quantiles",
    about: "quantiles of one numeric column (range, scored on quantiles)",
    options: super::range::RANGE_OPTIONS,
    help: &[],
    not_taken: &[],
    simulate_examples: "# The median and deciles of hours per week:
harmony simulate quantiles --column hours_per_week --quantiles 0.1,0.5,0.9 --epsilon 1 --runs 2
# With the Haar method only:
harmony simulate quantiles --column age --method haar --epsilon 2 --runs 2",
    create_examples: "# Quantiles of hours per week (a range collection):
harmony collection create quantiles --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --column hours_per_week
# Over 16 bins:
harmony collection create quantiles --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --column age --bins 16",
    spec,
    simulate: run,
    demo: None,
};

/// One method (`--method`, default hh) over `--column`.
fn spec(a: &super::SpecArgs<'_>) -> Result<TaskSpec> {
    let file = a.file()?;
    let methods = if a.task.method.is_some() { crate::specs::range_methods(a.task)? } else { vec![RangeMethod::Hh] };
    let [method] = methods[..] else { bail!("--method has {} values, expected one for a collection", methods.len()) };
    Ok(crate::specs::range(a.task, file, method)?.into())
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
        let a = args(extra);
        let e = analysis(&a).and_then(|x| experiment::run(&x, 1, 1).map(|_| ()));
        format!("{:#}", e.expect_err("the options must be rejected"))
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
            assert!(e.contains("--quantiles") && e.contains("(0, 1)"), "{e}");
        }
        let e = err(&["--task", "range", "--column", "age", "--ranges", "30:20"]);
        assert!(e.contains("--ranges") && e.contains("LO <= HI"), "{e}");
        let e = err(&["--task", "range", "--column", "age", "--method", "wavelet"]);
        assert!(e.contains("--method has \"wavelet\"") && e.contains("hh, haar or flat"), "{e}");
        let e = err(&["--task", "range", "--column", "age", "--branching", "1", "--method", "hh"]);
        assert!(e.contains("task.branching is 1"), "{e}");
        let e = err(&["--task", "range", "--column", "age", "--bins", "1"]);
        assert!(e.contains("--bins is 1"), "{e}");
        let e = err(&["--task", "range", "--column", "age", "--queries", "many"]);
        assert!(e.contains("--queries is \"many\""), "{e}");
    }

    #[test]
    fn small_runs_are_reproducible_and_match_the_closed_form() {
        let a = args(&["--task", "range", "--column", "age", "--queries", "200", "--epsilon", "1,4"]);
        let x = analysis(&a).unwrap();
        // Age's bounds are integers 73 apart: one bin per year.
        assert_eq!(x.freqs.len(), 73, "the task's default bins");
        let o = experiment::run(&x, 20, 1).unwrap();
        let again = experiment::run(&x, 20, 1).unwrap();
        assert_eq!(o.results.len(), 6);
        for (r, s) in o.results.iter().zip(&again.results) {
            assert_eq!(r.metrics["mse"].mean, s.metrics["mse"].mean, "same seed, same errors");
            // The unbiased estimator's MSE against its exact variance, within z = 4.42 standard
            // errors of the mean over the 20 runs (1e-5 if the mean were normal; the t tail with
            // 19 degrees of freedom makes it about 3e-4 per cell).
            let (u, p) = (&r.metrics["unbiased_mse"], r.metrics["predicted_mse"].mean);
            assert!(
                (u.mean - p).abs() <= 4.42 * u.std_error.unwrap(),
                "{} at ε {}: {} vs {p}",
                r.label,
                r.epsilon,
                u.mean
            );
        }
        assert!(o.results[0].metrics["mse"].mean < o.results[0].metrics["unbiased_mse"].mean, "hh consistency helps");
        let q = args(&[
            "--task",
            "quantiles",
            "--column",
            "age",
            "--epsilon",
            "2",
            "--method",
            "haar",
            "--quantiles",
            "0.5",
        ]);
        let o = experiment::run(&analysis(&q).unwrap(), 3, 1).unwrap();
        let doc: &RangeEstimate = (&o.results[0].estimates.result).try_into().unwrap();
        assert_eq!(doc.quantiles.len(), 1);
        assert!(o.results[0].metrics["quantile_bin_error"].mean <= 3.0, "{:?}", o.results[0].metrics);
    }
}
