//! Every frequency oracle behind one type, chosen by name at run time (the CLI, configs).
//!
//! [`AnyOracle`] implements [`FrequencyOracle`] with [`AnyReport`] and [`AnyAggregator`], so
//! generic code drives any oracle; a report of the wrong variant is an
//! [`Error::InvalidReport`], merging aggregators of different oracles an [`Error::Incompatible`].

use super::rappor::{RapporShape, default_cohorts};
use super::{
    Adaptive, AdaptiveAggregator, AdaptiveReport, BassilySmith, BassilySmithAggregator, BassilySmithReport, Cms,
    CmsAggregator, CmsReport, FrequencyOracle, Grr, GrrAggregator, GrrReport, Hadamard, HadamardAggregator,
    HadamardReport, HadamardResponse, Hcms, HcmsAggregator, HcmsReport, HrAggregator, HrReport, Olh, OlhAggregator,
    OlhReport, Oue, Rappor, RapporAggregator, RapporReport, Sue, UnaryAggregator, UnaryEncoding, UnaryReport, cms,
    hcms, rappor,
};
use crate::aggregate::{Aggregator, at_index};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::kinds::OracleKind;
use crate::params::Epsilon;
use crate::wire::{self, ReportKind, WIRE_VERSION};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The names accepted by [`AnyOracle::by_name`], in a stable order.
pub const FREQUENCY_NAMES: &[&str] =
    &["grr", "sue", "oue", "olh", "hadamard", "hr", "bassily-smith", "adaptive", "cms", "hcms", "rappor"];

/// The names of the sketch oracles, which also take parameters: `cms:k=256:m=1024:seed=7`,
/// `hcms:k=…:m=…:seed=…`, `rappor:m=128:h=2:cohorts=8:p=0:q=1:seed=…`.
pub const SKETCH_NAMES: &[&str] = &["cms", "hcms", "rappor"];

/// Any frequency oracle, chosen by name.
///
/// # Example
/// ```
/// use harmony_core::frequency::{AnyOracle, FREQUENCY_NAMES};
/// use harmony_core::{Aggregator, FrequencyOracle};
/// let mut rng = harmony_core::sampling::fast_rng(42);
/// for name in FREQUENCY_NAMES {
///     let o = AnyOracle::by_name(name, 2.0, 8).unwrap();
///     let mut agg = o.aggregator();
///     for i in 0..4000 {
///         let bytes = o.randomize(i % 2, &mut rng).unwrap().encode(); // what a client sends
///         agg.add(&o.decode_report(&bytes).unwrap()).unwrap();
///     }
///     let est = agg.estimate();
///     let tolerance = if *name == "bassily-smith" { 0.5 } else { 5.0 * est.std_errors[1] };
///     assert!((est.frequencies[1] - 0.5).abs() < tolerance, "{name}");
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum AnyOracle {
    /// [`Grr`].
    Grr(Grr),
    /// [`Sue`].
    Sue(UnaryEncoding),
    /// [`Oue`].
    Oue(UnaryEncoding),
    /// [`Olh`].
    Olh(Olh),
    /// [`Hadamard`].
    Hadamard(Hadamard),
    /// [`HadamardResponse`].
    Hr(HadamardResponse),
    /// [`BassilySmith`] (biased baseline).
    BassilySmith(BassilySmith),
    /// [`Adaptive`].
    Adaptive(Adaptive),
    /// [`Cms`].
    Cms(Cms),
    /// [`Hcms`].
    Hcms(Hcms),
    /// [`Rappor`].
    Rappor(Rappor),
}

/// A report of any frequency oracle (SUE and OUE share [`UnaryReport`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AnyReport {
    /// GRR.
    Grr(GrrReport),
    /// SUE or OUE.
    Unary(UnaryReport),
    /// OLH.
    Olh(OlhReport),
    /// 1-bit Hadamard.
    Hadamard(HadamardReport),
    /// Hadamard Response.
    Hr(HrReport),
    /// Bassily–Smith.
    BassilySmith(BassilySmithReport),
    /// Adaptive.
    Adaptive(AdaptiveReport),
    /// Count Mean Sketch.
    Cms(CmsReport),
    /// Hadamard Count Mean Sketch.
    Hcms(HcmsReport),
    /// RAPPOR.
    Rappor(RapporReport),
}

/// The aggregator of any frequency oracle.
#[derive(Debug, Clone)]
pub enum AnyAggregator {
    /// GRR.
    Grr(GrrAggregator),
    /// SUE or OUE.
    Unary(UnaryAggregator),
    /// OLH.
    Olh(OlhAggregator),
    /// 1-bit Hadamard.
    Hadamard(HadamardAggregator),
    /// Hadamard Response.
    Hr(HrAggregator),
    /// Bassily–Smith.
    BassilySmith(BassilySmithAggregator),
    /// Adaptive.
    Adaptive(AdaptiveAggregator),
    /// Count Mean Sketch.
    Cms(CmsAggregator),
    /// Hadamard Count Mean Sketch.
    Hcms(HcmsAggregator),
    /// RAPPOR.
    Rappor(RapporAggregator),
}

macro_rules! each_oracle {
    ($self:expr, $o:ident => $e:expr) => {
        match $self {
            AnyOracle::Grr($o) => $e,
            AnyOracle::Sue($o) | AnyOracle::Oue($o) => $e,
            AnyOracle::Olh($o) => $e,
            AnyOracle::Hadamard($o) => $e,
            AnyOracle::Hr($o) => $e,
            AnyOracle::BassilySmith($o) => $e,
            AnyOracle::Adaptive($o) => $e,
            AnyOracle::Cms($o) => $e,
            AnyOracle::Hcms($o) => $e,
            AnyOracle::Rappor($o) => $e,
        }
    };
}

/// Matches an oracle (or aggregator) with a report of its own kind; `$other` otherwise.
macro_rules! paired {
    ($self:expr, $r:expr, $o:ident, $x:ident => $e:expr, _ => $other:expr) => {
        match ($self, $r) {
            (AnyOracle::Grr($o), AnyReport::Grr($x)) => $e,
            (AnyOracle::Sue($o) | AnyOracle::Oue($o), AnyReport::Unary($x)) => $e,
            (AnyOracle::Olh($o), AnyReport::Olh($x)) => $e,
            (AnyOracle::Hadamard($o), AnyReport::Hadamard($x)) => $e,
            (AnyOracle::Hr($o), AnyReport::Hr($x)) => $e,
            (AnyOracle::BassilySmith($o), AnyReport::BassilySmith($x)) => $e,
            (AnyOracle::Adaptive($o), AnyReport::Adaptive($x)) => $e,
            (AnyOracle::Cms($o), AnyReport::Cms($x)) => $e,
            (AnyOracle::Hcms($o), AnyReport::Hcms($x)) => $e,
            (AnyOracle::Rappor($o), AnyReport::Rappor($x)) => $e,
            _ => $other,
        }
    };
}

macro_rules! paired_agg {
    ($self:expr, $r:expr, $o:ident, $x:ident => $e:expr, _ => $other:expr) => {
        match ($self, $r) {
            (AnyAggregator::Grr($o), AnyReport::Grr($x)) => $e,
            (AnyAggregator::Unary($o), AnyReport::Unary($x)) => $e,
            (AnyAggregator::Olh($o), AnyReport::Olh($x)) => $e,
            (AnyAggregator::Hadamard($o), AnyReport::Hadamard($x)) => $e,
            (AnyAggregator::Hr($o), AnyReport::Hr($x)) => $e,
            (AnyAggregator::BassilySmith($o), AnyReport::BassilySmith($x)) => $e,
            (AnyAggregator::Adaptive($o), AnyReport::Adaptive($x)) => $e,
            (AnyAggregator::Cms($o), AnyReport::Cms($x)) => $e,
            (AnyAggregator::Hcms($o), AnyReport::Hcms($x)) => $e,
            (AnyAggregator::Rappor($o), AnyReport::Rappor($x)) => $e,
            _ => $other,
        }
    };
}

impl AnyOracle {
    /// Builds the oracle called `name` (one of [`FREQUENCY_NAMES`]) with budget `epsilon` over
    /// [0, d). A sketch's name may carry parameters, `name:key=value:…` (see [`SKETCH_NAMES`]);
    /// omitted ones take the oracle's defaults. Errors: an unknown name or key, a value that
    /// does not parse, or the oracle's own parameter errors.
    pub fn by_name(name: &str, epsilon: f64, d: usize) -> Result<AnyOracle> {
        let spec = Spec::parse(name);
        let kind = OracleKind::parse(spec.name)?;
        Ok(match kind {
            OracleKind::Cms => {
                spec.allow(&["k", "m", "seed"])?;
                let (k, m) = (spec.get("k", cms::DEFAULT_K)?, spec.get("m", cms::DEFAULT_M)?);
                AnyOracle::Cms(Cms::with_params(epsilon, d, k, m, spec.get("seed", cms::DEFAULT_SEED)?)?)
            }
            OracleKind::Hcms => {
                spec.allow(&["k", "m", "seed"])?;
                let (k, m) = (spec.get("k", cms::DEFAULT_K)?, spec.get("m", cms::DEFAULT_M)?);
                AnyOracle::Hcms(Hcms::with_params(epsilon, d, k, m, spec.get("seed", hcms::DEFAULT_SEED)?)?)
            }
            OracleKind::Rappor => {
                spec.allow(&["m", "h", "cohorts", "p", "q", "seed"])?;
                let m = spec.get("m", rappor::DEFAULT_M)?;
                let shape = RapporShape {
                    m,
                    h: spec.get("h", rappor::DEFAULT_H)?,
                    cohorts: spec.get("cohorts", default_cohorts(d, m))?,
                    p: spec.get("p", 0.0)?,
                    q: spec.get("q", 1.0)?,
                    seed: spec.get("seed", rappor::DEFAULT_SEED)?,
                };
                AnyOracle::Rappor(Rappor::with_shape(epsilon, d, shape)?)
            }
            _ => {
                spec.allow(&[])?;
                Self::new(kind, epsilon, d)?
            }
        })
    }
    /// Builds the oracle `kind` with budget `epsilon` over [0, d); a sketch takes its default
    /// parameters (as [`by_name`](Self::by_name) with no `:key=value`).
    pub fn new(kind: OracleKind, epsilon: f64, d: usize) -> Result<AnyOracle> {
        Ok(match kind {
            OracleKind::Grr => AnyOracle::Grr(Grr::new(epsilon, d)?),
            OracleKind::Sue => AnyOracle::Sue(Sue::new(epsilon, d)?),
            OracleKind::Oue => AnyOracle::Oue(Oue::new(epsilon, d)?),
            OracleKind::Olh => AnyOracle::Olh(Olh::new(epsilon, d)?),
            OracleKind::Hadamard => AnyOracle::Hadamard(Hadamard::new(epsilon, d)?),
            OracleKind::Hr => AnyOracle::Hr(HadamardResponse::new(epsilon, d)?),
            OracleKind::BassilySmith => AnyOracle::BassilySmith(BassilySmith::new(epsilon, d)?),
            OracleKind::Adaptive => AnyOracle::Adaptive(Adaptive::new(epsilon, d)?),
            OracleKind::Cms => AnyOracle::Cms(Cms::new(epsilon, d)?),
            OracleKind::Hcms => AnyOracle::Hcms(Hcms::new(epsilon, d)?),
            OracleKind::Rappor => AnyOracle::Rappor(Rappor::new(epsilon, d)?),
        })
    }
    /// Which oracle this is.
    pub fn oracle_kind(&self) -> OracleKind {
        match self {
            AnyOracle::Grr(_) => OracleKind::Grr,
            AnyOracle::Sue(_) => OracleKind::Sue,
            AnyOracle::Oue(_) => OracleKind::Oue,
            AnyOracle::Olh(_) => OracleKind::Olh,
            AnyOracle::Hadamard(_) => OracleKind::Hadamard,
            AnyOracle::Hr(_) => OracleKind::Hr,
            AnyOracle::BassilySmith(_) => OracleKind::BassilySmith,
            AnyOracle::Adaptive(_) => OracleKind::Adaptive,
            AnyOracle::Cms(_) => OracleKind::Cms,
            AnyOracle::Hcms(_) => OracleKind::Hcms,
            AnyOracle::Rappor(_) => OracleKind::Rappor,
        }
    }
    /// The wire kind of this oracle's reports.
    pub fn report_kind(&self) -> ReportKind {
        match self {
            AnyOracle::Grr(_) => ReportKind::Grr,
            AnyOracle::Sue(_) | AnyOracle::Oue(_) => ReportKind::Unary,
            AnyOracle::Olh(_) => ReportKind::Olh,
            AnyOracle::Hadamard(_) => ReportKind::Hadamard,
            AnyOracle::Hr(_) => ReportKind::HadamardResponse,
            AnyOracle::BassilySmith(_) => ReportKind::BassilySmith,
            AnyOracle::Adaptive(_) => ReportKind::Adaptive,
            AnyOracle::Cms(_) => ReportKind::Cms,
            AnyOracle::Hcms(_) => ReportKind::Hcms,
            AnyOracle::Rappor(_) => ReportKind::Rappor,
        }
    }
    /// ln(P[r | x]/P[r | x']), computed without forming the probabilities for the sketches
    /// (whose m-bit reports' probabilities underflow at large m); NaN for a report of another
    /// kind. For OLH it is conditional on the report's seed.
    pub fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &AnyReport) -> f64 {
        match (self, r) {
            (AnyOracle::Cms(o), AnyReport::Cms(r)) => o.log_likelihood_ratio(x, x2, r),
            (AnyOracle::Hcms(o), AnyReport::Hcms(r)) => o.log_likelihood_ratio(x, x2, r),
            (AnyOracle::Rappor(o), AnyReport::Rappor(r)) => o.log_likelihood_ratio(x, x2, r),
            _ if r.kind() == self.report_kind() => {
                (self.output_probability(x, r) / self.output_probability(x2, r)).ln()
            }
            _ => f64::NAN,
        }
    }
    /// P[report | x] from the oracle's constants (0 for a report of another kind). For OLH it
    /// is conditional on the report's seed.
    pub fn output_probability(&self, x: usize, r: &AnyReport) -> f64 {
        paired!(self, r, o, r => o.output_probability(x, r), _ => 0.0)
    }
    /// Decodes a binary report of this oracle's kind ([`wire::decode`]; range checks happen in
    /// the aggregator's `validate`).
    pub fn decode_report(&self, bytes: &[u8]) -> Result<AnyReport> {
        decode_kind(self.report_kind(), bytes)
    }
    /// Parses the JSON form of a report of this oracle's kind (the inner report's JSON).
    pub fn report_from_json(&self, text: &str) -> Result<AnyReport> {
        Ok(match self.report_kind() {
            ReportKind::Grr => AnyReport::Grr(wire::from_json(text)?),
            ReportKind::Unary => AnyReport::Unary(wire::from_json(text)?),
            ReportKind::Olh => AnyReport::Olh(wire::from_json(text)?),
            ReportKind::Hadamard => AnyReport::Hadamard(wire::from_json(text)?),
            ReportKind::HadamardResponse => AnyReport::Hr(wire::from_json(text)?),
            ReportKind::BassilySmith => AnyReport::BassilySmith(wire::from_json(text)?),
            ReportKind::Cms => AnyReport::Cms(wire::from_json(text)?),
            ReportKind::Hcms => AnyReport::Hcms(wire::from_json(text)?),
            ReportKind::Rappor => AnyReport::Rappor(wire::from_json(text)?),
            _ => AnyReport::Adaptive(wire::from_json(text)?),
        })
    }
}

fn decode_kind(kind: ReportKind, bytes: &[u8]) -> Result<AnyReport> {
    Ok(match kind {
        ReportKind::Grr => AnyReport::Grr(wire::decode(bytes)?),
        ReportKind::Unary => AnyReport::Unary(wire::decode(bytes)?),
        ReportKind::Olh => AnyReport::Olh(wire::decode(bytes)?),
        ReportKind::Hadamard => AnyReport::Hadamard(wire::decode(bytes)?),
        ReportKind::HadamardResponse => AnyReport::Hr(wire::decode(bytes)?),
        ReportKind::BassilySmith => AnyReport::BassilySmith(wire::decode(bytes)?),
        ReportKind::Adaptive => AnyReport::Adaptive(wire::decode(bytes)?),
        ReportKind::Cms => AnyReport::Cms(wire::decode(bytes)?),
        ReportKind::Hcms => AnyReport::Hcms(wire::decode(bytes)?),
        ReportKind::Rappor => AnyReport::Rappor(wire::decode(bytes)?),
        other => return Err(Error::report("kind", other as u8, FREQUENCY_KINDS_TEXT)),
    })
}

const FREQUENCY_KINDS: [ReportKind; 10] = [
    ReportKind::Grr,
    ReportKind::Unary,
    ReportKind::Olh,
    ReportKind::Hadamard,
    ReportKind::HadamardResponse,
    ReportKind::BassilySmith,
    ReportKind::Adaptive,
    ReportKind::Cms,
    ReportKind::Hcms,
    ReportKind::Rappor,
];

const FREQUENCY_KINDS_TEXT: &str = "a frequency report kind (2 to 8, 13 to 15)";

impl AnyReport {
    /// The wire kind.
    pub fn kind(&self) -> ReportKind {
        match self {
            AnyReport::Grr(_) => ReportKind::Grr,
            AnyReport::Unary(_) => ReportKind::Unary,
            AnyReport::Olh(_) => ReportKind::Olh,
            AnyReport::Hadamard(_) => ReportKind::Hadamard,
            AnyReport::Hr(_) => ReportKind::HadamardResponse,
            AnyReport::BassilySmith(_) => ReportKind::BassilySmith,
            AnyReport::Adaptive(_) => ReportKind::Adaptive,
            AnyReport::Cms(_) => ReportKind::Cms,
            AnyReport::Hcms(_) => ReportKind::Hcms,
            AnyReport::Rappor(_) => ReportKind::Rappor,
        }
    }
    /// The binary encoding, `[version][kind][payload]` of the inner report.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            AnyReport::Grr(r) => wire::encode(r),
            AnyReport::Unary(r) => wire::encode(r),
            AnyReport::Olh(r) => wire::encode(r),
            AnyReport::Hadamard(r) => wire::encode(r),
            AnyReport::Hr(r) => wire::encode(r),
            AnyReport::BassilySmith(r) => wire::encode(r),
            AnyReport::Adaptive(r) => wire::encode(r),
            AnyReport::Cms(r) => wire::encode(r),
            AnyReport::Hcms(r) => wire::encode(r),
            AnyReport::Rappor(r) => wire::encode(r),
        }
    }
    /// Decodes a binary report of any frequency kind (dispatching on the kind byte). Errors:
    /// [`Error::InvalidReport`] for a bad header, version or kind, a garbled or truncated
    /// payload, or trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<AnyReport> {
        match bytes {
            [WIRE_VERSION, k, ..] => match FREQUENCY_KINDS.iter().find(|kind| **kind as u8 == *k) {
                Some(kind) => decode_kind(*kind, bytes),
                None => Err(Error::report("kind", k, FREQUENCY_KINDS_TEXT)),
            },
            // Header and version errors, worded by the wire module.
            _ => wire::decode::<GrrReport>(bytes).map(AnyReport::Grr),
        }
    }
}

/// A mechanism name with optional parameters: `name` or `name:key=value:key=value`.
struct Spec<'a> {
    full: &'a str,
    name: &'a str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Spec<'a> {
    fn parse(full: &'a str) -> Self {
        let mut parts = full.split(':');
        let name = parts.next().unwrap_or("").trim();
        let pairs = parts.map(|kv| kv.split_once('=').map_or((kv.trim(), ""), |(k, v)| (k.trim(), v.trim()))).collect();
        Spec { full, name, pairs }
    }
    /// Errors on a key outside `keys` (or any key when `keys` is empty).
    fn allow(&self, keys: &[&str]) -> Result<()> {
        if let Some((k, _)) = self.pairs.iter().find(|(k, _)| !keys.contains(k)) {
            let expected = if keys.is_empty() {
                format!("no parameters for {} (the sketches {} take some)", self.name, SKETCH_NAMES.join(", "))
            } else {
                format!("{} parameters among {}, as {}:key=value:…, not {k:?}", self.name, keys.join(", "), self.name)
            };
            return Err(Error::param("mechanism", self.full, expected));
        }
        Ok(())
    }
    /// The value of `key` (the last one given), or `default`.
    fn get<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T> {
        match self.pairs.iter().rev().find(|(k, _)| *k == key) {
            None => Ok(default),
            Some((_, v)) => {
                v.parse().map_err(|_| Error::param("mechanism", self.full, format!("a number for {key} (got {v:?})")))
            }
        }
    }
}

impl AnyOracle {
    /// Randomizes v (< d, checked by the caller) into `report`: the same draws as
    /// [`FrequencyOracle::randomize_unchecked`], but a unary report of a unary oracle is
    /// overwritten in place (its word vector reused), so a simulation loop allocates nothing.
    #[inline]
    pub fn randomize_reusing<R: Rng + ?Sized>(&self, v: usize, rng: &mut R, report: &mut AnyReport) {
        match (self, report) {
            (AnyOracle::Sue(o) | AnyOracle::Oue(o), AnyReport::Unary(u)) => o.randomize_reusing(v, rng, u),
            (o, r) => *r = o.randomize_unchecked(v, rng),
        }
    }
}

/// `o.randomize_batch` over `vs` (already validated) in chunks, each report wrapped by `wrap`.
fn wrap_batch<O: FrequencyOracle, R: Rng + ?Sized>(
    o: &O,
    vs: &[usize],
    rng: &mut R,
    out: &mut Vec<AnyReport>,
    wrap: fn(O::Report) -> AnyReport,
) -> Result<()> {
    const CHUNK: usize = 1024;
    let mut buf = Vec::with_capacity(vs.len().min(CHUNK));
    for chunk in vs.chunks(CHUNK) {
        buf.clear();
        o.randomize_batch(chunk, rng, &mut buf)?;
        out.extend(buf.drain(..).map(wrap));
    }
    Ok(())
}

impl FrequencyOracle for AnyOracle {
    type Report = AnyReport;
    type Aggregator = AnyAggregator;

    fn name(&self) -> &'static str {
        each_oracle!(self, o => o.name())
    }
    fn epsilon(&self) -> Epsilon {
        each_oracle!(self, o => o.epsilon())
    }
    fn domain_size(&self) -> usize {
        each_oracle!(self, o => o.domain_size())
    }
    fn randomize_unchecked<R: Rng + ?Sized>(&self, v: usize, rng: &mut R) -> AnyReport {
        match self {
            AnyOracle::Grr(o) => AnyReport::Grr(o.randomize_unchecked(v, rng)),
            AnyOracle::Sue(o) | AnyOracle::Oue(o) => AnyReport::Unary(o.randomize_unchecked(v, rng)),
            AnyOracle::Olh(o) => AnyReport::Olh(o.randomize_unchecked(v, rng)),
            AnyOracle::Hadamard(o) => AnyReport::Hadamard(o.randomize_unchecked(v, rng)),
            AnyOracle::Hr(o) => AnyReport::Hr(o.randomize_unchecked(v, rng)),
            AnyOracle::BassilySmith(o) => AnyReport::BassilySmith(o.randomize_unchecked(v, rng)),
            AnyOracle::Adaptive(o) => AnyReport::Adaptive(o.randomize_unchecked(v, rng)),
            AnyOracle::Cms(o) => AnyReport::Cms(o.randomize_unchecked(v, rng)),
            AnyOracle::Hcms(o) => AnyReport::Hcms(o.randomize_unchecked(v, rng)),
            AnyOracle::Rappor(o) => AnyReport::Rappor(o.randomize_unchecked(v, rng)),
        }
    }
    /// Dispatches once per batch and runs the wrapped oracle's own batch loop (word-parallel
    /// keep decisions, no per-report match), wrapping its reports in chunks.
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<AnyReport>) -> Result<()> {
        super::check_batch(vs, self.domain_size())?;
        out.reserve(vs.len());
        match self {
            AnyOracle::Grr(o) => wrap_batch(o, vs, rng, out, AnyReport::Grr),
            AnyOracle::Sue(o) | AnyOracle::Oue(o) => wrap_batch(o, vs, rng, out, AnyReport::Unary),
            AnyOracle::Olh(o) => wrap_batch(o, vs, rng, out, AnyReport::Olh),
            AnyOracle::Hadamard(o) => wrap_batch(o, vs, rng, out, AnyReport::Hadamard),
            AnyOracle::Hr(o) => wrap_batch(o, vs, rng, out, AnyReport::Hr),
            AnyOracle::BassilySmith(o) => wrap_batch(o, vs, rng, out, AnyReport::BassilySmith),
            AnyOracle::Adaptive(o) => wrap_batch(o, vs, rng, out, AnyReport::Adaptive),
            AnyOracle::Cms(o) => wrap_batch(o, vs, rng, out, AnyReport::Cms),
            AnyOracle::Hcms(o) => wrap_batch(o, vs, rng, out, AnyReport::Hcms),
            AnyOracle::Rappor(o) => wrap_batch(o, vs, rng, out, AnyReport::Rappor),
        }
    }
    fn validate_report(&self, r: &AnyReport) -> Result<()> {
        paired!(self, r, o, r => o.validate_report(r), _ => Err(Error::report(
            "kind",
            format!("a {:?} report", r.kind()),
            format!("a {:?} report", self.report_kind()),
        )))
    }
    fn aggregator(&self) -> AnyAggregator {
        match self {
            AnyOracle::Grr(o) => AnyAggregator::Grr(o.aggregator()),
            AnyOracle::Sue(o) | AnyOracle::Oue(o) => AnyAggregator::Unary(o.aggregator()),
            AnyOracle::Olh(o) => AnyAggregator::Olh(o.aggregator()),
            AnyOracle::Hadamard(o) => AnyAggregator::Hadamard(o.aggregator()),
            AnyOracle::Hr(o) => AnyAggregator::Hr(o.aggregator()),
            AnyOracle::BassilySmith(o) => AnyAggregator::BassilySmith(o.aggregator()),
            AnyOracle::Adaptive(o) => AnyAggregator::Adaptive(o.aggregator()),
            AnyOracle::Cms(o) => AnyAggregator::Cms(o.aggregator()),
            AnyOracle::Hcms(o) => AnyAggregator::Hcms(o.aggregator()),
            AnyOracle::Rappor(o) => AnyAggregator::Rappor(o.aggregator()),
        }
    }
    fn report_variance(&self, x: usize, v: usize) -> f64 {
        each_oracle!(self, o => o.report_variance(x, v))
    }
    fn worst_case_variance(&self) -> f64 {
        each_oracle!(self, o => o.worst_case_variance())
    }
    fn aggregate_variance(&self, freqs: &[f64], v: usize) -> f64 {
        each_oracle!(self, o => o.aggregate_variance(freqs, v))
    }
    fn aggregate_cross_moment(&self, freqs: &[f64], a: usize, b: usize) -> Option<f64> {
        each_oracle!(self, o => o.aggregate_cross_moment(freqs, a, b))
    }
    /// NaN for a report of another oracle's kind.
    fn report_estimate(&self, r: &AnyReport, v: usize) -> f64 {
        paired!(self, r, o, r => o.report_estimate(r, v), _ => f64::NAN)
    }
}

impl AnyAggregator {
    fn kind(&self) -> ReportKind {
        match self {
            AnyAggregator::Grr(_) => ReportKind::Grr,
            AnyAggregator::Unary(_) => ReportKind::Unary,
            AnyAggregator::Olh(_) => ReportKind::Olh,
            AnyAggregator::Hadamard(_) => ReportKind::Hadamard,
            AnyAggregator::Hr(_) => ReportKind::HadamardResponse,
            AnyAggregator::BassilySmith(_) => ReportKind::BassilySmith,
            AnyAggregator::Adaptive(_) => ReportKind::Adaptive,
            AnyAggregator::Cms(_) => ReportKind::Cms,
            AnyAggregator::Hcms(_) => ReportKind::Hcms,
            AnyAggregator::Rappor(_) => ReportKind::Rappor,
        }
    }
}

macro_rules! each_aggregator {
    ($self:expr, $a:ident => $e:expr) => {
        match $self {
            AnyAggregator::Grr($a) => $e,
            AnyAggregator::Unary($a) => $e,
            AnyAggregator::Olh($a) => $e,
            AnyAggregator::Hadamard($a) => $e,
            AnyAggregator::Hr($a) => $e,
            AnyAggregator::BassilySmith($a) => $e,
            AnyAggregator::Adaptive($a) => $e,
            AnyAggregator::Cms($a) => $e,
            AnyAggregator::Hcms($a) => $e,
            AnyAggregator::Rappor($a) => $e,
        }
    };
}

impl Aggregator for AnyAggregator {
    type Report = AnyReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &AnyReport) -> Result<()> {
        paired_agg!(self, r, a, r => a.validate(r), _ => Err(Error::report(
            "kind",
            format!("a {:?} report", r.kind()),
            format!("a {:?} report", self.kind()),
        )))
    }
    fn add_unchecked(&mut self, r: &AnyReport) {
        // A report of another kind cannot pass `validate`; it is ignored here.
        paired_agg!(self, r, a, r => a.add_unchecked(r), _ => ())
    }
    fn add_unchecked_times(&mut self, r: &AnyReport, times: u64) {
        paired_agg!(self, r, a, r => a.add_unchecked_times(r, times), _ => ())
    }
    fn add_batch(&mut self, reports: &[AnyReport]) -> Result<()> {
        for (i, r) in reports.iter().enumerate() {
            self.validate(r).map_err(|e| at_index(e, i))?;
        }
        match self {
            AnyAggregator::Unary(a) => {
                a.add_validated(reports.iter().filter_map(|r| if let AnyReport::Unary(r) = r { Some(r) } else { None }))
            }
            AnyAggregator::Olh(a) => {
                let inner: Vec<OlhReport> =
                    reports.iter().filter_map(|r| if let AnyReport::Olh(r) = r { Some(*r) } else { None }).collect();
                a.add_batch(&inner)?;
            }
            AnyAggregator::Adaptive(a) => a.add_validated(
                reports.iter().filter_map(|r| if let AnyReport::Adaptive(r) = r { Some(r) } else { None }),
            ),
            AnyAggregator::Hcms(a) => {
                let inner: Vec<HcmsReport> =
                    reports.iter().filter_map(|r| if let AnyReport::Hcms(r) = r { Some(*r) } else { None }).collect();
                a.add_batch(&inner)?;
            }
            _ => reports.iter().for_each(|r| self.add_unchecked(r)),
        }
        Ok(())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        match (self, other) {
            (AnyAggregator::Grr(a), AnyAggregator::Grr(b)) => a.merge(b),
            (AnyAggregator::Unary(a), AnyAggregator::Unary(b)) => a.merge(b),
            (AnyAggregator::Olh(a), AnyAggregator::Olh(b)) => a.merge(b),
            (AnyAggregator::Hadamard(a), AnyAggregator::Hadamard(b)) => a.merge(b),
            (AnyAggregator::Hr(a), AnyAggregator::Hr(b)) => a.merge(b),
            (AnyAggregator::BassilySmith(a), AnyAggregator::BassilySmith(b)) => a.merge(b),
            (AnyAggregator::Adaptive(a), AnyAggregator::Adaptive(b)) => a.merge(b),
            (AnyAggregator::Cms(a), AnyAggregator::Cms(b)) => a.merge(b),
            (AnyAggregator::Hcms(a), AnyAggregator::Hcms(b)) => a.merge(b),
            (AnyAggregator::Rappor(a), AnyAggregator::Rappor(b)) => a.merge(b),
            (a, b) => Err(Error::Incompatible(format!("aggregators of {:?} and {:?} reports", a.kind(), b.kind()))),
        }
    }
    fn count(&self) -> u64 {
        each_aggregator!(self, a => a.count())
    }
    fn estimate(&self) -> FrequencyEstimate {
        each_aggregator!(self, a => a.estimate())
    }
}

impl crate::state::SaveState for AnyAggregator {
    fn save_state(&self, w: &mut crate::state::StateWriter<'_>) {
        each_aggregator!(self, a => a.save_state(w))
    }
    fn merge_state(&mut self, r: &mut crate::state::StateReader<'_>) -> Result<()> {
        each_aggregator!(self, a => a.merge_state(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::fast_rng;

    #[test]
    fn by_name_builds_every_oracle_and_rejects_unknown_names() {
        for &name in FREQUENCY_NAMES {
            let o = AnyOracle::by_name(name, 1.0, 10).unwrap();
            assert_eq!(o.name(), name);
            assert_eq!(o.domain_size(), 10);
        }
        let e = AnyOracle::by_name("nope", 1.0, 10).unwrap_err();
        assert!(matches!(e, Error::InvalidParameter { name: "mechanism", .. }));
        assert!(e.to_string().contains("\"nope\"") && e.to_string().contains("rappor"), "{e}");
        assert!(matches!(
            AnyOracle::by_name("grr", f64::NAN, 10),
            Err(Error::InvalidParameter { name: "epsilon", .. })
        ));
    }

    /// The closed-form cross moments against the mean of Y_a·Y_b over simulated reports (the
    /// covariance of two items' estimates, which the present-value ratio needs).
    #[test]
    fn cross_moments_match_simulated_reports() {
        let freqs = [0.5, 0.3, 0.2];
        let mut rng = fast_rng(18);
        for name in ["grr", "oue", "sue", "hadamard", "adaptive"] {
            let o = AnyOracle::by_name(name, 1.0, 3).unwrap();
            let n = 60_000;
            let (mut sum, mut sum_sq) = (0.0, 0.0);
            for i in 0..n {
                let x = if i % 10 < 5 {
                    0
                } else if i % 10 < 8 {
                    1
                } else {
                    2
                };
                let r = o.randomize(x, &mut rng).unwrap();
                let y = o.report_estimate(&r, 1) * o.report_estimate(&r, 2);
                (sum, sum_sq) = (sum + y, sum_sq + y * y);
            }
            let mean = sum / n as f64;
            let se = ((sum_sq / n as f64 - mean * mean) / n as f64).sqrt();
            let want = o.aggregate_cross_moment(&freqs, 1, 2).unwrap();
            assert!((mean - want).abs() < 5.0 * se, "{name}: simulated {mean} ± {se}, closed form {want}");
        }
        for name in ["bassily-smith", "olh"] {
            assert_eq!(AnyOracle::by_name(name, 1.0, 3).unwrap().aggregate_cross_moment(&freqs, 1, 2), None);
        }
    }

    #[test]
    fn reports_roundtrip_and_wrong_kinds_are_rejected() {
        let mut rng = fast_rng(701);
        for &name in FREQUENCY_NAMES {
            let o = AnyOracle::by_name(name, 1.0, 10).unwrap();
            let r = o.randomize(3, &mut rng).unwrap();
            assert_eq!(r.kind(), o.report_kind());
            let bytes = r.encode();
            assert_eq!(AnyReport::decode(&bytes).unwrap(), r, "{name}");
            assert_eq!(o.decode_report(&bytes).unwrap(), r, "{name}");
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<AnyReport>(&json).unwrap(), r);
            let inner_json = match &r {
                AnyReport::Grr(x) => wire::to_json(x),
                AnyReport::Unary(x) => wire::to_json(x),
                AnyReport::Olh(x) => wire::to_json(x),
                AnyReport::Hadamard(x) => wire::to_json(x),
                AnyReport::Hr(x) => wire::to_json(x),
                AnyReport::BassilySmith(x) => wire::to_json(x),
                AnyReport::Adaptive(x) => wire::to_json(x),
                AnyReport::Cms(x) => wire::to_json(x),
                AnyReport::Hcms(x) => wire::to_json(x),
                AnyReport::Rappor(x) => wire::to_json(x),
            };
            assert_eq!(o.report_from_json(&inner_json).unwrap(), r);
            let mut a = o.aggregator();
            a.add(&r).unwrap();
            let other =
                if name == "grr" { AnyReport::Hr(HrReport { y: 0 }) } else { AnyReport::Grr(GrrReport { y: 0 }) };
            let e = a.add(&other).unwrap_err();
            assert!(matches!(e, Error::InvalidReport { .. }) && e.to_string().contains("kind"), "{name}: {e}");
            assert_eq!(a.count(), 1);
            assert!(o.report_estimate(&other, 0).is_nan());
        }
        let e = AnyReport::decode(&[1, 1, 0]).unwrap_err().to_string();
        assert!(e.contains("kind is 1"), "{e}");
        assert!(AnyReport::decode(&[2, 2, 0]).unwrap_err().to_string().contains("version is 2"));
        assert!(AnyReport::decode(&[1]).unwrap_err().to_string().contains("header"));
        let oue = AnyOracle::by_name("oue", 1.0, 10).unwrap();
        assert!(oue.decode_report(&AnyReport::Grr(GrrReport { y: 1 }).encode()).is_err());
    }

    #[test]
    fn different_oracles_do_not_merge() {
        let sue = AnyOracle::by_name("sue", 1.0, 10).unwrap();
        let oue = AnyOracle::by_name("oue", 1.0, 10).unwrap();
        let grr = AnyOracle::by_name("grr", 1.0, 10).unwrap();
        assert!(matches!(sue.aggregator().merge(&oue.aggregator()), Err(Error::Incompatible(_))));
        assert!(matches!(sue.aggregator().merge(&grr.aggregator()), Err(Error::Incompatible(_))));
    }
}
