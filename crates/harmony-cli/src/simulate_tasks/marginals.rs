//! `harmony simulate --task marginals`: k-way marginals by CALM (with its post-processings) and
//! the baselines, through the `marginals` task a server runs (the experiment runner).
//! Categorical attributes are used as they are; numeric ones need `[bins]` in the schema
//! (equal-width bins over [min, max]).
//!
//! `--k 2|3` is the marginal order (the default `optimal` asks both 2- and 3-way marginals of one
//! collection); `--attributes` the attributes (default: every categorical and binned numeric
//! one); `--method calm,calm-family,calm-local,calm-gls,calm-raw,direct,fourier` (default
//! calm, calm-raw, direct, fourier); `--calm-l` forces CALM's marginal size; `--devices` the
//! devices CALM plans for (default: the data's rows). Per method and ε: the average SSE and TVD
//! of the answered marginals against the truth, the predicted SSE (closed form, plug-in), and
//! the share of marginals answered (a Fourier coefficient no device drew leaves its marginals
//! without an estimate).

use crate::experiment::{self, Analysis, Column, Metrics, Setting, Show};
use crate::render::Truth;
use crate::simulate::SimulateArgs;
use anyhow::{Result, bail};
use harmony_core::schema::{Schema, Value};
use harmony_protocol::estimates::{EstimateDocument, MarginalResult, MarginalsEstimate};
use harmony_protocol::spec::{MarginalsSpec, TaskSpec};
use harmony_tasks::marginals::MarginalsTask;
use harmony_tasks::text::true_cells;
use harmony_tasks::{Input, Task, TaskAggregator};
use std::sync::Mutex;

/// The methods run when `--method` is not given.
const DEFAULT_METHODS: [&str; 4] = ["calm", "calm-raw", "direct", "fourier"];

struct Marginals {
    title: String,
    schema: Schema,
    values: Vec<Value>,
    specs: Vec<(String, MarginalsSpec)>,
    epsilons: Vec<f64>,
    /// The true cells of each marginal (by its attributes), filled as documents are scored.
    truth: Mutex<Vec<(Vec<String>, Vec<f64>)>>,
}

impl Marginals {
    /// The true cells of a document's marginal, computed once per marginal.
    fn true_cells(&self, task: &MarginalsTask, m: &MarginalResult) -> Result<Vec<f64>> {
        let mut cache = self.truth.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, t)) = cache.iter().find(|(a, _)| *a == m.attributes) {
            return Ok(t.clone());
        }
        let cells = true_cells(task, &self.values, self.schema.len(), m)?;
        cache.push((m.attributes.clone(), cells.clone()));
        Ok(cells)
    }
}

impl Analysis for Marginals {
    fn title(&self) -> String {
        self.title.clone()
    }
    fn schema(&self) -> Option<Schema> {
        Some(self.schema.clone())
    }
    fn settings(&self) -> Result<Vec<Setting>> {
        let specs = self.specs.iter().map(|(label, s)| (label.clone(), TaskSpec::from(s.clone())));
        Ok(Setting::grid(specs, &self.epsilons))
    }
    fn inputs(&self) -> Vec<Input<'_>> {
        self.values.chunks_exact(self.schema.len()).map(Input::Record).collect()
    }
    fn metrics(&self, _: &Setting, task: &dyn Task, _: &dyn TaskAggregator, doc: &EstimateDocument) -> Result<Metrics> {
        let doc: &MarginalsEstimate = (&doc.result).try_into()?;
        let task = MarginalsTask::new(task.config().clone())?;
        let (mut sse, mut tvd, mut pred, mut answered) = (0.0, 0.0, Some(0.0), 0usize);
        for m in &doc.marginals {
            if m.cells.iter().any(|c| c.estimate.is_none()) {
                continue;
            }
            let truth = self.true_cells(&task, m)?;
            answered += 1;
            sse += m.cells.iter().zip(&truth).map(|(c, t)| (c.value() - t).powi(2)).sum::<f64>();
            tvd += 0.5 * m.cells.iter().zip(&truth).map(|(c, t)| (c.value() - t).abs()).sum::<f64>();
            pred = pred.zip(m.predicted_sse).map(|(a, b)| a + b);
        }
        let a = answered.max(1) as f64;
        let mut out =
            vec![("sse", sse / a), ("tvd", tvd / a), ("answered", answered as f64 / doc.marginals.len() as f64)];
        if let Some(p) = pred {
            out.push(("predicted_sse", p / a));
        }
        Ok(out)
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            Column { header: "avg SSE", metric: "sse", show: Show::Sci },
            Column { header: "predicted", metric: "predicted_sse", show: Show::Sci },
            Column { header: "ratio", metric: "sse", show: Show::Ratio("predicted_sse") },
            Column { header: "avg TVD", metric: "tvd", show: Show::Sci },
            Column { header: "answered", metric: "answered", show: Show::Percent },
        ]
    }
    fn truth(&self) -> Option<Truth> {
        let cache = self.truth.lock().unwrap_or_else(|p| p.into_inner());
        Some(Truth::Marginals(cache.clone()))
    }
    fn plot_metric(&self) -> (&'static str, &'static str) {
        ("sse", "average SSE")
    }
}

/// Runs `harmony simulate --task marginals`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let t = &args.task;
    let (data_name, file, enc) = crate::simulate::load_inputs(&args.data, &args.schema, args.max_categories)?;
    let schema = file.schema()?;
    let methods: Vec<String> = match &t.method {
        Some(m) => m.iter().map(|s| s.trim().to_lowercase()).collect(),
        None => DEFAULT_METHODS.iter().map(|s| s.to_string()).collect(),
    };
    let mut specs = Vec::with_capacity(methods.len());
    for m in &methods {
        let mut spec = crate::specs::marginals(t, &args.means, &file, m)?;
        if spec.method == harmony_protocol::spec::MarginalsMethod::Calm {
            spec.users = Some(t.train.devices.unwrap_or(enc.n as u64));
        }
        specs.push((m.clone(), spec));
    }
    let a = Marginals {
        title: format!(
            "harmony simulate --task marginals: {data_name} — n = {} devices, {}-way marginals",
            enc.n,
            crate::specs::marginal_orders(&args.means.k)?
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        schema,
        values: enc.values,
        specs,
        epsilons: args.epsilon.clone().or(file.epsilon.clone()).unwrap_or_else(|| vec![0.5, 1.0, 2.0, 4.0]),
        truth: Mutex::new(Vec::new()),
    };
    experiment::emit(&a, args.runs, args.seed, args.format, args.plot.as_deref())
}

/// The `marginals` task on the command line.
pub const CLI: super::CliTask = super::CliTask {
    name: "marginals",
    about: "k-way marginals of categorical and binned numeric attributes",
    options: &["attributes", "method", "k", "calm_l", "devices"],
    help: &[],
    not_taken: &[],
    simulate_examples: "# 2-way marginals of three attributes, every method:
harmony simulate marginals --attributes sex,race,income --k 2 --epsilon 1 --runs 2
# CALM only, planned for 100,000 devices:
harmony simulate marginals --attributes sex,race,income,workclass --method calm --devices 100000 --epsilon 1 --runs 2",
    create_examples: "# 2-way marginals of sex, race and income:
harmony collection create marginals --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --attributes sex,race,income --k 2
# CALM, planned for 100,000 devices:
harmony collection create marginals --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --attributes sex,race,income --method calm --devices 100000",
    spec,
    simulate: run,
    demo: None,
};

/// One method (`--method`, default calm).
fn spec(a: &super::SpecArgs<'_>) -> Result<TaskSpec> {
    let names = a.task.method.clone().unwrap_or(vec!["calm".into()]);
    let [name] = &names[..] else { bail!("--method has {} values, expected one for a collection", names.len()) };
    Ok(crate::specs::marginals(a.task, a.means, a.file()?, name)?.into())
}

#[cfg(test)]
mod tests {
    use crate::simulate::SimulateArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimulateArgs,
    }

    fn err(extra: &[&str]) -> String {
        let mut v = vec!["x", "--task", "marginals", "--runs", "1", "--format", "json", "--epsilon", "1"];
        v.extend_from_slice(extra);
        format!("{:#}", super::run(&Cli::parse_from(v).sim).unwrap_err())
    }

    #[test]
    fn bad_options_name_the_field() {
        let e = err(&["--attributes", "sex,nope"]);
        assert!(e.contains("task.attributes") && e.contains("nope"), "{e}");
        let e = err(&["--attributes", "age,sex"]);
        assert!(e.contains("task.bins") && e.contains("age"), "{e}");
        let e = err(&["--attributes", "sex"]);
        assert!(e.contains("task.attributes"), "{e}");
        let e = err(&["--method", "magic"]);
        assert!(e.contains("magic") && e.contains("calm-raw"), "{e}");
        let e = err(&["--k", "4"]);
        assert!(e.contains("expected 2 or 3"), "{e}");
    }

    #[test]
    fn runs_end_to_end_on_two_attributes() {
        let v = ["x", "--task", "marginals", "--runs", "2", "--format", "json", "--epsilon", "2"];
        let mut v = v.to_vec();
        v.extend_from_slice(&["--attributes", "sex,race", "--k", "2", "--method", "calm,direct,fourier"]);
        super::run(&Cli::parse_from(v).sim).unwrap();
    }
}
