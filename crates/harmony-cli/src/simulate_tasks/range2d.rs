//! `harmony simulate range2d --attributes X,Y`: rectangles and the heatmap of two numeric
//! columns, run through the `range2d` task a server runs (the experiment runner), per ε.
//!
//! Each column is cut into `2^L` equal-width bins over the schema's [min, max] (`--levels L`,
//! default 5). Each run is scored on `--queries` random rectangles (default 1,000, on bin
//! edges): the MSE of the consistent answers beside their closed-form variance at the true cell
//! fractions, and the CI coverage of the document's cells and rectangles. Run 1's estimate
//! document (rectangles `--rects`) is what `harmony query` prints for the same devices.

use crate::experiment::{self, Analysis, Column, Metrics, Setting, Show};
use crate::population::Population;
use crate::render::{self, Truth};
use crate::simulate::{SimulateArgs, load_inputs};
use anyhow::{Context, Result, anyhow, bail};
use harmony_analytics::range::grid2d::morton;
use harmony_analytics::range::{GridAnswers, HhAggregator, random_range};
use harmony_core::Aggregator;
use harmony_core::sampling::{fast_rng, stream_seed};
use harmony_core::schema::Schema;
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{EstimateDocument, Query};
use harmony_protocol::spec::TaskSpec;
use harmony_tasks::range2d::{Range2dTask, true_rect};
use harmony_tasks::{Task, TaskAggregator, Typed};

/// Random rectangles scored per run when `--queries` is not given.
const DEFAULT_RECTS: usize = 1000;

struct Range2d {
    title: String,
    schema: Schema,
    population: Population,
    spec: TaskSpec,
    epsilons: Vec<f64>,
    query: Query,
    levels: usize,
    /// The true share of each cell, row-major (`iy · 2^L + ix`).
    cells: Vec<f64>,
    /// The same in Morton order.
    morton_cells: Vec<f64>,
    /// The random rectangles `[x_a, x_b, y_a, y_b]` (bins) scored each run.
    rects: Vec<[usize; 4]>,
}

impl Analysis for Range2d {
    fn title(&self) -> String {
        self.title.clone()
    }
    fn schema(&self) -> Option<Schema> {
        Some(self.schema.clone())
    }
    fn settings(&self) -> Result<Vec<Setting>> {
        Ok(Setting::grid([("hh".to_string(), self.spec.clone())], &self.epsilons))
    }
    fn inputs(&self) -> Vec<harmony_tasks::Input<'_>> {
        self.population.inputs()
    }
    fn query(&self) -> Query {
        self.query.clone()
    }
    fn metrics(&self, _: &Setting, _: &dyn Task, agg: &dyn TaskAggregator, doc: &EstimateDocument) -> Result<Metrics> {
        let est = Typed::<HhAggregator>::of(agg)?
            .estimate()
            .map_err(|e| anyhow!("a level of the collection has no report ({e}): more devices are needed"))?;
        let answers = GridAnswers::new(self.levels, &est, &self.morton_cells)?;
        let side = 1 << self.levels;
        let (mut sq, mut predicted) = (0.0, 0.0);
        for b in &self.rects {
            let (e, v) = answers.rect([b[0], b[1]], [b[2], b[3]])?;
            sq += (e - true_rect(&self.cells, side, *b)).powi(2);
            predicted += v.noise + v.split;
        }
        let m = self.rects.len() as f64;
        let (covered, cells) = render::coverage(doc, &Truth::Grid { cells: self.cells.clone() });
        Ok(vec![
            ("mse", sq / m),
            ("predicted_mse", predicted / m),
            ("ci_coverage", covered as f64 / cells.max(1) as f64),
        ])
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            Column { header: "MSE", metric: "mse", show: Show::Sci },
            Column { header: "pred", metric: "predicted_mse", show: Show::Sci },
            Column { header: "ratio", metric: "mse", show: Show::Ratio("predicted_mse") },
            Column { header: "CI cover", metric: "ci_coverage", show: Show::Percent },
        ]
    }
    fn truth(&self) -> Option<Truth> {
        Some(Truth::Grid { cells: self.cells.clone() })
    }
    fn plot_metric(&self) -> (&'static str, &'static str) {
        ("mse", "MSE (fraction²)")
    }
}

/// `--queries`: the number of random rectangles scored per run.
fn rects_scored(args: &SimulateArgs) -> Result<usize> {
    let n = match &args.task.queries {
        None => DEFAULT_RECTS,
        Some(s) => {
            s.parse().with_context(|| format!("--queries is \"{s}\", expected a number of random rectangles"))?
        }
    };
    if n == 0 {
        bail!("--queries is 0, expected >= 1");
    }
    Ok(n)
}

/// The analysis `harmony simulate range2d` runs.
fn analysis(args: &SimulateArgs) -> Result<Range2d> {
    let query = crate::specs::range_query(None, None, args.task.rects.as_deref())?;
    let n_rects = rects_scored(args)?;
    let (data_name, file, enc) = load_inputs(&args.data, &args.schema, args.max_categories)?;
    let spec = task_spec(&args.task)?;
    let schema = file.schema()?;
    let epsilons = args.epsilon.clone().or(file.epsilon.clone()).unwrap_or(vec![0.5, 1.0, 2.0, 4.0]);
    let population = Population::records(&schema, enc.values);
    let req = CreateCollection { schema: Some(schema.clone()), epsilon: epsilons[0], task: spec };
    let config = harmony_tasks::resolve(&req, "simulation").context("--attributes/--levels")?;
    let spec = config.task.clone();
    let task = Range2dTask::new(config)?;
    let Truth::Grid { cells } = task.truth(&population.inputs())? else { bail!("a grid truth") };
    let side = task.side();
    let levels = side.trailing_zeros() as usize;
    let mut morton_cells = vec![0.0; side * side];
    for (i, &c) in cells.iter().enumerate() {
        morton_cells[morton(i % side, i / side)] = c;
    }
    let mut rng = fast_rng(stream_seed(args.seed, 0x2d));
    let rects = (0..n_rects)
        .map(|_| {
            let ((xa, xb), (ya, yb)) = (random_range(side, &mut rng), random_range(side, &mut rng));
            [xa, xb, ya, yb]
        })
        .collect();
    let title = format!(
        "harmony simulate range2d: {data_name} — n = {} devices, {} × {} in {side} × {side} cells, {n_rects} random rectangles",
        enc.n,
        task.x(),
        task.y()
    );
    Ok(Range2d { title, schema, population, spec, epsilons, query, levels, cells, morton_cells, rects })
}

/// Runs `harmony simulate range2d`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let a = analysis(args)?;
    experiment::emit(&a, args.runs, args.seed, args.format, args.plot.as_deref())
}

/// The `range2d` task on the command line.
pub const CLI: super::CliTask = super::CliTask {
    name: "range2d",
    about: "rectangles and a heatmap over two numeric columns (a quadtree)",
    options: &["attributes", "levels", "queries", "rects"],
    help: &[("attributes", "The two numeric columns X,Y"), ("queries", "Random rectangles scored per run (default 1000)")],
    not_taken: &[],
    simulate_examples: "# A heatmap of age × hours per week over a 32 × 32 grid, with two rectangles:
harmony simulate range2d --attributes age,hours_per_week --rects 25:45:35:45,17:91:60:100 --epsilon 1 --runs 2
# A 16 × 16 grid at two budgets, scored on 200 random rectangles:
harmony simulate range2d --attributes age,hours_per_week --levels 4 --queries 200 --epsilon 1,4 --runs 2",
    create_examples: "# A heatmap of age × hours per week (32 × 32 cells):
harmony collection create range2d --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --attributes age,hours_per_week
# A coarser 16 × 16 grid:
harmony collection create range2d --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --attributes age,hours_per_week --levels 4",
    spec,
    simulate: run,
    demo: None,
};

fn spec(a: &super::SpecArgs<'_>) -> Result<harmony_protocol::spec::TaskSpec> {
    a.file()?;
    task_spec(a.task)
}

/// The `range2d` spec: `--attributes X,Y` (two numeric attributes) and `--levels`.
fn task_spec(t: &super::TaskArgs) -> Result<TaskSpec> {
    let names = t.attributes.clone().unwrap_or_default();
    let [x, y] = &names[..] else {
        bail!("--attributes has {} values, expected the two numeric columns X,Y of --task range2d", names.len())
    };
    Ok(harmony_tasks::range2d::task_spec(x, y, t.levels))
}
