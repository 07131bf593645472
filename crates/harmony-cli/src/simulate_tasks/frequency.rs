//! `harmony simulate --task frequency --column COL`: one categorical attribute through one
//! frequency oracle, run through the `frequency` task a server runs (the experiment runner):
//! per ε, the MSE of the frequencies beside the closed form and the CIs' coverage, and run 1's
//! estimate document beside the truth.

use crate::experiment::{self, Analysis, Column, Metrics, Setting, Show};
use crate::render::{self, Truth};
use crate::simulate::{SimulateArgs, load_inputs};
use anyhow::{Result, anyhow};
use harmony_core::FrequencyOracle;
use harmony_core::schema::{Schema, Value};
use harmony_protocol::estimates::{EstimateDocument, FrequencyEstimate};
use harmony_protocol::spec::{FrequencySpec, TaskSpec};
use harmony_tasks::frequency::FrequencyTask;
use harmony_tasks::{Input, Task, TaskAggregator};

struct Frequency {
    title: String,
    schema: Schema,
    values: Vec<Value>,
    spec: FrequencySpec,
    epsilons: Vec<f64>,
    truth: Vec<f64>,
}

impl Analysis for Frequency {
    fn title(&self) -> String {
        self.title.clone()
    }
    fn schema(&self) -> Option<Schema> {
        Some(self.schema.clone())
    }
    fn settings(&self) -> Result<Vec<Setting>> {
        let d = self.truth.len();
        Ok(self
            .epsilons
            .iter()
            .map(|&epsilon| {
                let label = match self.spec.mechanism {
                    Some(m) => m.name().to_string(),
                    None => format!("{} (default)", harmony_tasks::frequency::default_oracle(epsilon, d)),
                };
                Setting { label, epsilon, spec: self.spec.clone().into() }
            })
            .collect())
    }
    fn inputs(&self) -> Vec<Input<'_>> {
        self.values.chunks_exact(self.schema.len()).map(Input::Record).collect()
    }
    fn metrics(
        &self,
        _: &Setting,
        task: &dyn Task,
        agg: &dyn TaskAggregator,
        doc: &EstimateDocument,
    ) -> Result<Metrics> {
        let f: &FrequencyEstimate = (&doc.result).try_into()?;
        let d = self.truth.len() as f64;
        let sq: f64 = f.categories.iter().zip(&self.truth).map(|(c, t)| (c.frequency.value() - t).powi(2)).sum();
        let (covered, cells) = render::coverage(doc, &Truth::Frequency(self.truth.clone()));
        // The closed form at the true frequencies: the task's oracle's.
        let oracle = FrequencyTask::new(task.config().clone())?.oracle().clone();
        let n = agg.count() as f64;
        let predicted = (0..self.truth.len()).map(|v| oracle.aggregate_variance(&self.truth, v)).sum::<f64>() / (d * n);
        Ok(vec![("mse", sq / d), ("predicted_mse", predicted), ("ci_coverage", covered as f64 / cells as f64)])
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            Column { header: "MSE", metric: "mse", show: Show::Sci },
            Column { header: "pred", metric: "predicted_mse", show: Show::Sci },
            Column { header: "ratio", metric: "mse", show: Show::Ratio("predicted_mse") },
            Column { header: "cover", metric: "ci_coverage", show: Show::Percent },
        ]
    }
    fn truth(&self) -> Option<Truth> {
        Some(Truth::Frequency(self.truth.clone()))
    }
}

/// Runs `harmony simulate --task frequency`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let (data_name, file, enc) = load_inputs(&args.data, &args.schema, args.max_categories)?;
    let schema = file.schema()?;
    let spec = crate::specs::frequency(&args.task, &args.means)?;
    let j = schema
        .attributes()
        .iter()
        .position(|a| a.name() == spec.attribute)
        .ok_or_else(|| anyhow!("--column is \"{}\", expected one of the schema's attributes", spec.attribute))?;
    let truth = render::record_truth(&schema, &enc.values).swap_remove(j);
    let a = Frequency {
        title: format!(
            "harmony simulate --task frequency: {data_name} — n = {} devices, attribute {}",
            enc.n, spec.attribute
        ),
        schema,
        values: enc.values,
        spec,
        epsilons: args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]),
        truth,
    };
    experiment::emit(&a, args.runs, args.seed, args.format, args.plot.as_deref())
}

/// The `frequency` task on the command line.
pub const CLI: super::CliTask = super::CliTask {
    name: "frequency",
    about: "the frequencies of one categorical column, with any oracle",
    options: &["column", "categorical_mechanism", "poison", "attack", "poison_target"],
    help: &[],
    not_taken: &[],
    simulate_examples: "# The frequencies of education with every oracle the planner would pick from:
harmony simulate frequency --column education --epsilon 1 --runs 2
# With OLH only, and 5% fake devices pushing the rarest label:
harmony simulate frequency --column education --categorical-mechanism olh --poison 0.05 --epsilon 2 --runs 2",
    create_examples: "# The frequencies of race (the oracle with the least variance for its labels):
harmony collection create frequency --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --column race
# With OUE:
harmony collection create frequency --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --column race --categorical-mechanism oue",
    spec,
    simulate: run,
    demo: Some(|t| {
        t.column.get_or_insert_with(|| "education".into());
    }),
};

fn spec(a: &super::SpecArgs<'_>) -> Result<TaskSpec> {
    a.file()?;
    Ok(crate::specs::frequency(a.task, a.means)?.into())
}
