//! Frequency oracles by name on numpy arrays.
//!
//! Report layouts (one row per report, C order; all zero-copy from the Rust vectors):
//!
//! | oracles | layout | dtype, shape | row |
//! |---|---|---|---|
//! | grr, hr, adaptive (GRR branch) | `index` | uint32 (n,) | the reported category / output |
//! | sue, oue, adaptive (OUE branch) | `bits` | uint64 (n, ⌈d/64⌉) | bit v = word v/64, bit v%64 |
//! | olh | `seed_hash` | uint64 (n, 2) | (hash seed, hash value y < g) |
//! | hadamard, bassily-smith | `row_bit` | uint32 (n, 2) | (row j, bit: 1 = +1) |
//!
//! Randomization and aggregation run the concrete oracle's own batch API (the one `harmony
//! bench` measures), not the run-time dispatch of `AnyOracle`.

use crate::errors::{OrPy, input_error, param_error, report_error};
use crate::rng::with_rng;
use harmony_core::aggregate::{Aggregator, at_index};
use harmony_core::estimate::{FrequencyEstimate, Z95};
use harmony_core::frequency::{
    AnyOracle, BassilySmithReport, FrequencyOracle, GrrReport, HadamardReport, ORACLES, OlhReport, SsReport,
    UnaryEncoding,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;
use rand::Rng;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};

/// How one oracle's reports are laid out (see the module table).
/// The sketch oracles (cms, hcms, rappor) have no array layout here yet: `NativeOracle::new`
/// refuses them, so no other function meets one.
const SKETCHES_REFUSED: &str = "sketch oracles are refused by NativeOracle::new";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Index,
    Bits(usize),
    SeedHash,
    RowBit,
}

impl Layout {
    fn of(o: &AnyOracle) -> Layout {
        match base(o) {
            AnyOracle::Grr(_) | AnyOracle::Hr(_) => Layout::Index,
            AnyOracle::Sue(u) | AnyOracle::Oue(u) => Layout::Bits(u.words()),
            AnyOracle::Ss(s) => Layout::Bits(s.domain_size().div_ceil(64)),
            AnyOracle::Olh(_) => Layout::SeedHash,
            AnyOracle::Hadamard(_) | AnyOracle::BassilySmith(_) => Layout::RowBit,
            other => unreachable!("{}: {SKETCHES_REFUSED}", other.name()),
        }
    }
    /// (name, numpy dtype, columns; 0 = a 1-D array).
    fn describe(self) -> (&'static str, &'static str, usize) {
        match self {
            Layout::Index => ("index", "uint32", 0),
            Layout::Bits(w) => ("bits", "uint64", w),
            Layout::SeedHash => ("seed_hash", "uint64", 2),
            Layout::RowBit => ("row_bit", "uint32", 2),
        }
    }
}

/// Reports as flat vectors, row-major.
enum Reports {
    U32(Vec<u32>, usize),
    /// Rows of u64 words (bit vectors; OLH's (seed, y) pairs), handed to numpy in a [`Words`]
    /// that gives its buffer back to `Spare`.
    Bits(Vec<u64>, usize, Spare),
}

/// One spare buffer of an oracle's bit-vector reports (the largest report arrays: n·⌈d/64⌉
/// words). When a report array dies its buffer is kept here for the next `randomize`, so a
/// loop of calls writes into memory the process has already mapped instead of faulting in
/// (and zeroing) fresh pages each time (128 MB per 10⁶ OUE reports at d = 1024: about a fifth
/// of the randomize time). At most one buffer is kept, until the oracle and its arrays are gone.
type Spare = Arc<Mutex<Option<Vec<u64>>>>;

/// The owner of a bit-vector report array's buffer (the numpy array's base object).
#[pyclass(frozen, module = "harmony_ldp._native")]
struct Words {
    words: Vec<u64>,
    spare: Spare,
}

impl Drop for Words {
    fn drop(&mut self) {
        if let Ok(mut spare) = self.spare.lock() {
            *spare = Some(std::mem::take(&mut self.words));
        }
    }
}

/// An empty buffer for `need` words: the spare one when it fits (not more than twice the size,
/// so a small array never pins a large buffer), else a new one.
fn take_spare(spare: &Spare, need: usize) -> Vec<u64> {
    let reused = spare
        .lock()
        .ok()
        .and_then(|mut s| s.take())
        .filter(|b| b.capacity() >= need && b.capacity() <= 2 * need.max(1024));
    match reused {
        Some(mut b) => {
            b.clear();
            b
        }
        None => Vec::with_capacity(need),
    }
}

impl Reports {
    /// The numpy array (no copy: the vector becomes the array's buffer), 2-D when `cols > 0`.
    fn into_array(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        fn shaped<'py, T: numpy::Element>(py: Python<'py>, v: Vec<T>, cols: usize) -> PyResult<Bound<'py, PyAny>> {
            let rows = v.len().checked_div(cols).unwrap_or(0);
            let a = PyArray1::from_vec(py, v);
            Ok(if cols == 0 { a.into_any() } else { a.reshape([rows, cols])?.into_any() })
        }
        match self {
            Reports::U32(v, cols) => shaped(py, v, cols),
            Reports::Bits(words, cols, spare) => {
                let rows = words.len().checked_div(cols).unwrap_or(0);
                let owner = Bound::new(py, Words { words, spare })?;
                let view = numpy::ndarray::ArrayView2::from_shape((rows, cols), &owner.get().words[..])
                    .map_err(|e| report_error("reports", e, "a (rows, words) buffer"))?;
                // SAFETY: `owner` becomes the array's base object, so it lives as long as the
                // array (and any view of it); its vector is never reallocated, moved out of or
                // accessed from Rust while it lives (`Words` is frozen and private: no `&mut`
                // access; only its `Drop` takes the vector, when no array refers to it any more).
                // numpy reads and writes the buffer through the array's data pointer only.
                Ok(unsafe { numpy::PyArray2::borrow_from_array(&view, owner.clone().into_any()) }.into_any())
            }
        }
    }
}

/// `vs` as category indices without a copy on 64-bit targets (a negative value becomes a huge
/// index, which the oracle's range check rejects).
fn as_indices(vs: &[i64]) -> Cow<'_, [usize]> {
    match numpy_cast(vs) {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(vs.iter().map(|&v| usize::try_from(v).unwrap_or(usize::MAX)).collect()),
    }
}

#[cfg(target_pointer_width = "64")]
fn numpy_cast(vs: &[i64]) -> Option<&[usize]> {
    bytemuck::try_cast_slice(vs).ok()
}

#[cfg(not(target_pointer_width = "64"))]
fn numpy_cast(_: &[i64]) -> Option<&[usize]> {
    None
}

/// Randomizes `vs` (already checked to be in [0, d)) with the concrete oracle's batch API.
fn randomize_reports<R: Rng + ?Sized>(
    o: &AnyOracle,
    vs: &[usize],
    rng: &mut R,
    spare: &Spare,
) -> harmony_core::Result<Reports> {
    fn batch<O: FrequencyOracle, R: Rng + ?Sized>(
        o: &O,
        vs: &[usize],
        rng: &mut R,
    ) -> harmony_core::Result<Vec<O::Report>> {
        let mut out = Vec::with_capacity(vs.len());
        o.randomize_batch(vs, rng, &mut out)?;
        Ok(out)
    }
    fn packed<R: Rng + ?Sized>(
        u: &UnaryEncoding,
        vs: &[usize],
        rng: &mut R,
        spare: &Spare,
    ) -> harmony_core::Result<Reports> {
        let mut out = take_spare(spare, vs.len() * u.words());
        u.randomize_packed(vs, rng, &mut out)?;
        Ok(Reports::Bits(out, u.words(), spare.clone()))
    }
    // The maps below keep each vector's allocation (same element size and alignment).
    Ok(match base(o) {
        AnyOracle::Grr(g) => Reports::U32(batch(g, vs, rng)?.into_iter().map(|r| r.y).collect(), 0),
        AnyOracle::Hr(h) => Reports::U32(batch(h, vs, rng)?.into_iter().map(|r| r.y).collect(), 0),
        AnyOracle::Sue(u) | AnyOracle::Oue(u) => packed(u, vs, rng, spare)?,
        AnyOracle::Ss(s) => {
            let words = s.domain_size().div_ceil(64);
            let mut out = take_spare(spare, vs.len() * words);
            out.extend(batch(s, vs, rng)?.into_iter().flat_map(|r| r.bits));
            Reports::Bits(out, words, spare.clone())
        }
        AnyOracle::Olh(o) => {
            // (seed, y) rows written into the last report array's recycled buffer, as for bit
            // vectors (a fresh 16 MB per 10^6 reports cost more than the hashing), through a
            // small scratch in steps of whole kernel chunks (64 reports): the draws are exactly
            // those of one `randomize_batch` call over `vs`.
            const STEP: usize = 16 * 1024;
            let mut out = take_spare(spare, 2 * vs.len());
            let mut scratch = Vec::with_capacity(STEP.min(vs.len()));
            for part in vs.chunks(STEP) {
                scratch.clear();
                o.randomize_batch(part, rng, &mut scratch)?;
                out.extend(scratch.iter().flat_map(|r| [r.seed, r.y as u64]));
            }
            Reports::Bits(out, 2, spare.clone())
        }
        AnyOracle::Hadamard(h) => {
            let rows: Vec<[u32; 2]> = batch(h, vs, rng)?.into_iter().map(|r| [r.j, r.bit as u32]).collect();
            Reports::U32(rows.into_flattened(), 2)
        }
        AnyOracle::BassilySmith(b) => {
            let rows: Vec<[u32; 2]> = batch(b, vs, rng)?.into_iter().map(|r| [r.j, r.bit as u32]).collect();
            Reports::U32(rows.into_flattened(), 2)
        }
        other => unreachable!("{}: {SKETCHES_REFUSED}", other.name()),
    })
}

/// Adds reports built one by one from array rows: all are validated (the error names the first
/// bad one's index), then the aggregator's estimate.
fn fold<A, F>(mut agg: A, n: usize, report: F) -> harmony_core::Result<FrequencyEstimate>
where
    A: Aggregator<Output = FrequencyEstimate>,
    F: Fn(usize) -> harmony_core::Result<A::Report>,
{
    for i in 0..n {
        let r = report(i).map_err(|e| at_index(e, i))?;
        agg.validate(&r).map_err(|e| at_index(e, i))?;
        agg.add_unchecked(&r);
    }
    Ok(agg.estimate())
}

/// A row-bit report's bit (0 or 1).
fn bit(b: u32) -> harmony_core::Result<bool> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(harmony_core::Error::report("bit", other, "0 or 1")),
    }
}

/// The oracle whose reports fill the arrays: the `adaptive` oracle's choice, or `o` itself.
fn base(o: &AnyOracle) -> &AnyOracle {
    match o {
        AnyOracle::Adaptive(a) => a.inner(),
        o => o,
    }
}

/// Aggregates flat report rows of `o`'s layout.
fn estimate_rows(o: &AnyOracle, rows: ReportRows<'_>) -> harmony_core::Result<FrequencyEstimate> {
    match (base(o), rows) {
        (AnyOracle::Grr(g), ReportRows::U32(ys)) => fold(g.aggregator(), ys.len(), |i| Ok(GrrReport { y: ys[i] })),
        (AnyOracle::Hr(h), ReportRows::U32(ys)) => {
            // One branch-free pass over the outputs as numpy holds them (3× the fold's speed at
            // 10^6 reports); a bad report is named by its index as the fold names it.
            let mut agg = h.aggregator();
            agg.add_outputs(ys)?;
            Ok(agg.estimate())
        }
        (AnyOracle::Ss(s), ReportRows::U64(words)) => {
            let w = s.domain_size().div_ceil(64);
            fold(s.aggregator(), words.len() / w, |i| Ok(SsReport { bits: words[i * w..(i + 1) * w].to_vec() }))
        }
        (AnyOracle::Sue(u) | AnyOracle::Oue(u), ReportRows::U64(words)) => {
            let mut agg = u.aggregator();
            agg.add_packed(words)?;
            Ok(agg.estimate())
        }
        (AnyOracle::Olh(o), ReportRows::U64(flat)) => {
            let mut reports = Vec::with_capacity(flat.len() / 2);
            for (i, row) in flat.chunks_exact(2).enumerate() {
                let y = u32::try_from(row[1]).map_err(|_| {
                    at_index(harmony_core::Error::report("y", row[1], format!("a hash value below {}", o.g())), i)
                })?;
                reports.push(OlhReport { seed: row[0], y });
            }
            let mut agg = o.aggregator();
            agg.add_batch(&reports)?;
            Ok(agg.estimate())
        }
        (AnyOracle::Hadamard(h), ReportRows::U32(flat)) => {
            fold(h.aggregator(), flat.len() / 2, |i| Ok(HadamardReport { j: flat[2 * i], bit: bit(flat[2 * i + 1])? }))
        }
        (AnyOracle::BassilySmith(b), ReportRows::U32(flat)) => fold(b.aggregator(), flat.len() / 2, |i| {
            Ok(BassilySmithReport { j: flat[2 * i], bit: bit(flat[2 * i + 1])? })
        }),
        _ => Err(harmony_core::Error::report("reports", "an array of another layout", "this oracle's layout")),
    }
}

/// Report rows read from a numpy array, flattened.
enum ReportRows<'a> {
    U32(&'a [u32]),
    U64(&'a [u64]),
}

/// A C-contiguous numpy array of exactly `T` and `ndim` dimensions (`cols` columns when 2-D),
/// flattened; the error names what was expected.
fn flat<'py, T: numpy::Element>(
    a: &Bound<'py, PyAny>,
    cols: usize,
    expected: &str,
) -> PyResult<numpy::PyReadonlyArray<'py, T, numpy::IxDyn>> {
    let wrong = |found: String| report_error("reports", found, expected);
    let arr = a.cast::<numpy::PyArrayDyn<T>>().map_err(|_| wrong(describe(a)))?;
    let ndim = if cols == 0 { 1 } else { 2 };
    if arr.ndim() != ndim || (cols > 0 && arr.shape()[1] != cols) || !arr.is_c_contiguous() {
        return Err(wrong(describe(a)));
    }
    arr.try_readonly().map_err(|_| wrong("an array borrowed mutably elsewhere".into()))
}

/// "an array of dtype int64 and shape (3, 2)" (or the Python type's name).
fn describe(a: &Bound<'_, PyAny>) -> String {
    match a.cast::<numpy::PyUntypedArray>() {
        Ok(arr) => {
            let dtype = arr.dtype().str().map(|s| s.to_string()).unwrap_or_else(|_| "?".into());
            let c = if arr.is_c_contiguous() { "" } else { " (not C-contiguous)" };
            format!("an array of dtype {dtype} and shape {:?}{c}", arr.shape())
        }
        Err(_) => format!("a {}", a.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())),
    }
}

/// A frequency oracle chosen by name (`harmony_core::frequency::AnyOracle`).
#[pyclass(frozen, module = "harmony_ldp._native")]
pub struct NativeOracle {
    oracle: AnyOracle,
    spare: Spare,
}

/// The estimates as (n, a (4, d) array): rows estimate, std_error, ci_low, ci_high (the
/// DataFrame's columns: one float64 block, so pandas wraps it without a copy).
pub fn estimate_arrays(py: Python<'_>, e: FrequencyEstimate) -> PyResult<(u64, Bound<'_, numpy::PyArray2<f64>>)> {
    let d = e.frequencies.len();
    let mut block = Vec::with_capacity(4 * d);
    block.extend_from_slice(&e.frequencies);
    block.extend_from_slice(&e.std_errors);
    block.extend(e.frequencies.iter().zip(&e.std_errors).map(|(f, s)| f - Z95 * s));
    block.extend(e.frequencies.iter().zip(&e.std_errors).map(|(f, s)| f + Z95 * s));
    Ok((e.n, PyArray1::from_vec(py, block).reshape([4, d])?))
}

#[pymethods]
impl NativeOracle {
    #[new]
    fn new(name: &str, epsilon: f64, d: usize) -> PyResult<Self> {
        let oracle = AnyOracle::by_name(name, epsilon, d).or_py()?;
        if matches!(oracle, AnyOracle::Cms(_) | AnyOracle::Hcms(_) | AnyOracle::Rappor(_)) {
            let expected = "one of the frequency oracles with an array layout: grr, sue, oue, olh, hadamard, hr, \
                            bassily-smith, adaptive, ss (the sketches cms, hcms and rappor are Rust-only)";
            let e = harmony_core::Error::param("mechanism", name, expected);
            return Err(e).or_py();
        }
        Ok(NativeOracle { oracle, spare: Spare::default() })
    }
    #[getter]
    fn name(&self) -> &'static str {
        self.oracle.name()
    }
    #[getter]
    fn epsilon(&self) -> f64 {
        self.oracle.epsilon().value()
    }
    #[getter]
    fn d(&self) -> usize {
        self.oracle.domain_size()
    }
    /// (layout name, dtype, columns; 0 = 1-D).
    #[getter]
    fn layout(&self) -> (&'static str, &'static str, usize) {
        Layout::of(&self.oracle).describe()
    }
    /// Oracle-specific constants, for display.
    #[getter]
    fn details(&self) -> Vec<(&'static str, f64)> {
        match &self.oracle {
            AnyOracle::Grr(g) => vec![("p", g.p()), ("q", g.q())],
            AnyOracle::Sue(u) | AnyOracle::Oue(u) => vec![("p", u.p()), ("q", u.q())],
            AnyOracle::Olh(o) => vec![("g", o.g() as f64), ("p", o.p()), ("q", o.q())],
            AnyOracle::Hadamard(h) => vec![("rows", h.rows() as f64)],
            AnyOracle::Hr(h) => vec![("blocks", h.blocks() as f64), ("outputs", h.outputs() as f64)],
            AnyOracle::BassilySmith(b) => vec![("rows", b.rows() as f64)],
            AnyOracle::Ss(s) => vec![("k", s.k() as f64), ("p", s.p()), ("q", s.q())],
            AnyOracle::Adaptive(a) => {
                let chosen = ORACLES.iter().position(|i| i.kind.name() == a.branch()).unwrap_or(usize::MAX);
                // The chosen oracle, as its index in FREQUENCY_NAMES.
                vec![("chosen_oracle", chosen as f64)]
            }
            AnyOracle::Cms(_) | AnyOracle::Hcms(_) | AnyOracle::Rappor(_) => unreachable!("{SKETCHES_REFUSED}"),
        }
    }

    /// Randomizes int64 categories; the GIL is released meanwhile.
    #[pyo3(signature = (values, seed=None))]
    fn randomize<'py>(
        &self,
        py: Python<'py>,
        values: PyReadonlyArray1<'py, i64>,
        seed: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let vs =
            values.as_slice().map_err(|_| input_error("values", "a non-contiguous array", "a contiguous array"))?;
        let d = self.oracle.domain_size();
        let reports = py.detach(|| -> PyResult<Reports> {
            let idx = as_indices(vs);
            with_rng!(seed, |rng| randomize_reports(&self.oracle, &idx, &mut rng, &self.spare)).map_err(|e| {
                match vs.iter().position(|&v| v < 0 || v as u64 >= d as u64) {
                    Some(i) => input_error(&format!("values[{i}]"), vs[i], &format!("an integer in [0, {d})")),
                    None => crate::errors::core_error(e),
                }
            })
        })?;
        reports.into_array(py)
    }

    /// Aggregates reports of this oracle's layout; the GIL is released meanwhile.
    fn estimate<'py>(
        &self,
        py: Python<'py>,
        reports: &Bound<'py, PyAny>,
    ) -> PyResult<(u64, Bound<'py, numpy::PyArray2<f64>>)> {
        let (name, dtype, cols) = Layout::of(&self.oracle).describe();
        let expected = if cols == 0 {
            format!("a C-contiguous {dtype} array of shape (n,) ({name} layout)")
        } else {
            format!("a C-contiguous {dtype} array of shape (n, {cols}) ({name} layout)")
        };
        let est = if dtype == "uint32" {
            let a = flat::<u32>(reports, cols, &expected)?;
            let s = a.as_slice().map_err(|_| report_error("reports", describe(reports), &expected))?;
            py.detach(|| estimate_rows(&self.oracle, ReportRows::U32(s))).or_py()?
        } else {
            let a = flat::<u64>(reports, cols, &expected)?;
            let s = a.as_slice().map_err(|_| report_error("reports", describe(reports), &expected))?;
            py.detach(|| estimate_rows(&self.oracle, ReportRows::U64(s))).or_py()?
        };
        estimate_arrays(py, est)
    }

    /// Var(f̂_v) for every v when a fraction `frequencies[x]` of `n` users holds x.
    fn variance<'py>(
        &self,
        py: Python<'py>,
        frequencies: PyReadonlyArray1<'py, f64>,
        n: f64,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let f = frequencies
            .as_slice()
            .map_err(|_| param_error("frequencies", "a non-contiguous array", "a contiguous array"))?;
        let d = self.oracle.domain_size();
        if f.len() != d {
            return Err(param_error(
                "frequencies",
                format!("{} values", f.len()),
                &format!("{d} values (one per category)"),
            ));
        }
        if let Some(i) = f.iter().position(|x| !(0.0..=1.0).contains(x)) {
            return Err(param_error(&format!("frequencies[{i}]"), f[i], "a fraction in [0, 1]"));
        }
        let total: f64 = f.iter().sum();
        if (total - 1.0).abs() > 1e-6 {
            return Err(param_error("frequencies", format!("a vector summing to {total}"), "fractions summing to 1"));
        }
        if !(n.is_finite() && n > 0.0) {
            return Err(param_error("n", n, "a number of users > 0"));
        }
        let out: Vec<f64> = py.detach(|| (0..d).map(|v| self.oracle.aggregate_variance(f, v) / n).collect());
        Ok(PyArray1::from_vec(py, out))
    }

    /// The largest one-report variance over (x, v): n·Var(f̂_v) in the worst case.
    fn worst_case_variance(&self) -> f64 {
        self.oracle.worst_case_variance()
    }
}
