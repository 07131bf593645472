//! Every frequency oracle behind one type, chosen by name at run time (the CLI, configs).
//!
//! The registry is the list in [`registered!`]: one line per report type, naming the oracle
//! type that produces it, its aggregator and the names it answers to. From that list this module
//! generates [`AnyOracle`], [`AnyReport`], [`AnyAggregator`], [`OracleKind`] and the [`ORACLES`]
//! table; what differs between oracles lives in their own modules ([`Registered`]). Adding an
//! oracle is its module plus its line here.
//!
//! [`AnyOracle`] implements [`FrequencyOracle`] with [`AnyReport`] and [`AnyAggregator`], so
//! generic code drives any oracle; a report of the wrong variant is an
//! [`Error::InvalidReport`], merging aggregators of different oracles an [`Error::Incompatible`].

use super::registry::{Params, Registered};
use super::{
    Auto, AutoAggregator, AutoReport, BassilySmith, BassilySmithAggregator, BassilySmithReport, Cms, CmsAggregator,
    CmsReport, FrequencyOracle, Grr, GrrAggregator, GrrReport, Hadamard, HadamardAggregator, HadamardReport,
    HadamardResponse, Hcms, HcmsAggregator, HcmsReport, HrAggregator, HrReport, Olh, OlhAggregator, OlhReport, Rappor,
    RapporAggregator, RapporReport, SsAggregator, SsReport, SubsetSelection, UnaryAggregator, UnaryEncoding,
    UnaryReport,
};
use crate::aggregate::{Aggregator, at_index};
use crate::error::{Error, Result};
use crate::estimate::FrequencyEstimate;
use crate::params::Epsilon;
use crate::wire::{self, WIRE_VERSION, WireKind, WireReport};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The registry: every frequency oracle, passed to the generator `$gen` (after `$args`).
///
/// One entry per report type: `Variant(oracle type, report type, aggregator type)` and, in
/// braces, the names built by that oracle type (each an [`OracleKind`] and an [`AnyOracle`]
/// variant). The order is stable and append-only: it is the order of [`FREQUENCY_NAMES`], and
/// [`AnyReport`]'s variant index is part of the record and adaptive reports' encodings.
macro_rules! registered {
    ($gen:ident! $($args:tt)*) => {
        $gen! { ($($args)*)
            /// GRR.
            Grr(Grr, GrrReport, GrrAggregator) {
                /// Generalized randomized response.
                Grr = "grr",
            }
            /// SUE or OUE.
            Unary(UnaryEncoding, UnaryReport, UnaryAggregator) {
                /// Symmetric unary encoding (basic RAPPOR).
                Sue = "sue",
                /// Optimized unary encoding.
                Oue = "oue",
            }
            /// OLH.
            Olh(Olh, OlhReport, OlhAggregator) {
                /// Optimized local hashing.
                Olh = "olh",
            }
            /// 1-bit Hadamard.
            Hadamard(Hadamard, HadamardReport, HadamardAggregator) {
                /// 1-bit Hadamard.
                Hadamard = "hadamard",
            }
            /// Hadamard Response.
            Hr(HadamardResponse, HrReport, HrAggregator) {
                /// Hadamard Response.
                Hr = "hr",
            }
            /// Bassily–Smith.
            BassilySmith(BassilySmith, BassilySmithReport, BassilySmithAggregator) {
                /// Bassily–Smith (random projection; biased for a fixed matrix, a baseline).
                BassilySmith = "bassily-smith",
            }
            /// Adaptive.
            Adaptive(Auto, AutoReport, AutoAggregator) {
                /// The registered oracle with the smallest variance at (ε, d).
                Adaptive = "adaptive",
            }
            /// Count Mean Sketch.
            Cms(Cms, CmsReport, CmsAggregator) {
                /// Apple's Count Mean Sketch (parameters `cms:k=…:m=…:seed=…`).
                Cms = "cms",
            }
            /// Hadamard Count Mean Sketch.
            Hcms(Hcms, HcmsReport, HcmsAggregator) {
                /// Apple's Hadamard Count Mean Sketch.
                Hcms = "hcms",
            }
            /// RAPPOR.
            Rappor(Rappor, RapporReport, RapporAggregator) {
                /// RAPPOR (Bloom filter, cohorts, permanent and instantaneous randomized response).
                Rappor = "rappor",
            }
            /// Subset Selection.
            Ss(SubsetSelection, SsReport, SsAggregator) {
                /// Subset Selection: a k-subset of [0, d) (parameter `ss:k=…`).
                Ss = "ss",
            }
        }
    };
}

/// The names of the sketch oracles, which also take arbitrary u64 items: `cms:k=256:m=1024:seed=7`,
/// `hcms:k=…:m=…:seed=…`, `rappor:m=128:h=2:cohorts=8:p=0:q=1:seed=…`.
pub const SKETCH_NAMES: &[&str] = &["cms", "hcms", "rappor"];

/// What the registry knows about one oracle name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OracleInfo {
    /// Its kind (and name: `kind.name()`).
    pub kind: OracleKind,
    /// The parameters its name may carry.
    pub params: &'static [&'static str],
    /// The wire kind of its reports.
    pub report: WireKind,
    /// Whether `adaptive` considers it.
    pub adaptive: bool,
}

// The generators: each takes the registry's entries after its own arguments in parentheses.

/// The types, their names and the per-report-type glue.
macro_rules! define_types {
    (() $( $(#[$rdoc:meta])* $rv:ident($oty:ty, $rty:ty, $aty:ty) {
        $( $(#[$odoc:meta])* $ov:ident = $name:literal ),+ $(,)? } )+) => {
        crate::kinds::named_kinds! {
            /// A frequency oracle over [0, d) ([`crate::frequency`]), one per registered name.
            OracleKind, "the frequency oracles" { $($( $(#[$odoc])* $ov = $name, )+)+ }
        }

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
        pub enum AnyOracle { $($( $(#[$odoc])* $ov($oty), )+)+ }

        /// A report of any frequency oracle (SUE and OUE share [`UnaryReport`]).
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum AnyReport { $( $(#[$rdoc])* $rv($rty), )+ }

        /// The aggregator of any frequency oracle.
        #[derive(Debug, Clone)]
        pub enum AnyAggregator { $( $(#[$rdoc])* $rv($aty), )+ }

        /// Every registered oracle, in the order of [`FREQUENCY_NAMES`].
        pub const ORACLES: &[OracleInfo] = &[$($(
            OracleInfo {
                kind: OracleKind::$ov,
                params: <$oty as Registered>::PARAMS,
                report: <$rty as WireReport>::KIND,
                adaptive: <$oty as Registered>::ADAPTIVE,
            },
        )+)+];

        /// The wire kinds of the frequency reports, one per report type.
        pub const REPORT_KINDS: &[WireKind] = &[$( <$rty as WireReport>::KIND, )+];

        $(
            impl From<$rty> for AnyReport {
                fn from(r: $rty) -> Self {
                    AnyReport::$rv(r)
                }
            }
            impl From<$aty> for AnyAggregator {
                fn from(a: $aty) -> Self {
                    AnyAggregator::$rv(a)
                }
            }
        )+

        impl AnyOracle {
            fn build(kind: OracleKind, epsilon: f64, d: usize, params: &Params<'_>) -> Result<AnyOracle> {
                Ok(match kind {
                    $($( OracleKind::$ov => {
                        params.allow(<$oty as Registered>::PARAMS, &parameterised_names())?;
                        AnyOracle::$ov(<$oty as Registered>::build(kind, epsilon, d, params)?)
                    } )+)+
                })
            }
            /// Which oracle this is.
            pub fn oracle_kind(&self) -> OracleKind {
                match self { $($( AnyOracle::$ov(_) => OracleKind::$ov, )+)+ }
            }
        }

        impl AnyReport {
            /// The wire kind.
            pub fn kind(&self) -> WireKind {
                match self { $( AnyReport::$rv(_) => <$rty as WireReport>::KIND, )+ }
            }
            /// The binary encoding, `[version][kind][payload]` of the inner report.
            pub fn encode(&self) -> Vec<u8> {
                match self { $( AnyReport::$rv(r) => wire::encode(r), )+ }
            }
        }

        /// Decodes a binary report of kind byte `kind`, or parses its JSON form.
        fn decode_kind(kind: u8, bytes: &[u8], json: bool) -> Result<AnyReport> {
            $( if kind == <$rty as WireReport>::KIND.byte {
                let text = || std::str::from_utf8(bytes).map_err(|e| Error::report("json", e, "UTF-8 text"));
                return Ok(AnyReport::$rv(if json { wire::from_json(text()?)? } else { wire::decode(bytes)? }));
            } )+
            Err(Error::report("kind", kind, frequency_kinds_text()))
        }

        impl AnyAggregator {
            fn kind(&self) -> WireKind {
                match self { $( AnyAggregator::$rv(_) => <$rty as WireReport>::KIND, )+ }
            }
            /// Adds validated reports through each oracle's batch path.
            pub(crate) fn add_validated<'a>(&mut self, reports: impl Iterator<Item = &'a AnyReport>) -> Result<()> {
                match self { $( AnyAggregator::$rv(a) => <$oty as Registered>::add_validated(
                    a,
                    reports.filter_map(|r| if let AnyReport::$rv(r) = r { Some(r) } else { None }),
                ), )+ }
            }
            /// Adds another aggregator of the same oracle.
            fn merge_any(&mut self, other: &Self) -> Result<()> {
                match (self, other) {
                    $( (AnyAggregator::$rv(a), AnyAggregator::$rv(b)) => a.merge(b), )+
                    (a, b) => Err(Error::Incompatible(format!(
                        "aggregators of {} and {} reports",
                        a.kind().name,
                        b.kind().name
                    ))),
                }
            }
        }
    };
}

/// `match $self` over [`AnyOracle`], the wrapped oracle bound to `$o`.
macro_rules! each_oracle_gen {
    (($self:expr, $o:ident => $e:expr) $( $(#[$rdoc:meta])* $rv:ident($oty:ty, $rty:ty, $aty:ty) {
        $( $(#[$odoc:meta])* $ov:ident = $name:literal ),+ $(,)? } )+) => {
        match $self { $( $(AnyOracle::$ov($o))|+ => $e, )+ }
    };
}

/// Matches an oracle with a report of its own kind (`$o`, `$x`); `$other` otherwise.
macro_rules! paired_gen {
    (($self:expr, $r:expr, $o:ident, $x:ident => $e:expr, _ => $other:expr)
        $( $(#[$rdoc:meta])* $rv:ident($oty:ty, $rty:ty, $aty:ty) {
        $( $(#[$odoc:meta])* $ov:ident = $name:literal ),+ $(,)? } )+) => {
        match ($self, $r) { $( ($(AnyOracle::$ov($o))|+, AnyReport::$rv($x)) => $e, )+ _ => $other }
    };
}

/// Matches an aggregator with a report of its own kind (`$a`, `$x`); `$other` otherwise.
macro_rules! paired_agg_gen {
    (($self:expr, $r:expr, $a:ident, $x:ident => $e:expr, _ => $other:expr)
        $( $(#[$rdoc:meta])* $rv:ident($oty:ty, $rty:ty, $aty:ty) {
        $( $(#[$odoc:meta])* $ov:ident = $name:literal ),+ $(,)? } )+) => {
        match ($self, $r) { $( (AnyAggregator::$rv($a), AnyReport::$rv($x)) => $e, )+ _ => $other }
    };
}

/// `match $self` over [`AnyAggregator`], the wrapped aggregator bound to `$a`.
macro_rules! each_aggregator_gen {
    (($self:expr, $a:ident => $e:expr) $( $(#[$rdoc:meta])* $rv:ident($oty:ty, $rty:ty, $aty:ty) {
        $( $(#[$odoc:meta])* $ov:ident = $name:literal ),+ $(,)? } )+) => {
        match $self { $( AnyAggregator::$rv($a) => $e, )+ }
    };
}

macro_rules! each_oracle {
    ($($t:tt)*) => { registered!(each_oracle_gen! $($t)*) };
}
macro_rules! paired {
    ($($t:tt)*) => { registered!(paired_gen! $($t)*) };
}
macro_rules! paired_agg {
    ($($t:tt)*) => { registered!(paired_agg_gen! $($t)*) };
}
macro_rules! each_aggregator {
    ($($t:tt)*) => { registered!(each_aggregator_gen! $($t)*) };
}

registered!(define_types!);

/// The names accepted by [`AnyOracle::by_name`], in a stable order.
pub const FREQUENCY_NAMES: &[&str] = OracleKind::NAMES;

/// The names that take parameters, for error messages.
fn parameterised_names() -> String {
    let names: Vec<&str> = ORACLES.iter().filter(|o| !o.params.is_empty()).map(|o| o.kind.name()).collect();
    format!("the oracles {}", names.join(", "))
}

fn frequency_kinds_text() -> String {
    let bytes: Vec<String> = REPORT_KINDS.iter().map(|k| k.byte.to_string()).collect();
    format!("a frequency report kind ({})", bytes.join(", "))
}

impl AnyOracle {
    /// Builds the oracle called `name` (one of [`FREQUENCY_NAMES`]) with budget `epsilon` over
    /// [0, d). A name may carry parameters, `name:key=value:…` ([`OracleInfo::params`]);
    /// omitted ones take the oracle's defaults. Errors: an unknown name or key, a value that
    /// does not parse, or the oracle's own parameter errors.
    pub fn by_name(name: &str, epsilon: f64, d: usize) -> Result<AnyOracle> {
        let params = Params::parse(name);
        Self::build(OracleKind::parse(params.name())?, epsilon, d, &params)
    }
    /// Builds the oracle `kind` with budget `epsilon` over [0, d) with its default parameters
    /// (as [`by_name`](Self::by_name) with no `:key=value`).
    pub fn new(kind: OracleKind, epsilon: f64, d: usize) -> Result<AnyOracle> {
        Self::build(kind, epsilon, d, &Params::parse(kind.name()))
    }
    /// The registry's entry for this oracle.
    pub fn info(&self) -> &'static OracleInfo {
        let kind = self.oracle_kind();
        ORACLES.iter().find(|o| o.kind == kind).expect("every kind is registered")
    }
    /// The wire kind of this oracle's reports.
    pub fn report_kind(&self) -> WireKind {
        self.info().report
    }
    /// ln(P[r | x]/P[r | x']), computed without forming the probabilities for the sketches
    /// (whose m-bit reports' probabilities underflow at large m); NaN for a report of another
    /// kind. For OLH it is conditional on the report's seed.
    pub fn log_likelihood_ratio(&self, x: usize, x2: usize, r: &AnyReport) -> f64 {
        paired!(self, r, o, r => o.log_likelihood_ratio(x, x2, r), _ => f64::NAN)
    }
    /// P[report | x] from the oracle's constants (0 for a report of another kind). For OLH it
    /// is conditional on the report's seed.
    pub fn output_probability(&self, x: usize, r: &AnyReport) -> f64 {
        paired!(self, r, o, r => Registered::output_probability(o, x, r), _ => 0.0)
    }
    /// Decodes a binary report of this oracle's kind ([`wire::decode`]; range checks happen in
    /// the aggregator's `validate`).
    pub fn decode_report(&self, bytes: &[u8]) -> Result<AnyReport> {
        decode_kind(self.report_kind().byte, bytes, false)
    }
    /// Parses the JSON form of a report of this oracle's kind (the inner report's JSON).
    pub fn report_from_json(&self, text: &str) -> Result<AnyReport> {
        decode_kind(self.report_kind().byte, text.as_bytes(), true)
    }
    /// Randomizes v (< d, checked by the caller) into `report`: the same draws as
    /// [`FrequencyOracle::randomize_unchecked`], but a report of this oracle's kind is
    /// overwritten in place (a unary report's word vector reused), so a simulation loop
    /// allocates nothing.
    #[inline]
    pub fn randomize_reusing<R: Rng + ?Sized>(&self, v: usize, rng: &mut R, report: &mut AnyReport) {
        let reused = paired!(self, &mut *report, o, r => { o.randomize_into(v, rng, r); true }, _ => false);
        if !reused {
            *report = self.randomize_unchecked(v, rng);
        }
    }
}

impl AnyReport {
    /// Decodes a binary report of any frequency kind (dispatching on the kind byte). Errors:
    /// [`Error::InvalidReport`] for a bad header, version or kind, a garbled or truncated
    /// payload, or trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<AnyReport> {
        match bytes {
            [WIRE_VERSION, k, ..] => decode_kind(*k, bytes, false),
            // Header and version errors, worded by the wire module.
            _ => wire::decode::<GrrReport>(bytes).map(AnyReport::Grr),
        }
    }
}

/// `o.randomize_batch` over `vs` (already validated) in chunks, each report wrapped.
fn wrap_batch<O: FrequencyOracle, R: Rng + ?Sized>(
    o: &O,
    vs: &[usize],
    rng: &mut R,
    out: &mut Vec<AnyReport>,
) -> Result<()>
where
    AnyReport: From<O::Report>,
{
    const CHUNK: usize = 1024;
    let mut buf = Vec::with_capacity(vs.len().min(CHUNK));
    for chunk in vs.chunks(CHUNK) {
        buf.clear();
        o.randomize_batch(chunk, rng, &mut buf)?;
        out.extend(buf.drain(..).map(AnyReport::from));
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
        each_oracle!(self, o => AnyReport::from(o.randomize_unchecked(v, rng)))
    }
    /// Dispatches once per batch and runs the wrapped oracle's own batch loop (word-parallel
    /// keep decisions, no per-report match), wrapping its reports in chunks.
    fn randomize_batch<R: Rng + ?Sized>(&self, vs: &[usize], rng: &mut R, out: &mut Vec<AnyReport>) -> Result<()> {
        super::check_batch(vs, self.domain_size())?;
        out.reserve(vs.len());
        each_oracle!(self, o => wrap_batch(o, vs, rng, out))
    }
    fn validate_report(&self, r: &AnyReport) -> Result<()> {
        paired!(self, r, o, r => o.validate_report(r), _ => Err(Error::report(
            "kind",
            format!("a {} report", r.kind().name),
            format!("a {} report", self.report_kind().name),
        )))
    }
    fn aggregator(&self) -> AnyAggregator {
        each_oracle!(self, o => AnyAggregator::from(o.aggregator()))
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

impl Aggregator for AnyAggregator {
    type Report = AnyReport;
    type Output = FrequencyEstimate;

    fn validate(&self, r: &AnyReport) -> Result<()> {
        paired_agg!(self, r, a, r => a.validate(r), _ => Err(Error::report(
            "kind",
            format!("a {} report", r.kind().name),
            format!("a {} report", self.kind().name),
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
        self.add_validated(reports.iter())
    }
    fn merge(&mut self, other: &Self) -> Result<()> {
        self.merge_any(other)
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
        for name in ["grr", "oue", "sue", "hadamard", "adaptive", "ss", "ss:k=2"] {
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
                AnyReport::Ss(x) => wire::to_json(x),
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
