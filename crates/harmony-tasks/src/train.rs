//! `train`: private mini-batch gradient descent in rounds (harmony-learn's randomizer and
//! update rule). A device fetches the round's model, computes its clipped gradient at it and
//! sends one randomized gradient; when a round has `batch_size` gradients the model takes a
//! step. [`Round`] is the pure state machine of the rounds; the server adds storage around it,
//! `harmony simulate --task train` runs it in process.

use crate::erased::{Task, TaskAggregator, encode_to};
use crate::input::Input;
use harmony_core::error::{Error, Result};
use harmony_core::schema::{Schema, Value};
use harmony_core::state::{StateReader, StateWriter};
use harmony_core::wire;
use harmony_learn::features::{Encoding, FeatureMap, TargetSpec, Threshold};
use harmony_learn::loss::Loss;
/// A device's randomized gradient: what a round takes (the server reaches learning through here).
pub use harmony_learn::remote::GradientReport;
use harmony_learn::remote::{RemoteMechanism, RoundRule, RoundSchedule, device_gradient, tail_average};
use harmony_learn::trainer::{GRADIENT_SCALE, NOISE_KAPPA};
use harmony_protocol::estimates::{Query, TaskEstimate, TrainEstimate};
use harmony_protocol::spec::{Model, Schedule, TaskSpec, TrainSpec};
use harmony_protocol::{CollectionConfig, ModelState, TrainPublished};
use rand::Rng;
use std::any::Any;
use std::sync::Arc;

fn learn_task(m: Model) -> harmony_learn::features::Task {
    match m {
        Model::Logistic => harmony_learn::features::Task::Logistic,
        Model::Linear => harmony_learn::features::Task::Linear,
        Model::Svm => harmony_learn::features::Task::Svm,
    }
}

/// The feature map a training spec defines on a schema (the server and every device build the
/// same one; categorical attributes are zero-one encoded, the intercept first).
pub fn feature_map(schema: &Schema, spec: &TrainSpec) -> Result<FeatureMap> {
    let target = TargetSpec {
        column: spec.target.clone(),
        positive: spec.positive.clone(),
        threshold: spec.threshold.map(Threshold::Value),
    };
    FeatureMap::new(schema, learn_task(spec.task), Encoding::ZeroOne, &target, &[])
}

/// The gradient scale c devices apply before clipping: the spec's, else the schedule's default
/// (2 with `noise`, 1 with `decay`).
pub fn gradient_scale(spec: &TrainSpec) -> f64 {
    spec.gradient_scale.unwrap_or(if spec.is_noise() { GRADIENT_SCALE } else { 1.0 })
}

fn bad(field: &'static str, value: impl std::fmt::Debug, expected: &str) -> Error {
    Error::param(field, value, expected)
}

/// A finite number > 0 (or ≥ 1 with `at_least_one`), or an error naming the field.
fn check_positive(field: &'static str, v: f64, at_least_one: bool) -> Result<()> {
    let (ok, expected) =
        if at_least_one { (v >= 1.0, "a finite number >= 1") } else { (v > 0.0, "a finite number > 0") };
    if ok && v.is_finite() { Ok(()) } else { Err(bad(field, v, expected)) }
}

/// Checks a training spec against the schema and ε and writes out the server's choices: the
/// schedule (a new collection's default is `noise`), enrollment (on unless the request says
/// `false`), κ, c and the `noise` step γ. Returns the published spec and setup.
pub fn resolve(spec: &TrainSpec, schema: &Schema, epsilon: f64) -> Result<(TrainSpec, TrainPublished)> {
    let mut spec = spec.clone();
    spec.schedule.get_or_insert(Schedule::Noise);
    spec.enrollment.get_or_insert(true);
    let (spec, rule, mech, fm) = setup(&spec, schema, epsilon)?;
    let step = match rule.schedule {
        RoundSchedule::Noise { step, .. } => Some(step),
        RoundSchedule::Decay { .. } => None,
    };
    let published =
        TrainPublished { dimension: fm.dimension(), features: fm.names().to_vec(), sampled: mech.sampled(), step };
    Ok((spec, published))
}

/// A feature-map error named as the request names the spec's field (`target` → `task.target`),
/// like every other error of a train spec.
fn spec_field(e: Error) -> Error {
    match e {
        Error::InvalidParameter { name, value, expected } => {
            let name = match name {
                "target" => "task.target",
                "positive" => "task.positive",
                "threshold" => "task.threshold",
                "positive/threshold" => "task.positive/threshold",
                other => other,
            };
            Error::InvalidParameter { name, value, expected }
        }
        other => other,
    }
}

/// Validates a spec; returns it with κ and c written out (for `noise`), the round rule, the
/// gradient randomizer and the feature map. A spec without `schedule` is a `decay` one.
fn setup(
    spec: &TrainSpec,
    schema: &Schema,
    epsilon: f64,
) -> Result<(TrainSpec, RoundRule, RemoteMechanism, FeatureMap)> {
    let fm = feature_map(schema, spec).map_err(spec_field)?;
    let mech = RemoteMechanism::new(spec.mechanism.name(), epsilon, fm.dimension())?;
    if spec.batch_size == 0 {
        return Err(bad("task.batch_size", 0, "an integer >= 1"));
    }
    if !(spec.lambda >= 0.0 && spec.lambda.is_finite()) {
        return Err(bad("task.lambda", spec.lambda, "a finite number >= 0"));
    }
    if spec.rounds == Some(0) {
        return Err(bad("task.rounds", 0, "an integer >= 1"));
    }
    let mut spec = spec.clone();
    if let Some(c) = spec.gradient_scale {
        check_positive("task.gradient_scale", c, true)?;
    }
    let schedule = match spec.schedule() {
        Schedule::Decay => {
            if let Some(k) = spec.kappa {
                return Err(bad("task.kappa", k, "no kappa with schedule \"decay\" (it sets the noise step)"));
            }
            let lr = spec.learning_rate.ok_or_else(|| {
                bad("task.learning_rate", "missing", "a finite number > 0 (gamma_0 of schedule \"decay\")")
            })?;
            check_positive("task.learning_rate", lr, false)?;
            RoundSchedule::Decay { learning_rate: lr }
        }
        Schedule::Noise => {
            if let Some(lr) = spec.learning_rate {
                return Err(bad(
                    "task.learning_rate",
                    lr,
                    "no learning_rate with schedule \"noise\" (its step is computed; use \"decay\" to set gamma_0)",
                ));
            }
            let rounds = spec.rounds.ok_or_else(|| {
                bad(
                    "task.rounds",
                    "missing",
                    "an integer >= 1: the planned number of rounds T (floor(expected devices / batch_size)), which the noise step depends on",
                )
            })?;
            let kappa = *spec.kappa.get_or_insert(NOISE_KAPPA);
            check_positive("task.kappa", kappa, false)?;
            let c = *spec.gradient_scale.get_or_insert(GRADIENT_SCALE);
            let loss = Loss::for_task(learn_task(spec.task));
            let step = RoundRule::noise_step(loss, fm.max_l1(), kappa, c, &mech, spec.batch_size, rounds);
            RoundSchedule::Noise { step, rounds }
        }
    };
    let rule = RoundRule { schedule, gradient_scale: gradient_scale(&spec), lambda: spec.lambda };
    Ok((spec, rule, mech, fm))
}

/// A round: the parameters w_t, the sum of the tail-averaged iterates so far (empty with
/// `decay`) and the accumulator of the gradients received.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// t (1-based).
    pub round: u64,
    /// w_t.
    pub w: Vec<f64>,
    /// Σ of the tail-averaged iterates (`noise`).
    pub sum: Vec<f64>,
    /// Σ of the decoded gradients of this round.
    pub acc: Vec<f64>,
    /// Gradients received in this round.
    pub received: u64,
}

impl Round {
    /// The model state to store (w, then the tail sum with `noise`).
    pub fn stored(&self) -> Vec<f64> {
        [self.w.as_slice(), &self.sum].concat()
    }
}

struct Setup {
    spec: TrainSpec,
    fm: FeatureMap,
    mech: RemoteMechanism,
    rule: RoundRule,
    loss: Loss,
}

impl Setup {
    fn start(&self) -> Round {
        let d = self.fm.dimension();
        let sum = if matches!(self.rule.schedule, RoundSchedule::Noise { .. }) { vec![0.0; d] } else { Vec::new() };
        Round { round: 1, w: vec![0.0; d], sum, acc: vec![0.0; d], received: 0 }
    }
    fn done(&self, round: u64) -> bool {
        self.spec.rounds.is_some_and(|t| round > t)
    }
    fn next(&self, r: &Round, report: &GradientReport) -> (Round, bool) {
        let mut acc = r.acc.clone();
        self.mech.add(report, &mut acc);
        let received = r.received + 1;
        if received < self.spec.batch_size {
            return (Round { acc, received, ..r.clone() }, false);
        }
        (self.step(r, &acc, received), true)
    }
    /// The round after `r` once its batch of `received` gradients summing to `acc` is full.
    fn step(&self, r: &Round, acc: &[f64], received: u64) -> Round {
        let (mut w, mut sum) = (r.w.clone(), r.sum.clone());
        self.rule.apply(&mut w, &mut sum, acc, received as usize, r.round);
        Round { round: r.round + 1, w, sum, acc: vec![0.0; acc.len()], received: 0 }
    }
    fn model_state(&self, r: &Round) -> ModelState {
        let averaged = self.rule.averaged(r.round - 1);
        ModelState {
            round: r.round,
            parameters: r.w.clone(),
            batch_size: self.spec.batch_size,
            received: r.received,
            done: self.done(r.round),
            schedule: self.spec.schedule(),
            step: self.rule.step(r.round),
            model: tail_average(&r.w, &r.sum, averaged),
            averaged,
        }
    }
}

/// The `train` task.
pub struct TrainTask {
    config: CollectionConfig,
    setup: Arc<Setup>,
}

impl std::fmt::Debug for TrainTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainTask").field("config", &self.config).finish()
    }
}

impl TrainTask {
    /// Builds a training task from its config; the published γ is the collection's (computed
    /// once at creation), and a build deriving another d or k refuses the collection.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::Train(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "train"));
        };
        let (spec, mut rule, mech, fm) = setup(spec, config.schema()?, config.epsilon)?;
        let published =
            config.train.as_ref().ok_or_else(|| Error::param("train", "missing", "the published training setup"))?;
        if let (Some(step), RoundSchedule::Noise { step: s, .. }) = (published.step, &mut rule.schedule) {
            *s = step;
        }
        if published.dimension != fm.dimension() || published.sampled != mech.sampled() {
            return Err(Error::param(
                "train",
                format!("published d = {}, k = {}", published.dimension, published.sampled),
                format!("this build's d = {}, k = {}", fm.dimension(), mech.sampled()),
            ));
        }
        let loss = Loss::for_task(learn_task(spec.task));
        Ok(TrainTask { config, setup: Arc::new(Setup { spec, fm, mech, rule, loss }) })
    }
    /// The spec with the server's choices written out.
    pub fn spec(&self) -> &TrainSpec {
        &self.setup.spec
    }
    /// The gradient randomizer.
    pub fn mechanism(&self) -> &RemoteMechanism {
        &self.setup.mech
    }
    /// The feature names (intercept first).
    pub fn features(&self) -> &[String] {
        self.setup.fm.names()
    }
    /// The estimate document's result of a model state: its features and the state.
    pub fn document(&self, state: ModelState) -> TaskEstimate {
        TaskEstimate::Train(TrainEstimate { features: self.features().to_vec(), state })
    }
    /// Gradients counted up to a round state: the full rounds before it and this round's.
    pub fn received_total(&self, state: &ModelState) -> u64 {
        (state.round - 1) * state.batch_size + state.received
    }
    /// Feature dimension d.
    pub fn dimension(&self) -> usize {
        self.setup.fm.dimension()
    }
    /// Round 1: w = 0, nothing averaged or received.
    pub fn start(&self) -> Round {
        self.setup.start()
    }
    /// A round restored from a stored model state `(round, w ++ sum)`.
    pub fn restore(&self, round: u64, state: &[f64]) -> Result<Round> {
        let mut r = self.start();
        let want = r.w.len() + r.sum.len();
        if state.len() != want {
            return Err(Error::param("model state", format!("{} numbers", state.len()), format!("{want}")));
        }
        let d = r.w.len();
        r.round = round;
        r.w.copy_from_slice(&state[..d]);
        r.sum.copy_from_slice(&state[d..]);
        Ok(r)
    }
    /// Whether training is over at round `round` (the planned rounds are done).
    pub fn done(&self, round: u64) -> bool {
        self.setup.done(round)
    }
    /// Decodes and validates a gradient report.
    pub fn decode(&self, report: &[u8]) -> Result<GradientReport> {
        let r: GradientReport = wire::decode(report)?;
        self.setup.mech.validate(&r)?;
        Ok(r)
    }
    /// Round `r` after one more validated gradient: the accumulator grows, and when the batch is
    /// full the model takes its step and the next round starts. Pure: `r` is unchanged.
    pub fn next(&self, r: &Round, report: &GradientReport) -> (Round, bool) {
        self.setup.next(r, report)
    }
    /// `GET …/model` of round `r`.
    pub fn model_state(&self, r: &Round) -> ModelState {
        self.setup.model_state(r)
    }
    /// A device's randomized gradient at `model` for `record` (the schema's values, target
    /// included): features, c·ℓ'(⟨w, x⟩, y)·x clipped to [-1, 1]^d, randomized with `rng`.
    pub fn gradient(&self, model: &ModelState, record: &[Value], rng: &mut dyn Rng) -> Result<GradientReport> {
        let s = &self.setup;
        let schema = self.config.schema()?;
        schema.check_record(record)?;
        let d = s.fm.dimension();
        if model.parameters.len() != d {
            return Err(Error::input(
                "model.parameters",
                format!("{} numbers", model.parameters.len()),
                format!("d = {d}"),
            ));
        }
        let mut x = vec![0.0; d];
        s.fm.encode_row(record, &mut x);
        let mut g = vec![0.0; d];
        // Refuses non-finite or huge parameters and gradient scales (typed errors naming the
        // field) before any randomization; non-finite gradient coordinates become 0.
        device_gradient(s.loss, &model.parameters, &x, s.fm.target(record), s.rule.gradient_scale, &mut g)?;
        Ok(s.mech.randomize(&g, rng))
    }
}

impl Task for TrainTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let (record, model) = input.gradient("train")?;
        encode_to(&self.gradient(model, record, rng)?, out);
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        self.decode(report).map(|_| ())
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        Box::new(Rounds { setup: self.setup.clone(), round: self.start(), count: 0 })
    }
    fn mergeable(&self) -> bool {
        false
    }
    /// Devices in order, round by round: device i computes its gradient at the model of the
    /// round it falls in (⌊i/g⌋ + 1 from a fresh start), the model steps when a round is full;
    /// devices after the planned rounds do not report.
    fn simulate(&self, inputs: &[Input<'_>], seed: u64, first: u64) -> Result<Box<dyn TaskAggregator>> {
        let mut rounds = Rounds { setup: self.setup.clone(), round: self.start(), count: 0 };
        for (i, input) in inputs.iter().enumerate() {
            if self.done(rounds.round.round) {
                break;
            }
            let device = first + i as u64;
            let record = input.record("train")?;
            let model = self.model_state(&rounds.round);
            let mut rng = crate::simulate::device_rng(seed, device);
            let g = self.gradient(&model, record, &mut rng).map_err(|e| crate::simulate::at_device(e, device))?;
            rounds.round = self.next(&rounds.round, &g).0;
            rounds.count += 1;
        }
        Ok(Box::new(rounds))
    }
    fn estimate(&self, agg: &dyn TaskAggregator, _query: &Query) -> Result<TaskEstimate> {
        let rounds = agg
            .as_any()
            .downcast_ref::<Rounds>()
            .ok_or_else(|| Error::Incompatible("an accumulator of another task, expected train rounds".into()))?;
        Ok(self.document(self.model_state(&rounds.round)))
    }
}

/// The rounds as an accumulator: gradients in arrival order, the model advancing when a batch
/// is full. Order matters, so rounds do not merge.
#[derive(Clone)]
pub struct Rounds {
    setup: Arc<Setup>,
    /// The current round.
    pub round: Round,
    count: u64,
}

impl TaskAggregator for Rounds {
    fn add(&mut self, report: &[u8]) -> Result<()> {
        let r: GradientReport = wire::decode(report)?;
        if self.setup.done(self.round.round) {
            return Err(Error::report("round", self.round.round, "a round before the end of training"));
        }
        self.round = self.setup.next(&self.round, &r).0;
        self.count += 1;
        Ok(())
    }
    fn merge(&mut self, _other: &dyn TaskAggregator) -> Result<()> {
        Err(Error::Incompatible("model rounds depend on the order of the gradients: they do not merge".into()))
    }
    fn count(&self) -> u64 {
        self.count
    }
    fn clone_box(&self) -> Box<dyn TaskAggregator> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    /// The round (t, w, the tail sum, the open round's gradient sum and count) and the
    /// gradients counted: exact bits, so a saved state loads into the same round.
    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        let mut w = StateWriter(out);
        let r = &self.round;
        w.u64(r.round);
        w.f64s(&r.w);
        w.f64s(&r.sum);
        w.f64s(&r.acc);
        w.u64(r.received);
        w.u64(self.count);
        Ok(())
    }
    /// Into a fresh accumulator (nothing counted) a saved state loads as it is; otherwise both
    /// must be at the same round with the same model and history (two parts of one open round),
    /// and the open round's gradient sums and counts add (a full batch takes the step). All or
    /// nothing.
    fn merge_saved(&mut self, state: &[u8]) -> Result<()> {
        let saved = self.read(state)?;
        if saved.count == 0 {
            return Ok(());
        }
        if self.count == 0 {
            *self = saved;
            return Ok(());
        }
        let (a, b) = (&self.round, &saved.round);
        let bits = |x: &[f64], y: &[f64]| x.iter().map(|v| v.to_bits()).eq(y.iter().map(|v| v.to_bits()));
        let history = |r: &Rounds| r.count - r.round.received;
        if a.round != b.round || !bits(&a.w, &b.w) || !bits(&a.sum, &b.sum) || history(self) != history(&saved) {
            return Err(Error::Incompatible(format!(
                "model rounds merge only at the same round and model: round {} and a saved round {}",
                a.round, b.round
            )));
        }
        let received = a.received + b.received;
        if received > self.setup.spec.batch_size {
            return Err(Error::Incompatible(format!(
                "{received} gradients in round {}, expected at most the batch size {}",
                a.round, self.setup.spec.batch_size
            )));
        }
        let acc: Vec<f64> = a.acc.iter().zip(&b.acc).map(|(x, y)| x + y).collect();
        self.round = if received == self.setup.spec.batch_size {
            self.setup.step(a, &acc, received)
        } else {
            Round { acc, received, ..a.clone() }
        };
        self.count += b.received;
        Ok(())
    }
}

impl Rounds {
    /// A saved state as rounds of this task; errors name the field that does not fit.
    fn read(&self, state: &[u8]) -> Result<Rounds> {
        let mut r = StateReader::new(state);
        let fresh = self.setup.start();
        let round = r.u64("round")?;
        let mut w = vec![0.0; fresh.w.len()];
        r.add_f64s("model", &mut w)?;
        let mut sum = vec![0.0; fresh.sum.len()];
        r.add_f64s("tail sum", &mut sum)?;
        let mut acc = vec![0.0; fresh.acc.len()];
        r.add_f64s("round gradients", &mut acc)?;
        let (received, count) = (r.u64("round received")?, r.u64("gradients")?);
        r.finish()?;
        let batch = self.setup.spec.batch_size;
        if round == 0 || received >= batch || count < (round - 1).saturating_mul(batch).saturating_add(received) {
            return Err(Error::Incompatible(format!(
                "a saved round {round} with {received} of {batch} gradients and {count} in all: not a state of these rounds"
            )));
        }
        Ok(Rounds { setup: self.setup.clone(), round: Round { round, w, sum, acc, received }, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::schema::Attribute;
    use harmony_protocol::CreateCollection;

    fn config(batch: u64, rounds: u64) -> CollectionConfig {
        let schema = Schema::new(vec![
            Attribute::Numeric { name: "x".into(), min: -1.0, max: 1.0 },
            Attribute::Categorical { name: "y".into(), categories: vec!["no".into(), "yes".into()] },
        ])
        .unwrap();
        let spec = TrainSpec {
            task: Model::Logistic,
            target: "y".into(),
            positive: None,
            threshold: None,
            mechanism: Default::default(),
            batch_size: batch,
            schedule: None,
            learning_rate: None,
            kappa: None,
            gradient_scale: None,
            lambda: 1e-4,
            rounds: Some(rounds),
            enrollment: None,
        };
        crate::resolve(&CreateCollection { schema: Some(schema), epsilon: 4.0, task: TaskSpec::Train(spec) }, "t")
            .unwrap()
    }

    fn report(task: &TrainTask, r: &Round, x: f64, seed: u64) -> GradientReport {
        let model = task.model_state(r);
        let record = [Value::Unit(x), Value::Category(u32::from(x > 0.0))];
        task.gradient(&model, &record, &mut crate::simulate::device_rng(seed, 0)).unwrap()
    }

    /// The round state machine: gradients accumulate without moving the model until the batch is
    /// full; then one step, a fresh round, the tail average after ⌊T/2⌋; `done` after T rounds;
    /// `next` is pure; a stored state restores the same round.
    #[test]
    fn rounds_step_when_full_and_stop_after_the_plan() {
        let c = config(3, 2);
        assert_eq!(c.train.as_ref().unwrap().dimension, 2);
        let task = TrainTask::new(c).unwrap();
        let mut r = task.start();
        assert_eq!((r.round, r.received, task.done(1)), (1, 0, false));
        for i in 0..2 {
            let g = report(&task, &r, 0.5, i);
            let before = r.clone();
            let (next, advanced) = task.next(&r, &g);
            assert_eq!(r, before, "next is pure");
            assert!(!advanced);
            assert_eq!((next.round, next.received, &next.w), (1, i + 1, &r.w));
            r = next;
        }
        let (next, advanced) = task.next(&r, &report(&task, &r, -0.5, 9));
        assert!(advanced && next.round == 2 && next.received == 0 && next.acc.iter().all(|a| *a == 0.0));
        assert_ne!(next.w, r.w, "the model took a step");
        let m = task.model_state(&next);
        assert_eq!((m.round, m.averaged, m.done), (2, 0, false));
        let restored = task.restore(next.round, &next.stored()).unwrap();
        assert_eq!(restored, next);
        assert!(task.restore(2, &[1.0]).is_err());
        let mut r = next;
        for i in 0..3 {
            r = task.next(&r, &report(&task, &r, 0.2, 20 + i)).0;
        }
        let m = task.model_state(&r);
        assert_eq!((m.round, m.done, m.averaged), (3, true, 1));
        assert_eq!(m.model, r.w, "one averaged iterate is the last one");
        assert!(task.done(3));
    }

    /// `simulate` (the rounds in process) equals driving the state machine by hand with the same
    /// devices, and stops at the plan.
    #[test]
    fn simulate_is_the_state_machine_in_order() {
        let task = TrainTask::new(config(4, 3)).unwrap();
        let rows: Vec<[Value; 2]> = (0..20)
            .map(|i| {
                let x = (i as f64 / 10.0) - 1.0;
                [Value::Unit(x), Value::Category(u32::from(x > 0.0))]
            })
            .collect();
        let inputs: Vec<Input> = rows.iter().map(|r| Input::Record(r)).collect();
        let agg = task.simulate(&inputs, 5, 0).unwrap();
        assert_eq!(agg.count(), 12);
        let mut r = task.start();
        for (i, row) in rows.iter().take(12).enumerate() {
            let model = task.model_state(&r);
            let g = task.gradient(&model, row, &mut crate::simulate::device_rng(5, i as u64)).unwrap();
            r = task.next(&r, &g).0;
        }
        let TaskEstimate::Train(t) = task.estimate(agg.as_ref(), &Query::default()).unwrap() else { panic!() };
        assert_eq!(t.state, task.model_state(&r));
        assert!(agg.clone_box().merge(agg.as_ref()).is_err(), "rounds do not merge");
    }

    /// A saved round loads into a fresh accumulator as the same round (model, round number, the
    /// open round's gradients); two halves of an open round, each counted from the same model,
    /// merge into the whole (the step taken when the batch fills); a state of another round or
    /// shape is refused.
    #[test]
    fn saved_rounds_load_and_halves_merge_into_the_whole() {
        let task = TrainTask::new(config(4, 3)).unwrap();
        let bytes = |g: &GradientReport| {
            let mut b = Vec::new();
            encode_to(g, &mut b);
            b
        };
        let rounds = |a: &dyn TaskAggregator| a.as_any().downcast_ref::<Rounds>().unwrap().round.clone();
        let saved = |a: &dyn TaskAggregator| {
            let mut out = Vec::new();
            a.save(&mut out).unwrap();
            out
        };
        let loaded = |state: &[u8]| {
            let mut a = task.aggregator();
            a.merge_saved(state).unwrap();
            a
        };
        let (mut whole, mut r) = (task.aggregator(), task.start());
        for i in 0..6 {
            let g = report(&task, &r, (i as f64 / 3.0) - 1.0, 40 + i);
            r = task.next(&r, &g).0;
            whole.add(&bytes(&g)).unwrap();
        }
        let at_6 = saved(whole.as_ref());
        let mut back = loaded(&at_6);
        assert_eq!((rounds(back.as_ref()), back.count()), (r.clone(), 6));
        assert_eq!((r.round, r.received), (2, 2));
        let g = bytes(&report(&task, &r, 0.3, 77));
        whole.add(&g).unwrap();
        back.add(&g).unwrap();
        assert_eq!(rounds(back.as_ref()), rounds(whole.as_ref()), "the loaded round goes on alike");

        // Round 2 from its start (4 gradients before it), its four gradients split in halves.
        let start2 = Rounds { setup: task.setup.clone(), round: task.restore(2, &r.stored()).unwrap(), count: 4 };
        let at_start2 = saved(&start2);
        let reports: Vec<Vec<u8>> =
            (0..4).map(|i| bytes(&report(&task, &start2.round, 0.25 * i as f64 - 0.5, 90 + i))).collect();
        let (mut one, mut two, mut seq) = (loaded(&at_start2), loaded(&at_start2), loaded(&at_start2));
        reports[..2].iter().for_each(|b| one.add(b).unwrap());
        reports[2..].iter().for_each(|b| two.add(b).unwrap());
        reports.iter().for_each(|b| seq.add(b).unwrap());
        let mut merged = one.clone();
        merged.merge_saved(&saved(two.as_ref())).unwrap();
        let (m, s) = (rounds(merged.as_ref()), rounds(seq.as_ref()));
        assert_eq!((m.round, m.received, merged.count()), (3, 0, 8));
        assert_eq!((s.round, seq.count()), (3, 8));
        assert!(m.w.iter().zip(&s.w).all(|(a, b)| (a - b).abs() < 1e-12), "{:?} vs {:?}", m.w, s.w);

        // Too many for the batch, another round, a truncated state, another shape.
        let e = one.clone_box().merge_saved(&saved(seq.as_ref())).unwrap_err().to_string();
        assert!(e.contains("same round"), "{e}");
        let mut three = loaded(&at_start2);
        reports[..3].iter().for_each(|b| three.add(b).unwrap());
        let e = one.clone_box().merge_saved(&saved(three.as_ref())).unwrap_err().to_string();
        assert!(e.contains("5 gradients in round 2") && e.contains("batch size 4"), "{e}");
        assert!(task.aggregator().merge_saved(&at_6[..at_6.len() - 1]).is_err());
        let mut bad = at_6.clone();
        bad[..8].copy_from_slice(&0u64.to_le_bytes());
        assert!(task.aggregator().merge_saved(&bad).unwrap_err().to_string().contains("saved round 0"));
    }
}
