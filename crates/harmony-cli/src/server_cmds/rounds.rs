//! Model rounds from the command line (docs/SERVER.md "Model rounds"):
//! `harmony collection create --task train` builds the collection's train spec,
//! `harmony submit` runs a CSV's rows as devices through the rounds (each one randomized
//! gradient, once) and `harmony query` prints the model and scores it on a CSV.

use super::QueryArgs;
use crate::data;
use crate::output::{Format, progress};
use crate::population::Population;
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use harmony_client::{Client, ClientError, DeviceTask, Policy, SimulatedDevices};
use harmony_core::schema::{Schema, Value};
use harmony_learn::cv::Experiment;
use harmony_protocol::estimates::{EstimateDocument, TrainEstimate};
use harmony_protocol::spec::{GradientMechanism, Model, Schedule, TrainSpec};
use harmony_protocol::{CollectionConfig, DeviceKey, GradientPost, ModelState};
use harmony_tasks::Input;
use harmony_tasks::train::feature_map;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// The options of `harmony collection create --task train`.
#[derive(Args, Debug, Clone, Default)]
pub struct TrainOptions {
    /// The target column (every other schema attribute is a feature).
    #[arg(long)]
    pub target: Option<String>,
    /// The model: logistic, linear or svm.
    #[arg(long)]
    pub model: Option<String>,
    /// Classification of a categorical target: the positive label (default: the second of two).
    #[arg(long)]
    pub positive: Option<String>,
    /// Classification of a numeric target: positive above this value (the target's units; a
    /// public number: `mean` of `harmony train` would need the private data).
    #[arg(long, allow_negative_numbers = true)]
    pub threshold: Option<String>,
    /// The gradient randomizer: hm (default) or pm.
    #[arg(long)]
    pub mechanism: Option<String>,
    /// Devices per round g (default with --devices N: the papers' max(2·d·ln d/ε², N/1000));
    /// linear-queries `--method adaptive-rounds`: the devices that answer each query (required).
    #[arg(long)]
    pub batch_size: Option<u64>,
    /// Rounds T (required by --schedule noise unless --devices gives it).
    #[arg(long)]
    pub rounds: Option<u64>,
    /// Expected devices N: plans T = ⌊N/g⌋ rounds (train); the devices CALM plans its marginals
    /// for (marginals; simulate: default the data's rows, collection create: 100,000).
    /// `--users` is an alias.
    #[arg(long, alias = "users")]
    pub devices: Option<u64>,
    /// Step sizes: noise (default; a constant step from public quantities, tail-averaged model)
    /// or decay (γ₀/√t with --learning-rate γ₀, last iterate).
    #[arg(long)]
    pub schedule: Option<String>,
    /// κ of the noise step (default 2).
    #[arg(long, allow_negative_numbers = true)]
    pub kappa: Option<f64>,
    /// Gradient scale c ≥ 1 applied on the devices before clipping (default 2 with noise, 1
    /// with decay).
    #[arg(long, allow_negative_numbers = true)]
    pub gradient_scale: Option<f64>,
    /// γ₀ of --schedule decay.
    #[arg(long, allow_negative_numbers = true)]
    pub learning_rate: Option<f64>,
    /// L2 regularisation λ (default 1e-4).
    #[arg(long, allow_negative_numbers = true)]
    pub lambda: Option<f64>,
    /// Open the rounds to any device id. By default only enrolled devices contribute gradients
    /// (train) or answers (linear-queries adaptive-rounds): mint their keys with `harmony
    /// collection token enroll` and give them to `harmony submit --device-keys FILE`. Open
    /// rounds take posts under invented device ids, which steer the model or fill a round.
    #[arg(long)]
    pub no_enrollment: bool,
}

impl TrainOptions {
    /// The options given, as `--name`s.
    fn given(&self) -> Vec<&'static str> {
        let o = self;
        [
            ("--target", o.target.is_some()),
            ("--model", o.model.is_some()),
            ("--positive", o.positive.is_some()),
            ("--threshold", o.threshold.is_some()),
            ("--mechanism", o.mechanism.is_some()),
            ("--batch-size", o.batch_size.is_some()),
            ("--rounds", o.rounds.is_some()),
            ("--devices", o.devices.is_some()),
            ("--schedule", o.schedule.is_some()),
            ("--kappa", o.kappa.is_some()),
            ("--gradient-scale", o.gradient_scale.is_some()),
            ("--learning-rate", o.learning_rate.is_some()),
            ("--lambda", o.lambda.is_some()),
            ("--no-enrollment", o.no_enrollment),
        ]
        .into_iter()
        .filter_map(|(n, g)| g.then_some(n))
        .collect()
    }
    /// An error when a training option is given to a task that does not take it (`taken`: the
    /// option ids the task takes, `batch_size`, …).
    pub fn check_unused_except(&self, taken: &[&str]) -> Result<()> {
        let id = |n: &str| n.trim_start_matches("--").replace('-', "_");
        let given: Vec<&str> = self.given().into_iter().filter(|n| !taken.contains(&id(n).as_str())).collect();
        match given.as_slice() {
            [] => Ok(()),
            given => bail!("invalid option: {} {} for --task train", given.join(", "), plural(given.len())),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "is" } else { "are" }
}

/// The option of a train-spec field (`batch_size` → `--batch-size`, `task` → `--model`).
fn option_name(field: &str) -> String {
    match field.trim_start_matches("task.") {
        "task" => "--model".into(),
        f => format!("--{}", f.replace('_', "-")),
    }
}

/// A local parameter error of the spec as an option error.
fn core_option_error(e: harmony_core::Error) -> anyhow::Error {
    match e {
        harmony_core::Error::InvalidParameter { name, value, expected } => {
            anyhow!("invalid option: {} is {value}, expected {expected}", option_name(name))
        }
        other => anyhow!(other),
    }
}

/// The server's rejection of a spec field as an option error (its message names the value and
/// the valid range); other errors unchanged.
pub fn option_error(e: ClientError) -> anyhow::Error {
    match e {
        ClientError::Rejected { status, field, message } if field.starts_with("task.") || field == "epsilon" => {
            anyhow!("invalid option: {}: {message} (server: HTTP {status} on {field})", option_name(&field))
        }
        other => anyhow!(other),
    }
}

/// λ of a spec without `--lambda` (the server's default).
const DEFAULT_LAMBDA: f64 = 1e-4;

/// `--threshold`: a number (the mean of the data is not known before collecting).
fn parse_threshold(v: &str) -> Result<f64> {
    match v.parse::<f64>() {
        Ok(t) if t.is_finite() => Ok(t),
        _ => bail!(
            "invalid option: --threshold is \"{v}\", expected a finite number in the target's units (a collection's threshold is public and fixed before any device reports: `mean` is for `harmony train` only)"
        ),
    }
}

/// A kebab-case name of a spec enum, or an option error listing the valid names.
fn parse_name<T: serde::de::DeserializeOwned>(option: &str, v: &str, valid: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(v.to_string()))
        .map_err(|_| anyhow!("invalid option: {option} is \"{v}\", expected one of {valid}"))
}

/// The train spec of `--task train`'s options on a schema. The features are checked here with
/// the function the server and the devices use (harmony-tasks' feature map); every other field
/// is validated by the server (`harmony_tasks::train::resolve`).
pub fn train_spec(schema: &Schema, epsilon: f64, o: &TrainOptions) -> Result<TrainSpec> {
    let model = o
        .model
        .as_deref()
        .ok_or_else(|| anyhow!("invalid option: --task train needs --model, expected one of linear, logistic, svm"))?;
    let task: Model = parse_name("--model", model, "linear, logistic, svm")?;
    let target = o.target.clone().ok_or_else(|| anyhow!("invalid option: --task train needs --target COLUMN"))?;
    if let (Some(t), Some(n)) = (o.rounds, o.devices) {
        bail!(
            "invalid option: --rounds {t} and --devices {n} both given, expected one (--devices N plans ⌊N/g⌋ rounds)"
        );
    }
    harmony_core::Epsilon::new(epsilon).map_err(core_option_error)?;
    let mechanism: GradientMechanism = match &o.mechanism {
        Some(m) => parse_name("--mechanism", m, "hm, pm")?,
        None => GradientMechanism::Hm,
    };
    let schedule: Schedule = match &o.schedule {
        Some(s) => parse_name("--schedule", s, "noise, decay")?,
        None => Schedule::Noise,
    };
    let mut spec = TrainSpec {
        task,
        target,
        positive: o.positive.clone(),
        threshold: o.threshold.as_deref().map(parse_threshold).transpose()?,
        mechanism,
        batch_size: 0,
        schedule: Some(schedule),
        learning_rate: o.learning_rate,
        kappa: o.kappa,
        gradient_scale: o.gradient_scale,
        lambda: o.lambda.unwrap_or(DEFAULT_LAMBDA),
        rounds: o.rounds,
        enrollment: o.no_enrollment.then_some(false),
    };
    let fm = feature_map(schema, &spec).map_err(core_option_error)?;
    spec.batch_size = match (o.batch_size, o.devices) {
        (Some(0), _) => bail!("invalid option: --batch-size is 0, expected an integer >= 1 (devices per round)"),
        (Some(g), _) => g,
        (None, Some(n)) => harmony_learn::trainer::default_batch_size(fm.dimension(), Some(epsilon), n as usize) as u64,
        (None, None) => bail!(
            "invalid option: --batch-size is missing, expected an integer >= 1 (devices per round), or --devices N for the papers' default"
        ),
    };
    if let Some(n) = o.devices {
        let g = spec.batch_size;
        if n < g {
            bail!(
                "invalid option: --devices is {n}, expected at least --batch-size = {g} devices (T = ⌊N/g⌋ = 0 rounds)"
            );
        }
        spec.rounds = Some(n / g);
    }
    Ok(spec)
}

/// The training spec and features of a config, or an error naming the collection.
fn train_of(config: &CollectionConfig) -> Result<(&TrainSpec, &[String])> {
    match (<&TrainSpec>::try_from(&config.task), &config.train) {
        (Ok(s), Some(p)) => Ok((s, &p.features)),
        _ => bail!("collection {} has no training task", config.id),
    }
}

/// What `submit` did to a training collection.
#[derive(Debug, Clone)]
pub struct RoundStats {
    /// Rows that acted as devices (randomized and posted a gradient).
    pub devices: usize,
    /// Gradients the server stored.
    pub stored: usize,
    /// Devices whose round had moved on when they posted (another submitter filled it): their
    /// one report was not stored and they are not asked again (that would spend ε twice).
    pub late: usize,
    /// Devices the server already had (a repeated run: a device resends its ledger entry).
    pub already: usize,
    /// Rows left unused because training was done.
    pub unused: usize,
    /// The round when the first device joined.
    pub first_round: u64,
    /// The model state after the last device.
    pub model: ModelState,
    /// Wall time.
    pub seconds: f64,
}

/// Device `i`'s gradient post at `model` through the SDK: a simulated device of `seed` (ids from
/// the OS CSPRNG, so a repeated run is new devices), or a real one (OS CSPRNG).
fn device_post(
    task: &DeviceTask,
    model: &ModelState,
    record: &[Value],
    i: usize,
    sim: &mut Option<SimulatedDevices>,
) -> Result<GradientPost> {
    let input = Input::Gradient { record, model };
    let item = match sim {
        Some(s) => s.item(task, i as u64, &input)?,
        None => {
            let mut rng = harmony_core::sampling::secure_rng();
            task.item(&input, &mut rng, &mut harmony_core::sampling::secure_rng())?
        }
    };
    Ok(GradientPost { device_id: item.id, round: model.round, report: item.report })
}

/// Rows are devices, in order: each joins the current round once, computes and randomizes its
/// gradient at the round's model and posts it; stops when training is done. With `seed`,
/// device i is the simulated device i of `harmony simulate --task train --seed`.
pub fn contribute_rows(
    client: &Client,
    config: &CollectionConfig,
    population: &Population,
    seed: Option<u64>,
    policy: &Policy,
    keys: Option<&[DeviceKey]>,
) -> Result<RoundStats> {
    let task = DeviceTask::with_policy(config.clone(), policy.clone())?;
    let mut sim = seed.map(SimulatedDevices::new);
    let inputs = population.inputs();
    let n = inputs.len();
    let t0 = Instant::now();
    let mut model = client.model(&config.id)?;
    let first_round = model.round;
    let (mut devices, mut late, mut already) = (0, 0, 0);
    let pb = progress(n as u64, "training rounds", Format::Table);
    for (i, input) in inputs.iter().enumerate() {
        if model.done {
            break;
        }
        let mut post = device_post(&task, &model, input.record("train")?, i, &mut sim)?;
        // An enrolled device posts under its key's id, with its key.
        let enrolled = match keys {
            Some(k) if i >= k.len() => break,
            Some(k) => {
                post.device_id = k[i].device_id.clone();
                Some(client.clone().with_token(&k[i].key))
            }
            None => None,
        };
        devices += 1;
        match enrolled.as_ref().unwrap_or(client).post_gradient(&config.id, &post) {
            Ok(ack) if ack.advanced => model = client.model(&config.id)?,
            Ok(_) => model.received += 1,
            Err(ClientError::Rejected { status: 409, field, .. }) if field == "device_id" => already += 1,
            Err(ClientError::Rejected { status: 409, field, .. }) if field == "round" => {
                late += 1;
                model = client.model(&config.id)?;
            }
            Err(e) => return Err(anyhow!(e).context(format!("device {} (row {})", i + 1, i + 2))),
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(RoundStats {
        devices,
        stored: devices - late - already,
        late,
        already,
        unused: n - devices,
        first_round,
        model: client.model(&config.id)?,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The device keys of a `harmony collection token enroll` CSV (`device_id,key` lines).
pub fn read_device_keys(path: &Path) -> Result<Vec<DeviceKey>> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow!("--device-keys {}: {e}", path.display()))?;
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1).filter(|(_, l)| !l.trim().is_empty()) {
        let Some((id, key)) = line.split_once(',') else {
            bail!("--device-keys {} line {}: expected `device_id,key`", path.display(), n + 1);
        };
        keys.push(DeviceKey { device_id: id.trim().to_string(), key: key.trim().to_string() });
    }
    if keys.is_empty() {
        bail!(
            "--device-keys {}: no device keys (expected the CSV of `harmony collection token enroll`)",
            path.display()
        );
    }
    Ok(keys)
}

/// `harmony submit` to a training collection.
pub fn submit(
    client: &Client,
    config: &CollectionConfig,
    population: &Population,
    seed: Option<u64>,
    policy: &Policy,
    keys: Option<&[DeviceKey]>,
) -> Result<()> {
    let st = contribute_rows(client, config, population, seed, policy, keys)?;
    let m = &st.model;
    if st.devices == 0 && m.done {
        eprintln!("collection {}: training was already done (round {}); no device was asked", config.id, m.round);
        return Ok(());
    }
    eprintln!(
        "{} devices posted one gradient each from round {} on: {} stored, {} late (round moved on; not asked again), {} already stored; {} rows unused; {:.2} s",
        st.devices, st.first_round, st.stored, st.late, st.already, st.unused, st.seconds
    );
    eprintln!(
        "collection {}: round {}{}, {} of {} gradients in the current round",
        config.id,
        m.round,
        if m.done { " (training done)" } else { "" },
        m.received,
        m.batch_size
    );
    Ok(())
}

/// A model scored on a CSV.
#[derive(Debug, Clone, Serialize)]
pub struct Score {
    /// The CSV.
    pub data: String,
    /// Its rows.
    pub n: usize,
    /// `misclassification` or `mse` (target on [-1, 1]).
    pub metric: &'static str,
    /// The model's metric.
    pub value: f64,
    /// `majority` or `mean`: the trivial predictor fitted on the same rows.
    pub baseline: &'static str,
    /// Its metric.
    pub baseline_value: f64,
}

/// Scores `w` on the CSV at `path` with the metric of `harmony train`
/// (`harmony_learn::cv::Experiment::score`).
pub fn score(config: &CollectionConfig, w: &[f64], path: &Path, target: Option<&str>) -> Result<Score> {
    let (spec, _) = train_of(config)?;
    if let Some(t) = target
        && t != spec.target
    {
        bail!(
            "invalid option: --target is \"{t}\", expected \"{}\" (the target collection {} trains for)",
            spec.target,
            config.id
        );
    }
    let schema = config.schema()?;
    let fm = feature_map(schema, spec)?;
    let enc = data::encode_file(path, schema, data::InvalidPolicy::Error)
        .with_context(|| format!("encoding {} against collection {}'s schema", path.display(), config.id))?;
    if enc.n == 0 {
        bail!("--data {} has no rows", path.display());
    }
    let dataset = fm.dataset(&enc.values, schema.len())?;
    let task = fm.task();
    let blocks = fm.block_lengths();
    let exp = Experiment {
        blocks: &blocks,
        data: &dataset,
        task,
        max_l1: fm.max_l1(),
        intercept: true,
        folds: 1,
        repeats: 1,
        seed: 0,
    };
    let all: Vec<u32> = (0..dataset.len() as u32).collect();
    let value = exp.score(w, &all);
    let y = &dataset.y;
    let mean = y.iter().sum::<f64>() / y.len() as f64;
    let (metric, baseline, baseline_value) = if task.is_classification() {
        let pos = y.iter().filter(|&&v| v > 0.0).count();
        ("misclassification", "majority", pos.min(y.len() - pos) as f64 / y.len() as f64)
    } else {
        ("mse", "mean", y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / y.len() as f64)
    };
    Ok(Score { data: path.display().to_string(), n: dataset.len(), metric, value, baseline, baseline_value })
}

/// `harmony query` on a training collection: what its table shows.
struct ModelReport<'a> {
    collection: &'a str,
    epsilon: f64,
    spec: &'a TrainSpec,
    state: &'a ModelState,
    /// `model` by feature name.
    coefficients: Vec<(&'a str, f64)>,
    score: Option<Score>,
}

/// The JSON of `harmony query` on a training collection: the estimate document (the model, as
/// `harmony simulate --task train` prints it) and, with `--data`, the model's score.
#[derive(Debug, Serialize)]
struct Scored<'a> {
    #[serde(flatten)]
    doc: &'a EstimateDocument,
    #[serde(skip_serializing_if = "Option::is_none")]
    score: Option<Score>,
}

/// `harmony query` on a training collection: the model state, the model's coefficients by
/// feature name and, with `--data`, its score.
pub fn query(a: &QueryArgs, config: &CollectionConfig) -> Result<()> {
    let (spec, features) = train_of(config)?;
    let doc = a.ca.client(&a.server)?.with_token(&a.token.required()?).estimates(&config.id, &Default::default())?;
    let Ok(t) = <&TrainEstimate>::try_from(&doc.result) else {
        bail!("collection {}: the server's estimates are not a model", config.id)
    };
    let m = &t.state;
    let score = match &a.data {
        Some(p) => Some(score(config, &m.model, p, a.target.as_deref())?),
        None if a.target.is_some() => bail!("invalid option: --target needs --data (the CSV to score the model on)"),
        None => None,
    };
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&Scored { doc: &doc, score })?),
        Format::Table => {
            let coefficients = features.iter().map(String::as_str).zip(m.model.iter().copied()).collect();
            let state = m;
            print_model(&ModelReport {
                collection: &config.id,
                epsilon: config.epsilon,
                spec,
                state,
                coefficients,
                score,
            });
        }
    }
    Ok(())
}

fn print_model(r: &ModelReport) {
    let (s, m) = (r.spec, r.state);
    let target = match (&s.positive, s.threshold) {
        (Some(p), _) => format!("{} = {p}", s.target),
        (None, Some(t)) => format!("{} > {t}", s.target),
        (None, None) => s.target.clone(),
    };
    println!(
        "collection {}: {} of {target}, {} gradients at ε = {}, {} devices per round, λ = {}",
        r.collection,
        s.task.name(),
        s.mechanism.name(),
        r.epsilon,
        m.batch_size,
        s.lambda
    );
    let planned = s.rounds.map_or("unbounded".to_string(), |t| format!("{t} planned"));
    let schedule = if m.schedule == Schedule::Noise { "noise" } else { "decay" };
    println!(
        "round {} ({planned}){}: {} of {} gradients received; schedule {schedule}, step γ = {:.6}",
        m.round,
        if m.done { ", training done" } else { "" },
        m.received,
        m.batch_size,
        m.step
    );
    if m.averaged > 0 {
        println!("model: the mean of the last {} iterates (tail average)", m.averaged);
    } else {
        println!("model: the last iterate");
    }
    println!("{:<40} {:>12}", "feature", "coefficient");
    for (f, w) in &r.coefficients {
        let f: String = f.chars().take(40).collect();
        println!("{f:<40} {w:>12.6}");
    }
    if let Some(sc) = &r.score {
        println!(
            "on {} ({} rows): {} {:.4} ({} predictor: {:.4})",
            sc.data, sc.n, sc.metric, sc.value, sc.baseline, sc.baseline_value
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_cmds::{CreateArgs, SubmitArgs, create};
    use harmony_core::sampling::{fast_rng, uniform01};
    use harmony_learn::mechanism::GradientRandomizer;
    use harmony_learn::remote::RemoteMechanism;
    use harmony_learn::trainer::{TrainConfig, train};
    use harmony_tasks::simulate::device_rng;
    use std::path::PathBuf;

    const SCHEMA: &str = "[[attributes]]\nname = \"x1\"\nkind = \"numeric\"\nmin = -1\nmax = 1\n\n\
        [[attributes]]\nname = \"x2\"\nkind = \"numeric\"\nmin = -1\nmax = 1\n\n\
        [[attributes]]\nname = \"label\"\nkind = \"categorical\"\ncategories = [\"no\", \"yes\"]\n";

    /// A fresh directory with `schema.toml` and `rows.csv`: n rows, label yes iff x1 + 0.5·x2 > 0.
    fn fixture(name: &str, n: usize) -> (PathBuf, PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("harmony-cli-rounds-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("schema.toml"), SCHEMA).unwrap();
        let mut rng = fast_rng(21);
        let mut csv = String::from("x1,x2,label\n");
        for _ in 0..n {
            let x1 = (2.0 * uniform01(&mut rng) - 1.0) * 0.999;
            let x2 = (2.0 * uniform01(&mut rng) - 1.0) * 0.999;
            let label = if x1 + 0.5 * x2 > 0.0 { "yes" } else { "no" };
            csv.push_str(&format!("{x1},{x2},{label}\n"));
        }
        std::fs::write(dir.join("rows.csv"), csv).unwrap();
        (dir.clone(), dir.join("schema.toml"), dir.join("rows.csv"))
    }

    /// `harmony collection create` parsed from these arguments.
    fn create_args(args: &[&str]) -> CreateArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            args: CreateArgs,
        }
        let mut v = vec!["create"];
        v.extend_from_slice(args);
        Wrap::parse_from(v).args
    }

    fn train_args(url: &str, schema: &Path, extra: &[&str]) -> CreateArgs {
        let schema = schema.display().to_string();
        let mut v = vec!["--server", url, "--token", "tok", "--schema", &schema, "--task", "train"];
        if !extra.contains(&"--target") {
            v.extend_from_slice(&["--target", "label"]);
        }
        v.extend_from_slice(extra);
        create_args(&v)
    }

    /// Device i of `contribute_rows(.., Some(seed))` inside the trainer: its report from
    /// `device_rng(seed, i)`.
    struct SeededDevices {
        mech: RemoteMechanism,
        seed: u64,
        next: u64,
    }

    impl GradientRandomizer for SeededDevices {
        fn name(&self) -> &'static str {
            "seeded-devices"
        }
        fn dimension(&self) -> usize {
            self.mech.dimension()
        }
        fn variance(&self) -> f64 {
            self.mech.variance()
        }
        fn randomize_add<R: rand::Rng + ?Sized>(&mut self, g: &[f64], _rng: &mut R, acc: &mut [f64]) {
            let mut rng = device_rng(self.seed, self.next);
            self.next += 1;
            self.mech.add(&self.mech.randomize(g, &mut rng), acc);
        }
    }

    /// `harmony_learn::trainer::train` (the `noise` schedule of the collection's spec) on the
    /// CSV's first `n` rows in order (T = ⌊n/g⌋ rounds), with the devices' seeded streams.
    fn trainer_model(config: &CollectionConfig, csv: &Path, n: usize, seed: u64) -> Vec<f64> {
        let (spec, _) = train_of(config).unwrap();
        let schema = config.schema().unwrap();
        let fm = feature_map(schema, spec).unwrap();
        let enc = data::encode_file(csv, schema, data::InvalidPolicy::Error).unwrap();
        let dataset = fm.dataset(&enc.values, schema.len()).unwrap();
        let users: Vec<u32> = (0..n as u32).collect();
        let mut cfg = TrainConfig::noise(harmony_learn::loss::Loss::for_task(fm.task()), fm.max_l1());
        cfg.schedule = harmony_learn::trainer::Schedule::Noise(spec.kappa.unwrap());
        cfg.gradient_scale = spec.gradient_scale.unwrap();
        cfg.lambda = spec.lambda;
        cfg.batch_size = Some(spec.batch_size as usize);
        let mech = RemoteMechanism::new(spec.mechanism.name(), config.epsilon, fm.dimension()).unwrap();
        let mut devices = SeededDevices { mech, seed, next: 0 };
        let m = train(&dataset, &users, &mut devices, Some(config.epsilon), &cfg, &mut fast_rng(0)).unwrap();
        assert_eq!(m.step, config.train.as_ref().unwrap().step.unwrap(), "the trainer's step is the published one");
        m.w
    }

    fn submit_args(url: &str, collection: &str, data: &Path, seed: u64) -> SubmitArgs {
        SubmitArgs {
            server: url.into(),
            ca: Default::default(),
            collection: collection.into(),
            data: data.to_path_buf(),
            concurrency: 1,
            batch: 1,
            simulate_devices: true,
            seed: Some(seed),
            column: None,
            transactions: false,
            separator: None,
            max_epsilon: None,
            budget: None,
            policy: None,
            budget_ledger: data.with_file_name("budget.json"),
            device_keys: None,
            invalid: None,
            schema: None,
            force: false,
            ..Default::default()
        }
    }

    /// `collection create --task train` (enrollment by default) → `collection token enroll` (a 0600 CSV)
    /// → `submit --device-keys`: every gradient stored under its key's device id; without keys
    /// the devices are refused (401) and the model does not move.
    #[test]
    fn enrolled_devices_submit_with_their_keys() {
        let (dir, schema, csv) = fixture("enroll", 60);
        let store = harmony_server::open_store(&format!("sqlite://{}", dir.join("db.sqlite").display())).unwrap();
        let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
        let url = server.url();
        let extra = ["--epsilon", "4", "--model", "logistic", "--batch-size", "10", "--rounds", "6"];
        let created = create(&train_args(&url, &schema, &extra)).unwrap();
        let client = Client::new(&url);
        let config = client.config(&created.id).unwrap();
        assert_eq!(train_of(&config).unwrap().0.enrollment, Some(true), "enrollment is the default");
        let population = super::super::submit::population(&config, &csv).unwrap();
        let open = Client::new(&url).with_retry(harmony_client::RetryPolicy { attempts: 1, ..Default::default() });
        let err = contribute_rows(&open, &config, &population, Some(1), &Policy::default(), None).unwrap_err();
        assert!(format!("{err:#}").contains("401"), "{err:#}");
        let keys_csv = dir.join("keys.csv");
        let enroll = crate::server_cmds::tokens::TokenCommand::Enroll {
            at: crate::server_cmds::tokens::ServerToken {
                server: url.clone(),
                ca: Default::default(),
                token: "tok".into(),
            },
            collection: config.id.clone(),
            count: 50,
            label: "test".into(),
            out: keys_csv.clone(),
        };
        crate::server_cmds::tokens::run(enroll).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&keys_csv).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let keys = read_device_keys(&keys_csv).unwrap();
        let st = contribute_rows(&client, &config, &population, Some(1), &Policy::default(), Some(&keys)).unwrap();
        assert_eq!((st.stored, st.already, st.late, st.unused), (50, 0, 0, 10), "50 keys for 60 rows");
        assert_eq!((st.model.round, st.model.received), (6, 0));
        let again = contribute_rows(&client, &config, &population, Some(2), &Policy::default(), Some(&keys)).unwrap();
        assert_eq!((again.stored, again.already), (0, 50), "each key posts once");
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `collection create --task train` → `submit --simulate-devices` → the server's model
    /// equals the trainer's on the same device streams to 1e-12 and `harmony simulate --task
    /// train`'s (the same task objects in process); a repeated `harmony submit` after the last
    /// round changes nothing; at ε = 8 it beats the majority class on the rows; `--devices` plans
    /// ⌊N/g⌋ rounds.
    #[test]
    fn create_submit_query_equals_the_trainer() {
        let (dir, schema, csv) = fixture("e2e", 200);
        let store = harmony_server::open_store(&format!("sqlite://{}", dir.join("db.sqlite").display())).unwrap();
        let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
        let url = server.url();
        let client = Client::new(&url);
        for (extra, rounds) in [
            (
                vec![
                    "--epsilon",
                    "8",
                    "--model",
                    "logistic",
                    "--batch-size",
                    "25",
                    "--devices",
                    "200",
                    "--no-enrollment",
                ],
                8u64,
            ),
            (
                vec![
                    "--epsilon",
                    "1",
                    "--model",
                    "svm",
                    "--mechanism",
                    "pm",
                    "--batch-size",
                    "20",
                    "--rounds",
                    "9",
                    "--no-enrollment",
                ],
                9,
            ),
        ] {
            let created = create(&train_args(&url, &schema, &extra)).unwrap();
            let config = client.config(&created.id).unwrap();
            assert_eq!(train_of(&config).unwrap().0.rounds, Some(rounds));
            let seed = 7;
            let population = super::super::submit::population(&config, &csv).unwrap();
            let st = contribute_rows(&client, &config, &population, Some(seed), &Policy::default(), None).unwrap();
            // g·T devices are used, the rest of the 200 rows are not asked.
            let used = if rounds == 8 { 200 } else { 180 };
            assert_eq!((st.already, st.late, st.stored, st.unused), (0, 0, used, 200 - used), "{extra:?}");
            // `harmony simulate --task train`: the same task in process, the same devices.
            let task = harmony_tasks::build(&config).unwrap();
            let sim = harmony_tasks::simulate::run(task.as_ref(), &population.inputs(), seed).unwrap();
            let doc = task.estimate(sim.as_ref(), &Default::default()).unwrap();
            let harmony_protocol::estimates::TaskEstimate::Train(sim) = doc else { panic!("{doc:?}") };
            let m = client.model(&created.id).unwrap();
            assert_eq!((m.round, m.received, m.done), (rounds + 1, 0, true));
            let want = trainer_model(&config, &csv, used, seed);
            assert_eq!(m.model.len(), want.len());
            for ((a, b), c) in m.model.iter().zip(&want).zip(&sim.state.model) {
                assert!((a - b).abs() <= 1e-12, "{extra:?}: server {:?} vs trainer {want:?}", m.model);
                assert!((a - c).abs() <= 1e-12, "{extra:?}: server {:?} vs simulate {:?}", m.model, sim.state.model);
            }
            // `harmony submit --simulate-devices --seed 7` again: its devices are new ones (report
            // ids from the OS CSPRNG), but training is done, so none is asked and the model stays.
            super::super::submit(submit_args(&url, &created.id, &csv, seed)).unwrap();
            assert_eq!(client.model(&created.id).unwrap(), m, "{extra:?}: a run after the last round");
            let sc = score(&config, &m.model, &csv, Some("label")).unwrap();
            assert_eq!((sc.metric, sc.n), ("misclassification", 200));
            if extra[1] == "8" {
                assert!(sc.value < sc.baseline_value * 2.0 / 3.0, "{} vs majority {}", sc.value, sc.baseline_value);
            }
            let e = format!("{:#}", score(&config, &m.model, &csv, Some("x1")).unwrap_err());
            assert!(e.contains("--target is \"x1\", expected \"label\""), "{e}");
            for format in [Format::Table, Format::Json] {
                let q = QueryArgs {
                    server: url.clone(),
                    ca: Default::default(),
                    token: "tok".into(),
                    collection: created.id.clone(),
                    format,
                    data: Some(csv.clone()),
                    target: None,
                    ranges: None,
                    quantiles: None,
                    rects: None,
                    column: None,
                    window: Default::default(),
                };
                super::super::query(q).unwrap();
            }
        }
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `harmony submit --max-epsilon 1` to an ε = 8 collection is refused by the device policy
    /// (naming the rule, the value and the limit) before any gradient is posted; the default
    /// policy accepts it; `--simulate-devices` to a non-loopback server is refused before any
    /// request.
    #[test]
    fn submit_enforces_the_device_policy() {
        let (dir, schema, csv) = fixture("policy", 40);
        let store = harmony_server::open_store(&format!("sqlite://{}", dir.join("db.sqlite").display())).unwrap();
        let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
        let url = server.url();
        let extra = ["--epsilon", "8", "--model", "logistic", "--batch-size", "10", "--rounds", "2", "--no-enrollment"];
        let created = create(&train_args(&url, &schema, &extra)).unwrap();
        let strict = SubmitArgs { max_epsilon: Some(1.0), ..submit_args(&url, &created.id, &csv, 7) };
        let e = format!("{:#}", super::super::submit(strict).unwrap_err());
        assert!(e.contains("max_epsilon is 8") && e.contains("limit is 1"), "{e}");
        assert_eq!(Client::new(&url).model(&created.id).unwrap().received, 0, "nothing was posted");
        super::super::submit(submit_args(&url, &created.id, &csv, 7)).unwrap();
        assert!(Client::new(&url).model(&created.id).unwrap().round > 1);
        for remote in ["http://example.com:8080", "http://10.0.0.1", "https://[2001:db8::1]:443/x"] {
            let e = format!("{:#}", super::super::submit(submit_args(remote, &created.id, &csv, 7)).unwrap_err());
            assert!(e.contains("--simulate-devices is for experiments on a loopback server"), "{e}");
        }
        for local in ["http://127.0.0.1:1", "http://localhost", "http://[::1]:80/", "127.0.0.2:9"] {
            assert!(super::super::is_loopback(local), "{local}");
        }
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Bad options name the option, the value and the valid range, whether the CLI or the
    /// server catches them (the server's JSON message is surfaced).
    #[test]
    fn bad_train_options_name_the_option() {
        let (dir, schema, _) = fixture("bad", 0);
        let store = harmony_server::open_store(&format!("sqlite://{}", dir.join("db.sqlite").display())).unwrap();
        let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
        let url = server.url();
        let base = ["--epsilon", "4", "--model", "logistic", "--batch-size", "10"];
        let cases: &[(&[&str], &[&str])] = &[
            (&["--rounds", "5", "--model", "ridge"], &["--model is \"ridge\"", "linear, logistic, svm"]),
            (&["--rounds", "5", "--target", "nope"], &["--target is \"nope\"", "x1, x2, label"]),
            (&["--rounds", "5", "--batch-size", "0"], &["--batch-size is 0", ">= 1"]),
            (&["--rounds", "0"], &["--rounds: invalid parameter: task.rounds is 0", ">= 1"]),
            (&[], &["--rounds: invalid parameter: task.rounds is \"missing\""]),
            (&["--rounds", "5", "--schedule", "fast"], &["--schedule is \"fast\"", "noise, decay"]),
            (&["--rounds", "5", "--kappa", "-1"], &["--kappa: invalid parameter: task.kappa is -1", "> 0"]),
            (
                &["--rounds", "5", "--gradient-scale", "0.5"],
                &["--gradient-scale: invalid parameter: task.gradient_scale is 0.5", ">= 1"],
            ),
            (
                &["--rounds", "5", "--learning-rate", "0.3"],
                &["--learning-rate: invalid parameter: task.learning_rate is 0.3"],
            ),
            (&["--schedule", "decay"], &["--learning-rate: invalid parameter: task.learning_rate is \"missing\""]),
            (&["--rounds", "5", "--mechanism", "laplace"], &["--mechanism", "laplace", "hm, pm"]),
            (&["--rounds", "5", "--lambda", "-1"], &["--lambda: invalid parameter: task.lambda is -1", ">= 0"]),
            (&["--rounds", "5", "--devices", "100"], &["--rounds 5 and --devices 100"]),
            (&["--devices", "9"], &["--devices is 9", "--batch-size = 10"]),
            (&["--rounds", "5", "--epsilon", "0"], &["--epsilon is 0.0", ">= 0.002"]),
            (&["--rounds", "5", "--target", "x1"], &["--target is \"x1\"", "--threshold"]),
            (
                &["--rounds", "5", "--target", "x1", "--threshold", "mean"],
                &["--threshold is \"mean\"", "finite number"],
            ),
        ];
        for (extra, want) in cases {
            // The base pairs that `extra` does not override, then `extra`.
            let overridden: Vec<&str> = extra.iter().copied().filter(|a| a.starts_with("--")).collect();
            let mut args: Vec<&str> = Vec::new();
            for pair in base.chunks(2) {
                if !overridden.contains(&pair[0]) {
                    args.extend_from_slice(pair);
                }
            }
            args.extend_from_slice(extra);
            let e = format!("{:#}", create(&train_args(&url, &schema, &args)).expect_err("must be rejected"));
            for w in *want {
                assert!(e.contains(w), "{extra:?}: {e}");
            }
        }
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Train options without `--task train`, `--data`/`--target` on a record collection, and
    /// the defaults and choices that are accepted as given.
    #[test]
    fn train_options_out_of_place_and_defaults() {
        let (dir, schema, _) = fixture("opts", 0);
        let store = harmony_server::open_store(&format!("sqlite://{}", dir.join("db.sqlite").display())).unwrap();
        let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
        let url = server.url();
        // A train option without --task train (the schema file is read first: it must exist).
        let schema_s = schema.display().to_string();
        let a = create_args(&[
            "--server",
            &url,
            "--token",
            "tok",
            "--schema",
            &schema_s,
            "--epsilon",
            "1",
            "--model",
            "svm",
        ]);
        let e = format!("{:#}", create(&a).unwrap_err());
        assert!(e.contains("--model is for --task train"), "{e}");
        let a = train_args(&url, &schema, &["--epsilon", "1", "--rounds", "3", "--batch-size", "2"]);
        let e = format!("{:#}", create(&a).unwrap_err());
        assert!(e.contains("needs --model"), "{e}");
        // --devices without --batch-size: the papers' g = max(2·d·ln d/ε², N/1000) (d = 3, ε = 1:
        // ⌈6.59⌉ = 7 > 5) and T = ⌊N/g⌋.
        let a = train_args(&url, &schema, &["--epsilon", "1", "--model", "logistic", "--devices", "5000"]);
        let config = create(&a).unwrap().config;
        let spec = train_of(&config).unwrap().0;
        assert_eq!((spec.batch_size, spec.rounds), (7, Some(714)));
        // A record collection: --data is for training collections.
        let a = create_args(&["--server", &url, "--token", "tok", "--schema", &schema_s, "--epsilon", "1"]);
        let id = create(&a).unwrap().id;
        let q = QueryArgs {
            server: url.clone(),
            ca: Default::default(),
            token: "tok".into(),
            collection: id,
            format: Format::Table,
            data: None,
            target: Some("label".into()),
            ranges: None,
            quantiles: None,
            rects: None,
            column: None,
            window: Default::default(),
        };
        let e = format!("{:#}", super::super::query(q).unwrap_err());
        assert!(e.contains("--target scores a training collection's model"), "{e}");
        // A numeric target with a threshold, and a linear model: accepted as given.
        let a = train_args(
            &url,
            &schema,
            &[
                "--epsilon",
                "1",
                "--model",
                "svm",
                "--target",
                "x1",
                "--threshold",
                "-0.2",
                "--rounds",
                "3",
                "--batch-size",
                "2",
            ],
        );
        let config = create(&a).unwrap().config;
        let spec = train_of(&config).unwrap().0;
        assert_eq!((spec.target.as_str(), spec.threshold, spec.rounds), ("x1", Some(-0.2), Some(3)));
        let a = train_args(
            &url,
            &schema,
            &[
                "--epsilon",
                "1",
                "--model",
                "linear",
                "--target",
                "x2",
                "--schedule",
                "decay",
                "--learning-rate",
                "0.5",
                "--batch-size",
                "4",
            ],
        );
        let config = create(&a).unwrap().config;
        let spec = train_of(&config).unwrap().0;
        assert_eq!((spec.schedule, spec.learning_rate, spec.rounds), (Some(Schedule::Decay), Some(0.5), None));
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
