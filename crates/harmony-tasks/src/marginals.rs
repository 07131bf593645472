//! `marginals`: every k-way marginal (k in `ways`) over some attributes — categorical ones as
//! they are, numeric ones in equal-width `bins` — by CALM (with its post-processings), the
//! direct baseline or the Fourier method ([`harmony_analytics::marginals`]).
//!
//! A device encodes its record to one code per attribute (a numeric value on [-1, 1] falls in
//! bin ⌊(u + 1)/2 · B⌋), draws its group itself — a CALM set, a direct query or a Fourier
//! coefficient, uniformly and independently of its data — and reports. The estimates use the
//! realized group counts: conditional on them the groups are a uniformly random partition of
//! the devices, so the finite-population variances hold with the realized sizes (see
//! `harmony_analytics::marginals::groups`).
//!
//! CALM's plan (the materialized sets) is chosen once, at [`resolve`], from the schema, ε and
//! the expected number of devices `users`, and published as `sets`: devices never re-plan, and
//! a build from the published config makes the same groups.
//!
//! # Cost
//! The state is integer counts per group (GRR) or bit-sliced counters (OUE); estimating does not
//! revisit reports. CALM's joint fit (post `joint`) works on the joint table of the attributes
//! and does not depend on the number of reports. On Adult's 9 categorical attributes (all 120
//! 2- and 3-way marginals, ε = 1, planned for 10^6 devices), release on this shared 2-core
//! machine (`cargo bench -p harmony-tasks --features parallel --bench heavy_marginals`, median
//! of 3 at 10^6 reports): CALM with `joint` 1.2 s, direct 26 ms, Fourier (2-way) 0.8 ms. A
//! server should cache the estimate and rerun it when reports have arrived.
//!
//! Reports: GRR cells are a few bytes, OUE bit vectors ⌈cells/64⌉ varint words (CALM on that
//! plan: 6 / 72 / 1,477 bytes min / median / max; direct 5 / 37 / 1,475; Fourier 4–5 bytes).
//! Validating and adding one costs about 10 ns per byte (CALM 2.2–3.6 µs fastest–median,
//! direct 1.7–2.9 µs, Fourier 21–158 ns).

use crate::erased::{Task, TaskAggregator, Typed, encode_to};
use crate::input::Input;
use harmony_analytics::marginals::calm::{self, CalmOptions, CalmPlan, CalmRaw, Post};
use harmony_analytics::marginals::fourier::{FourierAggregator, FourierPlan, FourierRandomizer, FourierReport};
use harmony_analytics::marginals::groups::{GroupAggregator, GroupRandomizer, GroupReport};
use harmony_analytics::marginals::{MAX_CELLS, MarginalEstimate, all_queries};
use harmony_core::aggregate::Aggregator;
use harmony_core::error::{Error, Result};
use harmony_core::randomizer::Randomizer;
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_core::wire;
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::{Est, MarginalResult, MarginalsEstimate, Query, TaskEstimate};
use harmony_protocol::spec::{MarginalsMethod, MarginalsPost, MarginalsSpec, TaskSpec};
use rand::Rng;

/// Devices CALM plans for by default.
pub const DEFAULT_USERS: u64 = 100_000;
/// The most queries (marginals) a collection answers.
pub const MAX_QUERIES: usize = 20_000;
/// The most Fourier coefficients (device groups) of a collection: its state is 16 bytes each.
pub const MAX_COEFFICIENTS: usize = 1 << 16;
/// The most bins of a numeric attribute.
pub const MAX_BINS: usize = 1 << 12;

/// The collection's attributes: schema positions, names, cardinalities, labels and bins.
#[derive(Debug, Clone)]
struct Layout {
    positions: Vec<usize>,
    names: Vec<String>,
    cards: Vec<usize>,
    labels: Vec<Vec<String>>,
    numeric: Vec<bool>,
    /// Per attribute: its presence attribute (a numeric attribute reporting missing values,
    /// whose last cell is "(missing)").
    presence: Vec<Option<usize>>,
}

impl Layout {
    /// The attributes of a spec (default: every categorical one and every numeric one in
    /// `bins`), checked against the schema.
    fn new(spec: &MarginalsSpec, schema: &Schema) -> Result<Self> {
        let attrs = schema.attributes();
        for (name, &b) in &spec.bins {
            match schema.position(name).map(|j| &attrs[j]) {
                Some(Attribute::Numeric { .. }) if (2..=MAX_BINS).contains(&b) => {}
                Some(Attribute::Numeric { .. }) => {
                    return Err(Error::param("task.bins", format!("{name} = {b}"), format!("2 to {MAX_BINS} bins")));
                }
                _ => return Err(Error::param("task.bins", name, "the name of a numeric attribute of the schema")),
            }
        }
        let names: Vec<String> = match &spec.attributes {
            Some(list) => list.clone(),
            None => attrs
                .iter()
                .filter(|a| !a.is_numeric() || spec.bins.contains_key(a.name()))
                .map(|a| a.name().to_string())
                .collect(),
        };
        if names.len() < 2 || names.len() > 128 {
            return Err(Error::param("task.attributes", &names, "2 to 128 categorical or binned numeric attributes"));
        }
        let mut layout = Layout {
            positions: vec![],
            names: vec![],
            cards: vec![],
            labels: vec![],
            numeric: vec![],
            presence: vec![],
        };
        for name in &names {
            let j = schema
                .position(name)
                .ok_or_else(|| Error::param("task.attributes", name, "names of the schema's attributes"))?;
            if layout.positions.contains(&j) {
                return Err(Error::param("task.attributes", name, "distinct attributes (listed twice)"));
            }
            let labels = match &attrs[j] {
                Attribute::Categorical { categories, .. } => categories.clone(),
                Attribute::Numeric { min, max, .. } => {
                    let b = *spec.bins.get(name).ok_or_else(|| {
                        Error::param("task.bins", name, format!("a number of bins for the numeric attribute {name}"))
                    })?;
                    let w = (max - min) / b as f64;
                    let mut labels: Vec<String> =
                        (0..b).map(|t| format!("[{}, {})", min + t as f64 * w, min + (t + 1) as f64 * w)).collect();
                    // Reporting missing values: one more cell after the bins.
                    if schema.presence_of(j).is_some() {
                        labels.push(harmony_core::schema::MISSING_LABEL.to_string());
                    }
                    labels
                }
            };
            layout.presence.push(schema.presence_of(j));
            layout.positions.push(j);
            layout.names.push(name.clone());
            layout.cards.push(labels.len());
            layout.numeric.push(attrs[j].is_numeric());
            layout.labels.push(labels);
        }
        Ok(layout)
    }

    /// A device's codes, one per attribute, from its encoded record.
    fn codes(&self, record: &[Value]) -> Result<Vec<u32>> {
        self.positions
            .iter()
            .enumerate()
            .map(|(i, &j)| {
                let c = self.cards[i];
                let missing = self.presence[i].map(|p| record.get(p) == Some(&Value::Category(1)));
                let bins = c - usize::from(missing.is_some());
                match (record.get(j), self.numeric[i]) {
                    (Some(Value::Category(v)), false) if (*v as usize) < c => Ok(*v),
                    (Some(Value::Unit(_)), true) if missing == Some(true) => Ok(bins as u32),
                    (Some(Value::Unit(u)), true) if (-1.0..=1.0).contains(u) => {
                        Ok((((u + 1.0) / 2.0 * bins as f64).floor() as usize).min(bins - 1) as u32)
                    }
                    (other, numeric) => Err(Error::input(
                        self.names[i].as_str(),
                        other,
                        if numeric {
                            "a numeric value mapped to [-1, 1]".into()
                        } else {
                            format!("a category in [0, {c})")
                        },
                    )),
                }
            })
            .collect()
    }

    /// Attribute indices (into the layout) to names.
    fn named(&self, set: &[usize]) -> Vec<String> {
        set.iter().map(|&a| self.names[a].clone()).collect()
    }
}

/// Every k-subset of the attributes for k in `ways` (k ascending, lexicographic).
fn queries(layout: &Layout, ways: &[usize]) -> Result<Vec<Vec<usize>>> {
    let all: Vec<usize> = (0..layout.names.len()).collect();
    let mut out = Vec::new();
    for &k in ways {
        out.extend(all_queries(&all, k, &layout.names)?);
        if out.len() > MAX_QUERIES {
            return Err(Error::param("task.ways", ways, format!("at most {MAX_QUERIES} marginals in all")));
        }
    }
    Ok(out)
}

/// The marginal sizes: the spec's (sorted, distinct, each in [1, d]) or 2 and 3 (at most d).
fn ways(spec: &MarginalsSpec, d: usize) -> Result<Vec<usize>> {
    let mut ways = spec.ways.clone().unwrap_or_else(|| (2..=3.min(d)).collect());
    ways.sort_unstable();
    ways.dedup();
    if ways.is_empty() || ways.iter().any(|&k| k == 0 || k > d) {
        return Err(Error::param(
            "task.ways",
            &spec.ways,
            format!("marginal sizes between 1 and {d} (the attributes)"),
        ));
    }
    Ok(ways)
}

/// How the devices report and the server answers.
#[derive(Debug)]
enum Method {
    /// CALM (post `None`: raw) or direct (`direct`: no post-processing).
    Grouped { plan: CalmPlan, device: GroupRandomizer, post: Option<Post>, direct: bool },
    /// The Fourier method.
    Fourier { plan: FourierPlan, device: FourierRandomizer },
}

fn analytics_post(post: MarginalsPost) -> Option<Post> {
    match post {
        MarginalsPost::Joint => Some(Post::Joint),
        MarginalsPost::Family => Some(Post::Family),
        MarginalsPost::Gls => Some(Post::Gls),
        MarginalsPost::Local => Some(Post::Local),
        MarginalsPost::Raw => None,
    }
}

/// CALM's sets as attribute indices of the layout, or an error naming `task.sets`.
fn set_indices(layout: &Layout, sets: &[Vec<String>]) -> Result<Vec<Vec<usize>>> {
    sets.iter()
        .map(|s| {
            let mut idx = s
                .iter()
                .map(|n| layout.names.iter().position(|a| a == n))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| Error::param("task.sets", s, "sets of the collection's attributes"))?;
            idx.sort_unstable();
            Ok(idx)
        })
        .collect()
}

/// The spec with every choice written out, its layout, queries and method.
fn setup(spec: &MarginalsSpec, schema: &Schema, epsilon: f64) -> Result<(MarginalsSpec, Layout, Method)> {
    let layout = Layout::new(spec, schema)?;
    let ways = ways(spec, layout.names.len())?;
    let qs = queries(&layout, &ways)?;
    let mut out = MarginalsSpec { attributes: Some(layout.names.clone()), ways: Some(ways), ..spec.clone() };
    let (names, cards) = (&layout.names, &layout.cards);
    let method = if spec.method == MarginalsMethod::Calm {
        let users = spec.users.unwrap_or(DEFAULT_USERS);
        if users == 0 {
            return Err(Error::param("task.users", 0, "an integer >= 1 (the devices expected)"));
        }
        let n = usize::try_from(users).unwrap_or(usize::MAX);
        let plan = match &spec.sets {
            Some(sets) => CalmPlan::with_sets(names, cards, n, epsilon, set_indices(&layout, sets)?, &qs, MAX_CELLS)
                .map_err(|e| Error::param("task.sets", sets, e.to_string()))?,
            None => {
                let opts = CalmOptions { l: spec.l, ..CalmOptions::default() };
                CalmPlan::choose_for(names, cards, n, epsilon, &qs, opts).map_err(|e| match e {
                    Error::InvalidParameter { name: "l", value, expected } => {
                        Error::InvalidParameter { name: "task.l", value, expected }
                    }
                    Error::InvalidInput { value, expected, .. } => {
                        Error::InvalidParameter { name: "task.attributes", value, expected }
                    }
                    other => other,
                })?
            }
        };
        if spec.sets.is_some() && spec.l.is_some_and(|l| l != plan.l) {
            return Err(Error::param("task.l", spec.l, format!("{} (the largest of the sets given)", plan.l)));
        }
        let post = spec.post.unwrap_or_default();
        out = MarginalsSpec {
            post: Some(post),
            l: Some(plan.l),
            users: Some(users),
            sets: Some(plan.sets.iter().map(|s| layout.named(s)).collect()),
            ..out
        };
        let device = plan.randomizer()?;
        Method::Grouped { plan, device, post: analytics_post(post), direct: false }
    } else {
        for (field, given) in [
            ("task.post", spec.post.is_some()),
            ("task.l", spec.l.is_some()),
            ("task.users", spec.users.is_some()),
            ("task.sets", spec.sets.is_some()),
        ] {
            if given {
                return Err(Error::param(field, "given", format!("none with method {}", spec.method.name())));
            }
        }
        if spec.method == MarginalsMethod::Direct {
            let plan = CalmPlan::direct(names, cards, 1, epsilon, &qs, MAX_CELLS)
                .map_err(|e| Error::param("task.ways", &out.ways, e.to_string()))?;
            let device = plan.randomizer()?;
            Method::Grouped { plan, device, post: None, direct: true }
        } else {
            let plan = FourierPlan::new(names, cards, epsilon, &qs)
                .map_err(|e| Error::param("task.ways", &out.ways, e.to_string()))?;
            if plan.coefficients() > MAX_COEFFICIENTS {
                return Err(Error::param(
                    "task.ways",
                    &out.ways,
                    format!("at most {MAX_COEFFICIENTS} Fourier coefficients (these need {})", plan.coefficients()),
                ));
            }
            let device = plan.randomizer();
            Method::Fourier { plan, device }
        }
    };
    Ok((out, layout, method))
}

/// Writes out the attributes, the ways and, for CALM, the post-processing, `users`, the plan's
/// sets and l (and checks every field: errors name `task.<field>`, the value and what was
/// expected).
pub fn resolve(spec: &MarginalsSpec, schema: &Schema, epsilon: f64) -> Result<MarginalsSpec> {
    setup(spec, schema, epsilon).map(|(spec, _, _)| spec)
}

/// The `marginals` task.
#[derive(Debug)]
pub struct MarginalsTask {
    config: CollectionConfig,
    spec: MarginalsSpec,
    layout: Layout,
    method: Method,
}

impl MarginalsTask {
    /// Builds the devices' randomizer and the plan of a marginals config (CALM from its
    /// published sets: no planning).
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::Marginals(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "marginals"));
        };
        let (spec, layout, method) = setup(spec, config.schema()?, config.epsilon)?;
        Ok(MarginalsTask { config, spec, layout, method })
    }
    /// The spec with every choice written out.
    pub fn spec(&self) -> &MarginalsSpec {
        &self.spec
    }
    /// A device's codes (one per attribute of the collection) from its encoded record.
    pub fn codes(&self, record: &[Value]) -> Result<Vec<u32>> {
        self.layout.codes(record)
    }

    fn result(&self, q: &[usize], m: Option<MarginalEstimate>) -> MarginalResult {
        let l = &self.layout;
        let cells_of = |m: &MarginalEstimate| -> Vec<Est> {
            match (&m.std_errors, m.std_error()) {
                (Some(se), _) => m.cells.iter().zip(se).map(|(&x, &s)| Est::new(x, s)).collect(),
                (None, Some(guide)) => {
                    m.cells.iter().map(|&x| Est { std_error: Some(guide), ..Est::point(x) }).collect()
                }
                (None, None) => m.cells.iter().map(|&x| Est::point(x)).collect(),
            }
        };
        let dq: usize = q.iter().map(|&a| l.cards[a]).product();
        let (cells, predicted_sse) = match &m {
            Some(m) => (cells_of(m), m.predicted_sse),
            None => (vec![Est::NONE; dq], None),
        };
        MarginalResult {
            attributes: l.named(q),
            labels: q.iter().map(|&a| l.labels[a].clone()).collect(),
            cells,
            predicted_sse,
        }
    }

    fn grouped(&self, plan: &CalmPlan, post: Option<Post>, direct: bool, agg: &GroupAggregator) -> MarginalsEstimate {
        let raw = CalmRaw::from_estimates(&agg.estimate());
        let answers = calm::estimate(plan, &raw, post);
        let post = match (direct, answers.used) {
            (true, _) => "none".to_string(),
            (false, None) => "raw".to_string(),
            (false, Some(Post::Joint)) => "joint".to_string(),
            (false, Some(Post::Family)) => "family".to_string(),
            (false, Some(Post::Gls)) => "gls".to_string(),
            (false, Some(Post::Local)) => "local".to_string(),
        };
        let marginals = plan.queries.iter().zip(answers.marginals).map(|(q, m)| self.result(q, m)).collect();
        MarginalsEstimate {
            method: self.spec.method.name().to_string(),
            post,
            sets: plan.sets.iter().map(|s| self.layout.named(s)).collect(),
            group_reports: agg.sizes(),
            marginals,
            in_domain_note: None,
            warnings: Vec::new(),
        }
    }

    fn fourier(&self, plan: &FourierPlan, agg: &FourierAggregator) -> MarginalsEstimate {
        let est = agg.estimate();
        let answers = plan.answer(&est);
        let marginals = plan.queries().iter().zip(answers).map(|(q, m)| self.result(q, m)).collect();
        MarginalsEstimate {
            method: "fourier".into(),
            post: "none".into(),
            sets: Vec::new(),
            group_reports: est.counts,
            marginals,
            in_domain_note: None,
            warnings: Vec::new(),
        }
    }
}

impl Task for MarginalsTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let codes = self.layout.codes(input.record("marginals")?)?;
        match &self.method {
            Method::Grouped { device, .. } => encode_to(&device.randomize(&codes, rng)?, out),
            Method::Fourier { device, .. } => encode_to(&device.randomize(&codes, rng)?, out),
        }
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        match &self.method {
            Method::Grouped { device, .. } => device.validate(&wire::decode::<GroupReport>(report)?),
            Method::Fourier { device, .. } => device.validate(&wire::decode::<FourierReport>(report)?),
        }
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        match &self.method {
            Method::Grouped { device, .. } => Box::new(Typed::wire(device.aggregator())),
            Method::Fourier { plan, .. } => Box::new(Typed::wire(plan.aggregator())),
        }
    }
    fn estimate(&self, agg: &dyn TaskAggregator, _query: &Query) -> Result<TaskEstimate> {
        let doc = match &self.method {
            Method::Grouped { plan, post, direct, .. } => {
                self.grouped(plan, *post, *direct, Typed::<GroupAggregator>::of(agg)?)
            }
            Method::Fourier { plan, .. } => self.fourier(plan, Typed::<FourierAggregator>::of(agg)?),
        };
        let mut doc = doc;
        crate::domain::marginals(&mut doc, agg.count());
        Ok(TaskEstimate::Marginals(doc))
    }
    /// CALM's consistency and non-negativity fits (`joint`, `family`, `local`) cost up to seconds
    /// at 10^6 reports: a server serves its last document and refits in the background at most
    /// every [`crate::heavy::REFRESH_SECONDS`]; the raw, GLS, direct and Fourier answers are
    /// cheap and always current.
    fn refresh_seconds(&self) -> f64 {
        match &self.method {
            Method::Grouped { post: Some(Post::Joint | Post::Family | Post::Local), .. } => {
                crate::heavy::REFRESH_SECONDS
            }
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests;
