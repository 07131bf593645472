//! `heavy-hitters`: each device holds a set of strings (one item, or several) and reports one
//! prefix of one item's B-bit code, by OLH (harmony-analytics' PEM or TreeHist) or to a Hadamard
//! count-mean sketch (`sketch`) ([`harmony_analytics::heavy`]); the server walks the prefix tree
//! level by level and returns the top items with their frequencies.
//!
//! A device hashes its items to codes (or parses them as integer ids), keeps the distinct
//! codes, pads the set to `pad_length` slots, samples one and draws its level uniformly
//! ([`ItemsRandomizer`]); the level travels in its report and the estimates use the realized
//! level counts (conditional on them the levels are a uniformly random partition of the
//! devices, so the closed-form variances hold with the realized n_j).
//!
//! # Cost
//! PEM and TreeHist keep every report (16 bytes each: level j's candidates depend on level
//! j − 1's estimates, and OLH tests each report against each candidate), so adding is a push and
//! the estimate runs the whole search: at B = 32, top 20, PEM's default four levels, about 4,900
//! hash tests per report: 8.8 s at 10^6 reports of Adult items (TreeHist: 0.45 s), release with
//! `parallel` on this 2-core machine shared with other builds (`cargo bench -p harmony-tasks
//! --features parallel --bench heavy_marginals`, median of 3). A server caches their estimate and
//! reruns it when reports have arrived. Validating and adding a report: 85–195 ns
//! (fastest–median, same bench); a report is 11–14 bytes (14 typically: the 64-bit OLH seed as a
//! varint). The sketch keeps `rows` × `columns` signed sums per level whatever the reports (at
//! most 1,048,632 saved bytes at the defaults and B = 32; an ingest batch saves only its nonzero
//! sums), merges by adding them, and estimates in about a millisecond (a transform per row, k
//! look-ups per candidate): windows and series of any length answer from bucket states
//! (docs/CONTINUOUS.md, "Scale"). Its report is 6–7 bytes at the defaults.

use crate::erased::{Task, TaskAggregator, Typed, encode_to};
use crate::input::Input;
use harmony_analytics::heavy::sketch::{DEFAULT_COLUMNS, DEFAULT_ROWS};
use harmony_analytics::heavy::treehist::treehist;
use harmony_analytics::heavy::{
    HeavyHitterAggregator, HeavyHitterReport, HeavyHitters, ItemCodec, ItemsRandomizer, LevelOracle, PrefixProtocol,
    SketchAggregator, SketchProtocol, SketchReport,
};
use harmony_core::error::{Error, Result};
use harmony_core::randomizer::Randomizer;
use harmony_core::wire;
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::{Est, HeavyHitterResult, HeavyHittersEstimate, HeavyLevel, Query, TaskEstimate};
use harmony_protocol::spec::{HeavyHittersSpec, HeavyMethod, ItemEncoding, TaskSpec};
use rand::Rng;
use std::collections::HashMap;

/// Heavy hitters found by default.
pub const DEFAULT_TOP: usize = 20;
/// Code length by default (bits).
pub const DEFAULT_BITS: u32 = 32;
/// The most public candidate names a spec may list.
pub const MAX_CANDIDATES: usize = 100_000;

/// An analytics error renamed to the spec field it comes from (value and reason kept).
fn field(name: &'static str, shown: impl std::fmt::Debug) -> impl FnOnce(Error) -> Error {
    move |e| match e {
        Error::InvalidParameter { name: inner, value, expected } => {
            Error::param(name, &shown, format!("{expected} ({inner} is {value})"))
        }
        other => other,
    }
}

fn codec(spec: &HeavyHittersSpec, bits: u32) -> Result<ItemCodec> {
    match spec.items {
        ItemEncoding::Hash => ItemCodec::hashed(bits),
        ItemEncoding::Id => ItemCodec::ids(bits),
    }
    .map_err(field("task.bits", bits))
}

/// The protocol of a spec: the method's default schedule and pruning, or its pruning on the
/// spec's levels (`sketch`: PEM's).
fn protocol(spec: &HeavyHittersSpec, epsilon: f64, bits: u32, top: usize) -> Result<PrefixProtocol> {
    let default = match spec.method {
        HeavyMethod::Pem | HeavyMethod::Sketch => PrefixProtocol::pem(epsilon, bits, top),
        HeavyMethod::Treehist => treehist(epsilon, bits, top),
    }
    .map_err(|e| match &e {
        Error::InvalidParameter { name: "k", .. } => field("task.top", top)(e),
        Error::InvalidParameter { name: "epsilon", .. } => e,
        _ => field("task.bits", bits)(e),
    })?;
    match &spec.levels {
        None => Ok(default),
        Some(levels) => PrefixProtocol::new(epsilon, bits, levels.clone(), top, default.pruning())
            .map_err(field("task.levels", levels)),
    }
}

/// The sketch of a `sketch` spec on `protocol`'s tree: `rows` × `columns` per level.
fn sketch(spec: &HeavyHittersSpec, epsilon: f64, protocol: &PrefixProtocol) -> Result<SketchProtocol> {
    let (rows, columns) = (spec.rows.unwrap_or(DEFAULT_ROWS), spec.columns.unwrap_or(DEFAULT_COLUMNS));
    SketchProtocol::new(epsilon, protocol.tree().clone(), rows, columns).map_err(|e| match &e {
        Error::InvalidParameter { name: "k", .. } => field("task.rows", rows)(e),
        Error::InvalidParameter { name: "m", .. } => field("task.columns", columns)(e),
        _ => e,
    })
}

/// The devices' randomizer of a resolved spec.
fn device(spec: &HeavyHittersSpec, epsilon: f64) -> Result<Device> {
    let (bits, top, pad) =
        (spec.bits.unwrap_or(DEFAULT_BITS), spec.top.unwrap_or(DEFAULT_TOP), spec.pad_length.unwrap_or(1));
    let protocol = protocol(spec, epsilon, bits, top)?;
    Ok(match spec.method {
        HeavyMethod::Sketch => Device::Sketch(ItemsRandomizer::new(sketch(spec, epsilon, &protocol)?, pad)?),
        HeavyMethod::Pem | HeavyMethod::Treehist => Device::Prefix(ItemsRandomizer::new(protocol, pad)?),
    })
}

/// Writes out `top`, `bits`, `pad_length`, the levels and (`sketch`) `rows` and `columns`, and
/// checks every field: errors name `task.<field>`, the value and what was expected.
pub fn resolve(spec: &HeavyHittersSpec, epsilon: f64) -> Result<HeavyHittersSpec> {
    let top = spec.top.unwrap_or(DEFAULT_TOP);
    if top == 0 {
        return Err(Error::param("task.top", 0, "an integer >= 1"));
    }
    let bits = spec.bits.unwrap_or(DEFAULT_BITS);
    let codec = codec(spec, bits)?;
    let pad = spec.pad_length.unwrap_or(1);
    if pad == 0 {
        return Err(Error::param("task.pad_length", 0, "an integer >= 1 (slots per device's set)"));
    }
    let protocol = protocol(spec, epsilon, bits, top)?;
    if spec.candidates.len() > MAX_CANDIDATES {
        return Err(Error::param("task.candidates", spec.candidates.len(), format!("at most {MAX_CANDIDATES} names")));
    }
    for c in &spec.candidates {
        codec.encode(c).map_err(|e| Error::param("task.candidates", c, e.to_string()))?;
    }
    let (rows, columns) = if spec.method == HeavyMethod::Sketch {
        let sketch = sketch(spec, epsilon, &protocol)?;
        (Some(sketch.rows()), Some(sketch.columns()))
    } else {
        for (name, v) in [("task.rows", spec.rows), ("task.columns", spec.columns)] {
            if let Some(v) = v {
                let expected =
                    format!("no value with method {} (rows and columns are the sketch's)", spec.method.name());
                return Err(Error::param(name, v, expected));
            }
        }
        (None, None)
    };
    Ok(HeavyHittersSpec {
        top: Some(top),
        bits: Some(bits),
        pad_length: Some(pad),
        levels: Some(protocol.levels().to_vec()),
        rows,
        columns,
        ..spec.clone()
    })
}

/// The devices' randomizer of each method.
#[derive(Debug)]
enum Device {
    /// PEM and TreeHist: OLH per level.
    Prefix(ItemsRandomizer<PrefixProtocol>),
    /// A Hadamard count-mean sketch per level.
    Sketch(ItemsRandomizer<SketchProtocol>),
}

/// The `heavy-hitters` task.
#[derive(Debug)]
pub struct HeavyHittersTask {
    config: CollectionConfig,
    spec: HeavyHittersSpec,
    codec: ItemCodec,
    device: Device,
    names: HashMap<u64, Vec<String>>,
}

impl HeavyHittersTask {
    /// Builds the devices' randomizer and the candidates' codes of a heavy-hitters config.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::HeavyHitters(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "heavy-hitters"));
        };
        let spec = resolve(spec, config.epsilon)?;
        let codec = codec(&spec, spec.bits.unwrap_or(DEFAULT_BITS))?;
        let device = device(&spec, config.epsilon)?;
        let mut names: HashMap<u64, Vec<String>> = HashMap::new();
        for c in &spec.candidates {
            let list = names.entry(codec.encode(c)?).or_default();
            if !list.contains(c) {
                list.push(c.clone());
            }
        }
        Ok(HeavyHittersTask { config, spec, codec, device, names })
    }
    /// The spec with every default written out.
    pub fn spec(&self) -> &HeavyHittersSpec {
        &self.spec
    }
    /// The padding length L.
    fn pad_length(&self) -> usize {
        match &self.device {
            Device::Prefix(d) => d.pad_length(),
            Device::Sketch(d) => d.pad_length(),
        }
    }
    /// A device's distinct item codes, in increasing order (the randomizer's input).
    pub fn codes(&self, items: &[String]) -> Result<Vec<u64>> {
        let mut codes = items.iter().map(|s| self.codec.encode(s)).collect::<Result<Vec<u64>>>()?;
        codes.sort_unstable();
        codes.dedup();
        Ok(codes)
    }
    /// The estimate document of an accumulator.
    pub fn document<A: LevelOracle>(&self, agg: &A) -> Result<HeavyHittersEstimate> {
        let pad = self.pad_length();
        let counts = agg.level_counts();
        let found = if counts.contains(&0) { None } else { Some(agg.estimate_sets(pad)?) };
        let levels = match &found {
            Some(HeavyHitters { levels, .. }) => levels
                .iter()
                .map(|l| HeavyLevel {
                    prefix_bits: l.prefix_bits,
                    reports: l.users,
                    candidates: l.candidates,
                    kept: l.kept,
                })
                .collect(),
            None => agg
                .tree()
                .levels()
                .iter()
                .zip(&counts)
                .map(|(&prefix_bits, &reports)| HeavyLevel { prefix_bits, reports, candidates: 0, kept: 0 })
                .collect(),
        };
        let bits = self.codec.bits();
        let width = bits.div_ceil(4) as usize;
        let items = found
            .map(|hh| hh.items)
            .unwrap_or_default()
            .into_iter()
            .map(|h| HeavyHitterResult {
                code: format!("{:0width$x}", h.code),
                item: self.names.get(&h.code).map(|n| n.join(" | ")),
                frequency: Est::new(h.estimate, h.std_error),
            })
            .collect();
        let method = self.spec.method.name().to_string();
        let (in_domain_note, warnings) = (None, Vec::new());
        let mut doc = HeavyHittersEstimate { method, bits, pad_length: pad, items, levels, in_domain_note, warnings };
        crate::domain::heavy(&mut doc, counts.iter().sum());
        Ok(doc)
    }
}

impl Task for HeavyHittersTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let codes = self.codes(input.items("heavy-hitters")?)?;
        match &self.device {
            Device::Prefix(d) => encode_to(&d.randomize(&codes, rng)?, out),
            Device::Sketch(d) => encode_to(&d.randomize(&codes, rng)?, out),
        }
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        match &self.device {
            Device::Prefix(d) => d.validate(&wire::decode::<HeavyHitterReport>(report)?),
            Device::Sketch(d) => d.validate(&wire::decode::<SketchReport>(report)?),
        }
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        match &self.device {
            Device::Prefix(d) => Box::new(Typed::wire(d.protocol().aggregator())),
            Device::Sketch(d) => Box::new(Typed::wire(d.protocol().aggregator())),
        }
    }
    fn estimate(&self, agg: &dyn TaskAggregator, _query: &Query) -> Result<TaskEstimate> {
        let doc = match &self.device {
            Device::Prefix(_) => self.document(Typed::<HeavyHitterAggregator>::of(agg)?)?,
            Device::Sketch(_) => self.document(Typed::<SketchAggregator>::of(agg)?)?,
        };
        Ok(TaskEstimate::HeavyHitters(doc))
    }
    /// PEM's and TreeHist's level search costs seconds at 10^6 reports (PEM 8.8 s, TreeHist
    /// 0.45 s): a server serves its last document and recomputes it in the background at most
    /// every 10 s. The sketch's costs milliseconds whatever the reports: always current.
    fn refresh_seconds(&self) -> f64 {
        match self.device {
            Device::Prefix(_) => REFRESH_SECONDS,
            Device::Sketch(_) => 0.0,
        }
    }
}

/// How often a server recomputes an expensive document in the background (seconds).
pub const REFRESH_SECONDS: f64 = 10.0;

#[cfg(test)]
mod tests;
