//! Devices: a collection's randomizer ([`DeviceTask`]), a real device with its OS-seeded
//! generator and ledger ([`Device`]), and seeded devices for simulations ([`SimulatedDevices`]).

use crate::budget::{Clock, Cost, Spend};
use crate::ledger::{Ledger, LedgerEntry, LedgerState, SeriesEntry};
use crate::policy::{Policy, refuse};
use crate::{ClientError, Result};
use harmony_core::schema::Value;
use harmony_protocol::{CollectionConfig, ModelState, ReportItem, to_hex};
use harmony_tasks::Input;

/// The task a [`DeviceTask`] holds: natively the whole [`harmony_tasks::Task`] (servers and tests
/// aggregate with the device's object); on wasm32 only its [`harmony_tasks::DeviceSide`], so the
/// browser bundle links no server code (a third of its size).
#[cfg(not(target_arch = "wasm32"))]
pub type TaskObject = dyn harmony_tasks::Task;
/// See the native definition.
#[cfg(target_arch = "wasm32")]
pub type TaskObject = dyn harmony_tasks::DeviceSide;

#[cfg(not(target_arch = "wasm32"))]
fn build_task(config: &CollectionConfig) -> harmony_core::error::Result<Box<TaskObject>> {
    harmony_tasks::build(config)
}
#[cfg(target_arch = "wasm32")]
fn build_task(config: &CollectionConfig) -> harmony_core::error::Result<Box<TaskObject>> {
    harmony_tasks::build_device(config)
}
use rand::Rng;
use rand::rngs::ChaCha20Rng;

/// A fresh random report id (128 bits from `rng`, hex).
pub fn report_id(rng: &mut dyn Rng) -> String {
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    to_hex(&b)
}

/// A collection as a device sees it: the published config, checked against the device's
/// [`Policy`], and the task built from it (the same task object the server and `harmony
/// simulate` build).
pub struct DeviceTask {
    config: CollectionConfig,
    task: Box<TaskObject>,
    policy: Policy,
    /// The schema's width and the positions of its numeric attributes (what the clamp scans).
    width: usize,
    numeric: Vec<usize>,
    /// The task refuses every record the clamp would change (`means`; see `randomize`).
    checks_range: bool,
}

impl std::fmt::Debug for DeviceTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTask").field("config", &self.config).field("policy", &self.policy).finish()
    }
}

impl DeviceTask {
    /// Builds the task a config describes under the [default policy](Policy::default); an
    /// error names the policy rule refused or what does not build.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        DeviceTask::with_policy(config, Policy::default())
    }
    /// Checks `config` against `policy` ([`ClientError::Policy`] naming the rule, the value and
    /// the limit), then builds its task: nothing is built or randomized for a refused config.
    /// The mechanisms the built task runs are checked too ([`Policy::check_built`]): a
    /// mechanism the config leaves to the task, or one a strategy overrides, is checked by
    /// what runs.
    pub fn with_policy(config: CollectionConfig, policy: Policy) -> Result<Self> {
        policy.check(&config)?;
        let task = build_task(&config)?;
        policy.check_built(task.built_mechanisms())?;
        let attributes = config.schema.as_ref().map_or(&[][..], |s| s.attributes());
        let numeric = attributes
            .iter()
            .enumerate()
            .filter(|(_, a)| matches!(a, harmony_core::schema::Attribute::Numeric { .. }))
            .map(|(j, _)| j)
            .collect();
        let checks_range = task.refuses_out_of_range();
        Ok(DeviceTask { width: attributes.len(), numeric, checks_range, config, task, policy })
    }
    /// The policy the config was checked against.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    /// The config.
    pub fn config(&self) -> &CollectionConfig {
        &self.config
    }
    /// The task (on wasm32 its device side only, see [`TaskObject`]).
    pub fn task(&self) -> &TaskObject {
        self.task.as_ref()
    }
    /// Randomizes `input` with `rng` into a batch item whose id comes from `ids`; numeric
    /// values out of [-1, 1] are clamped first ([`Policy::clamp`]: never skipped).
    pub fn item(&self, input: &Input<'_>, rng: &mut dyn Rng, ids: &mut dyn Rng) -> Result<ReportItem> {
        let mut buf = Vec::new();
        self.randomize(input, rng, &mut buf)?;
        Ok(ReportItem { id: report_id(ids), report: to_hex(&buf) })
    }
    /// The task's randomizer on the clamped input. A `means` record goes in as it is: the
    /// record mechanism refuses, before any draw, every record the clamp would change (a
    /// numeric value NaN or outside [-1, 1]; pinned by `tests::means_refuses_what_the_clamp_changes`),
    /// so an accepted record is its own clamp and the policy costs nothing per report; a refused
    /// one is clamped and randomized (the same draws as if clamped first). Other tasks: the
    /// numeric positions are scanned first.
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, buf: &mut Vec<u8>) -> Result<()> {
        if let (true, Input::Record(r)) = (self.checks_range, input) {
            match self.task.randomize(input, rng, buf) {
                Err(e) if !self.outside(r) => return Err(e.into()),
                Err(_) => buf.clear(),
                Ok(()) => return Ok(()),
            }
        }
        let clamped;
        let input = match *input {
            Input::Record(r) => {
                clamped = self.clamped(r);
                Input::Record(&clamped)
            }
            Input::Gradient { record, model } => {
                clamped = self.clamped(record);
                Input::Gradient { record: &clamped, model }
            }
            Input::Answer { record, round } => {
                clamped = self.clamped(record);
                Input::Answer { record: &clamped, round }
            }
            Input::Items(items) => Input::Items(items),
        };
        Ok(self.task.randomize(&input, rng, buf)?)
    }
    /// [`Policy::clamp`] of a record, without a copy when its numeric values are in range (the
    /// common case: only the schema's numeric positions are read; a record of another width is
    /// clamped whole, and the task's own check refuses it).
    fn clamped<'a>(&self, record: &'a [Value]) -> std::borrow::Cow<'a, [Value]> {
        if self.outside(record) {
            std::borrow::Cow::Owned(self.policy.clamp(record))
        } else {
            std::borrow::Cow::Borrowed(record)
        }
    }
    /// Whether [`Policy::clamp`] changes the record: another width, or a numeric value NaN or
    /// outside [-1, 1] (one pass without early exit).
    fn outside(&self, record: &[Value]) -> bool {
        record.len() != self.width
            || self
                .numeric
                .iter()
                .fold(false, |acc, &j| acc | matches!(record[j], Value::Unit(t) if t.is_nan() | (t.abs() > 1.0)))
    }
    /// Refuses a call for model rounds (`rounds`) on another task, or a report on a task of
    /// model rounds.
    fn expect_rounds(&self, rounds: bool) -> Result<()> {
        let task = self.config.task.kind();
        if task.has_rounds() != rounds {
            return Err(ClientError::WrongTask {
                id: self.config.id.clone(),
                task: task.name().into(),
                expected: if rounds { "a task of model rounds (train)" } else { "a task without rounds" }.into(),
            });
        }
        Ok(())
    }
}

/// A device: an OS-seeded ChaCha20 generator (never seedable by the caller), its [`Ledger`]
/// (reports, spends and permanent reports, changed together) and, for a policy with a budget,
/// a clock.
pub struct Device<L: Ledger> {
    rng: ChaCha20Rng,
    ledger: L,
    clock: Option<Box<dyn Clock>>,
}

impl<L: Ledger + std::fmt::Debug> std::fmt::Debug for Device<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the generator's state.
        f.debug_struct("Device").field("ledger", &self.ledger).finish_non_exhaustive()
    }
}

/// What an update of the ledger gives back: the entry made or kept, or a refusal decided from
/// the state (returned after the update, which then writes nothing).
type Outcome = Option<Result<LedgerEntry>>;

/// What makes a collection's entry in a ledger update: randomizes with the device's generator,
/// charges at its clock (recording the spend in the state), or refuses.
type Make<'a> = dyn FnMut(&mut LedgerState, &mut ChaCha20Rng, Option<&dyn Clock>) -> Result<LedgerEntry> + 'a;

impl<L: Ledger> Device<L> {
    /// A device with an OS-seeded generator and no clock: it records no spends and refuses
    /// every collection whose policy sets a budget.
    pub fn new(ledger: L) -> Self {
        Device { rng: harmony_core::sampling::secure_rng(), ledger, clock: None }
    }
    /// A device that charges every collection's ε and δ in its ledger at `clock`'s time (see
    /// [`crate::budget`]), refusing what the policy's budget does not allow.
    pub fn with_budget(ledger: L, clock: impl Clock + 'static) -> Self {
        Device { rng: harmony_core::sampling::secure_rng(), ledger, clock: Some(Box::new(clock)) }
    }
    /// The spends recorded in the ledger (as last read).
    pub fn spends(&self) -> &[Spend] {
        &self.ledger.state().spends
    }
    /// The ledger.
    pub fn ledger(&self) -> &L {
        &self.ledger
    }
    /// The ledger, giving the device up.
    pub fn into_ledger(self) -> L {
        self.ledger
    }

    /// The report this device sends to a collection: randomized once and recorded in the ledger
    /// (with its charge, in one update) before it is sent; later calls return the same entry (a
    /// retry resends the same bytes). An acknowledged entry is [`ClientError::AlreadyReported`];
    /// a collection charged with no report kept is refused (rule `ledger`), never randomized
    /// again.
    pub fn prepare(&mut self, task: &DeviceTask, input: &Input<'_>) -> Result<LedgerEntry> {
        task.expect_rounds(false)?;
        self.entry(task, input, None)
    }
    /// The entry of `task`'s collection: the kept one, or `input` randomized, charged and
    /// recorded in one update of the ledger (under its lock).
    fn entry(&mut self, task: &DeviceTask, input: &Input<'_>, round: Option<u64>) -> Result<LedgerEntry> {
        let id = &self.ledger_key(task)?;
        self.kept_or_made(id, &mut |state, rng, clock| {
            let spend = charge(clock, task, state, id)?;
            let item = task.item(input, rng, &mut harmony_core::sampling::secure_rng())?;
            state.spends.extend(spend);
            Ok(LedgerEntry { item, acknowledged: false, round })
        })
    }
    /// The key of `task`'s report in the ledger and the budget: the collection id, or for a
    /// recurring collection the id and the start of the current period (`ID@SECONDS`, zero-padded
    /// so that keys sort by time), one report and one charge per period. A recurring collection
    /// needs the device's clock.
    pub fn ledger_key(&self, task: &DeviceTask) -> Result<String> {
        let id = &task.config.id;
        let Some(period) = task.config.recurring else { return Ok(id.clone()) };
        let clock = self.clock.as_ref().ok_or_else(|| {
            refuse("recurring", format!("{id} recurs every {}", period.name()), "a device with a clock")
        })?;
        Ok(format!("{id}@{:012}", period.start(clock.now() as i64)))
    }
    /// In one update of the ledger (under its lock): the kept entry of collection `id` (`Err`
    /// once acknowledged), or the entry `make` randomizes, recorded under `id` with whatever
    /// `make` changed in the state (its charge). A refusal of `make` writes nothing.
    fn kept_or_made(&mut self, id: &str, make: &mut Make<'_>) -> Result<LedgerEntry> {
        let Device { rng, ledger, clock } = self;
        let mut out: Outcome = None;
        ledger.update(&mut |state| {
            if let Some(kept) = kept(state, id) {
                out = Some(kept);
                return Ok(false);
            }
            let e = make(state, rng, clock.as_deref())?;
            state.ledger.insert(id.to_string(), e.clone());
            out = Some(Ok(e));
            Ok(true)
        })?;
        out.expect("the ledger ran the update")
    }
    /// The report this device sends to a collection of the recurring `series` (frequency
    /// collections), memoized on a data-independent schedule ([`crate::memo`]): the permanent
    /// report of the series' current epoch (the same bytes under a new report id, no new
    /// charge), or, at the first collection of an epoch, the current value randomized, charged
    /// once for the epoch and kept. Recorded in the ledger per collection as
    /// [`Device::prepare`], in the same update. Refused (rule `memoization`) for other tasks.
    pub fn prepare_series(&mut self, task: &DeviceTask, series: &str, input: &Input<'_>) -> Result<LedgerEntry> {
        let key = crate::memo::series_key(task, series, input)?;
        let refresh = task.policy.series_refresh;
        self.kept_or_made(&task.config.id, &mut |state, rng, clock| {
            let held = state.series.get(&key);
            let n = held.map_or(0, |s| s.collections);
            let epoch = refresh.map_or(0, |k| n / k);
            let mut ids = harmony_core::sampling::secure_rng();
            let (report, spend) = match held {
                Some(s) if s.epoch == epoch => (s.report.clone(), None),
                _ => {
                    let spend = charge(clock, task, state, &crate::memo::epoch_key(&key, epoch))?;
                    (task.item(input, rng, &mut ids)?.report, spend)
                }
            };
            let item = ReportItem { id: report_id(&mut ids), report: report.clone() };
            state.series.insert(key.clone(), SeriesEntry { collections: n + 1, epoch, report });
            state.spends.extend(spend);
            Ok(LedgerEntry { item, acknowledged: false, round: None })
        })
    }
    /// Charges `task`'s collection once in the ledger for a batch of devices an app sends
    /// from one machine (each randomizing its own record, as `harmony submit` does): the
    /// policy's budget is checked and the spend recorded in one update (under the ledger's
    /// lock); a collection already charged (a second run, or a report of this device) is
    /// refused (rule `ledger`). A device without a clock records the spend at time 0.
    pub fn charge_batch(&mut self, task: &DeviceTask) -> Result<Spend> {
        let cost = Cost { epsilon: task.config.epsilon, delta: crate::policy::delta_of(&task.config).unwrap_or(0.0) };
        let budget = task.policy.budget.as_ref();
        if let (None, Some(b)) = (&self.clock, budget) {
            return Err(refuse("budget", "a device without a clock", b));
        }
        let now = self.clock.as_ref().map_or(0, |c| c.now());
        let id = &self.ledger_key(task)?;
        let mut out = None;
        self.ledger.update(&mut |state| {
            if state.ledger.contains_key(id) {
                return Err(refuse(
                    "ledger",
                    format!("{id} already has this device's report"),
                    "one report per charge",
                ));
            }
            let spend = crate::budget::admit(&state.spends, budget, id, cost, now)?;
            state.spends.push(spend.clone());
            out = Some(spend);
            Ok(true)
        })?;
        Ok(out.expect("the ledger ran the update"))
    }
    /// Records that the server acknowledged the collection's entry: for a recurring collection,
    /// its latest period's ([`Device::ledger_key`]).
    pub fn acknowledge(&mut self, collection: &str) -> Result<()> {
        let prefix = format!("{collection}@");
        self.ledger.update(&mut |state| {
            let key = match state.ledger.contains_key(collection) {
                true => Some(collection.to_string()),
                false => state
                    .ledger
                    .range(prefix.clone()..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .last()
                    .map(|(k, _)| k.clone()),
            };
            match key.and_then(|k| state.ledger.get_mut(&k)) {
                Some(e) if !e.acknowledged => {
                    e.acknowledged = true;
                    Ok(true)
                }
                _ => Ok(false),
            }
        })
    }
    /// The gradient this device sends in a training round, randomized once at `model` and
    /// recorded before it is sent (as [`Device::prepare`]).
    pub fn prepare_gradient(&mut self, task: &DeviceTask, record: &[Value], model: &ModelState) -> Result<LedgerEntry> {
        task.expect_rounds(true)?;
        self.entry(task, &Input::Gradient { record, model }, Some(model.round))
    }

    /// The answer this device sends to an `adaptive-rounds` collection's `round` (Duchi's bit
    /// on the round's query at its record), randomized once and recorded in the ledger before it
    /// is sent; later calls return the same entry. The item's id is the device id.
    pub fn prepare_answer(
        &mut self,
        task: &DeviceTask,
        record: &[Value],
        round: &harmony_protocol::QueryRound,
    ) -> Result<LedgerEntry> {
        self.entry(task, &Input::Answer { record, round }, Some(round.round))
    }
}

/// The collection's kept entry (`Err` once acknowledged), if it has one.
fn kept(state: &LedgerState, id: &str) -> Option<Result<LedgerEntry>> {
    state
        .ledger
        .get(id)
        .map(|e| if e.acknowledged { Err(ClientError::AlreadyReported(id.into())) } else { Ok(e.clone()) })
}

/// The spend `key` records for `task` (refused by its policy's budget, before any
/// randomization): `None` for a device without a clock and a policy without a budget. A key
/// already charged is refused either way (the device fails closed: a charge whose report is not
/// kept is never randomized again).
fn charge(clock: Option<&dyn Clock>, task: &DeviceTask, state: &LedgerState, key: &str) -> Result<Option<Spend>> {
    let budget = task.policy.budget.as_ref();
    let cost = Cost { epsilon: task.config.epsilon, delta: crate::policy::delta_of(&task.config).unwrap_or(0.0) };
    match (clock, budget) {
        (Some(clock), b) => crate::budget::admit(&state.spends, b, key, cost, clock.now()).map(Some),
        (None, Some(b)) => Err(refuse("budget", "a device without a clock", b)),
        (None, None) if state.spends.iter().any(|s| s.collection == key) => {
            Err(refuse("ledger", format!("{key} already charged, with no report kept for it"), "one report per charge"))
        }
        (None, None) => Ok(None),
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl<L: Ledger> Device<L> {
    /// Reports `input` to the collection once (see [`Device::prepare`]) and records the
    /// acknowledgement.
    pub fn report(
        &mut self,
        client: &crate::Client,
        task: &DeviceTask,
        input: &Input<'_>,
    ) -> Result<harmony_protocol::BatchAck> {
        let entry = self.prepare(task, input)?;
        let ack = client.submit(&task.config, vec![entry.item])?;
        self.acknowledge(&task.config.id)?;
        Ok(ack)
    }

    /// Contributes one gradient to a training collection, once per device: fetches the model,
    /// randomizes the clipped gradient of `record` at it, records it and posts it. A later call
    /// after a failure resends the same gradient (same device id and round); after an
    /// acknowledgement (or the server saying this device id already contributed) it returns
    /// [`ClientError::AlreadyReported`]. Raw features never leave the device.
    pub fn contribute_gradient(
        &mut self,
        client: &crate::Client,
        task: &DeviceTask,
        record: &[Value],
    ) -> Result<harmony_protocol::GradientAck> {
        let id = task.config.id.clone();
        let entry = match self.ledger.get(&id) {
            Some(e) => e,
            None => {
                let model = client.model(&id)?;
                self.prepare_gradient(task, record, &model)?
            }
        };
        if entry.acknowledged {
            return Err(ClientError::AlreadyReported(id));
        }
        let post = harmony_protocol::GradientPost {
            device_id: entry.item.id.clone(),
            round: entry.round.unwrap_or(0),
            report: entry.item.report.clone(),
        };
        match client.post_gradient(&id, &post) {
            Ok(ack) => {
                self.acknowledge(&id)?;
                Ok(ack)
            }
            // A retry of a gradient the server stored (its ack was lost).
            Err(ClientError::Rejected { status: 409, field, .. }) if field == "device_id" => {
                self.acknowledge(&id)?;
                Err(ClientError::AlreadyReported(id))
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl<L: Ledger> Device<L> {
    /// Answers the current round of an `adaptive-rounds` linear-queries collection, once per
    /// device and collection (what keeps the rounds' groups disjoint): fetches the round,
    /// randomizes its query at `record` with the OS CSPRNG, records the answer and posts it. A
    /// later call after a failure resends the same answer; after an acknowledgement (or the
    /// server saying this device already answered) it returns [`ClientError::AlreadyReported`].
    /// An answer whose round filled before it arrived is refused (409 `round`) and stays in the
    /// ledger: the device does not answer another query of the collection.
    pub fn contribute_answer(
        &mut self,
        client: &crate::Client,
        task: &DeviceTask,
        record: &[Value],
    ) -> Result<harmony_protocol::AnswerAck> {
        let id = task.config.id.clone();
        let entry = match self.ledger.get(&id) {
            Some(e) => e,
            None => {
                let round = client.query_round(&id)?;
                self.prepare_answer(task, record, &round)?
            }
        };
        if entry.acknowledged {
            return Err(ClientError::AlreadyReported(id));
        }
        let post = harmony_protocol::AnswerPost { device_id: entry.item.id.clone(), report: entry.item.report.clone() };
        match client.post_answer(&id, &post) {
            Ok(ack) => {
                self.acknowledge(&id)?;
                Ok(ack)
            }
            // A retry of an answer the server stored (its ack was lost).
            Err(ClientError::Rejected { status: 409, field, .. }) if field == "device_id" => {
                self.acknowledge(&id)?;
                Err(ClientError::AlreadyReported(id))
            }
            Err(e) => Err(e),
        }
    }
}

/// Seeded devices, for simulations and tests only: device i randomizes with
/// [`harmony_tasks::simulate::device_rng`]`(seed, i)`, exactly as `harmony simulate` does, so a
/// server fed by them estimates what the simulation estimates. Report ids still come from the
/// OS CSPRNG, so the seed never shows on the wire. Real devices use [`Device`].
pub struct SimulatedDevices {
    seed: u64,
    ids: ChaCha20Rng,
    /// [`SimulatedDevices::reproducible`]: device i's report id comes from stream i of this seed.
    id_seed: Option<u64>,
}

/// The stream of a seed that [`SimulatedDevices::reproducible`] draws report ids from (apart from
/// the devices' randomization streams).
const REPORT_ID_STREAM: u64 = u64::from_le_bytes(*b"reportid");

impl std::fmt::Debug for SimulatedDevices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimulatedDevices { .. }")
    }
}

impl SimulatedDevices {
    /// Simulated devices of a run seeded `seed`.
    pub fn new(seed: u64) -> Self {
        SimulatedDevices { seed, ids: harmony_core::sampling::secure_rng(), id_seed: None }
    }
    /// Simulated devices of a run seeded `seed` whose report ids are reproducible too: device
    /// i's id is drawn from its own stream of the seed, so a repeated run sends the same ids and
    /// a server acknowledges its reports as already stored instead of storing them twice
    /// (`harmony submit --simulate-devices --seed`). Another population under the same seed
    /// reuses the ids, and its different reports are refused (409): give it another seed.
    pub fn reproducible(seed: u64) -> Self {
        let id_seed = harmony_core::sampling::stream_seed(seed, REPORT_ID_STREAM);
        SimulatedDevices { id_seed: Some(id_seed), ..SimulatedDevices::new(seed) }
    }
    /// Device `device`'s batch item for `input`.
    pub fn item(&mut self, task: &DeviceTask, device: u64, input: &Input<'_>) -> Result<ReportItem> {
        let mut rng = harmony_tasks::simulate::device_rng(self.seed, device);
        let mut own;
        let ids: &mut dyn Rng = match self.id_seed {
            Some(s) => {
                own = harmony_tasks::simulate::device_rng(s, device);
                &mut own
            }
            None => &mut self.ids,
        };
        task.item(input, &mut rng, ids).map_err(|e| match e {
            ClientError::Core(e) => ClientError::Core(harmony_tasks::simulate::at_device(e, device)),
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::schema::{Attribute, Schema};
    use harmony_core::strategy::StrategyKind;
    use harmony_protocol::CreateCollection;
    use harmony_protocol::spec::{MeansSpec, TaskSpec};

    /// What lets `DeviceTask::randomize` give a `means` record to the task unclamped: the task
    /// refuses every record the clamp changes (each non-finite or out-of-range value at each
    /// numeric position, every strategy), and the device's report for such a record is, draw
    /// for draw, the report of the clamped record (same seeds, same bytes).
    #[test]
    fn means_refuses_what_the_clamp_changes() {
        let schema = Schema::new(vec![
            Attribute::Numeric { name: "x".into(), min: 0.0, max: 1.0 },
            Attribute::Categorical { name: "c".into(), categories: vec!["a".into(), "b".into(), "c".into()] },
            Attribute::Numeric { name: "y".into(), min: 0.0, max: 1.0 },
        ])
        .unwrap();
        let bad = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.0 + f64::EPSILON, -1.5, f64::MAX, -1.0 - f64::EPSILON];
        for strategy in [StrategyKind::Split, StrategyKind::Harmony, StrategyKind::SampleK] {
            let task = TaskSpec::Means(MeansSpec { strategy, ..Default::default() });
            let req = CreateCollection { schema: Some(schema.clone()), epsilon: 1.0, task };
            let device = DeviceTask::new(harmony_tasks::resolve(&req, "m").unwrap()).unwrap();
            assert!(device.checks_range);
            for (j, &t) in [0, 2].iter().flat_map(|j| bad.iter().map(move |t| (j, t))) {
                let mut record = vec![Value::Unit(0.25), Value::Category(1), Value::Unit(-0.5)];
                record[*j] = Value::Unit(t);
                let mut buf = Vec::new();
                let refused = device.task().randomize(
                    &Input::Record(&record),
                    &mut harmony_core::sampling::fast_rng(7),
                    &mut buf,
                );
                assert!(refused.is_err() && buf.is_empty(), "{strategy:?}: value {t} at {j} accepted");
                let clamped = device.policy().clamp(&record);
                for seed in 0..20 {
                    let item = |r: &[Value]| {
                        let (mut rng, mut ids) =
                            (harmony_core::sampling::fast_rng(seed), harmony_core::sampling::fast_rng(!seed));
                        device.item(&Input::Record(r), &mut rng, &mut ids).unwrap()
                    };
                    assert_eq!(item(&record), item(&clamped), "{strategy:?}: value {t} at {j}, seed {seed}");
                }
            }
        }
    }
}
