//! The user-defined aggregates. One accumulator serves the three: it holds a task's aggregator
//! (built from the collection's config, the aggregate's second argument), adds report bodies or
//! merges saved states, and ships its saved state ([`harmony_tasks::state`]) between DataFusion's
//! partial and final aggregations.
//!
//! | SQL | input | output |
//! |---|---|---|
//! | `harmony_estimate(body, spec [, query])` | report bodies | the estimate document (JSON text) |
//! | `harmony_state(body, spec)` | report bodies | the saved state (binary): a partial to store |
//! | `harmony_merge(state, spec [, query])` | saved states | the estimate document (JSON text) |
//!
//! Report bodies are a binary column (or a dictionary of binary values), or reports as their
//! fields (harmony_data::reports::Bodies: OLH's `struct<seed: int64, y: int32>`, one-attribute
//! records' `struct<attribute: int32, units: int64>`), handed to the task as two columns
//! ([`Task::add_checked_columns`]).
//!
//! `spec` is the collection's config (the `spec.json` beside exported reports) as a string
//! literal; `query` is `harmony query`'s URL query (`ranges=LO:HI,…&quantiles=Q,…`).
//!
//! DataFusion evaluates an aggregate's arguments row by row, so a literal spec would be copied
//! into every batch (8,192 copies of a config of a few KiB: most of the time at d = 1024). The
//! optimizer therefore rewrites a call with literal `spec` and `query` into one of the same
//! aggregate bound to them ([`HarmonyUdaf::bound`], `simplify`), whose only argument is the body.

use crate::dictionary::{DictionaryCounts, binary_values};
use crate::tally::{Tally, key_of, key_of_view};
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int32Type, Int64Type};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::function::{AccumulatorArgs, AggregateFunctionSimplification, StateFieldsArgs};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility};
use datafusion::physical_expr::expressions::Literal;
use harmony_protocol::CollectionConfig;
use harmony_protocol::estimates::Query;
use harmony_tasks::{ReportColumns, Task, TaskAggregator, state};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Which aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `harmony_estimate`: reports → estimate document.
    Estimate,
    /// `harmony_state`: reports → saved state.
    State,
    /// `harmony_merge`: saved states → estimate document.
    Merge,
}

impl Kind {
    /// The SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Estimate => "harmony_estimate",
            Kind::State => "harmony_state",
            Kind::Merge => "harmony_merge",
        }
    }
    fn takes_query(self) -> bool {
        self != Kind::State
    }
}

/// Tasks built from specs, shared by every accumulator of a session (a GROUP BY makes one per
/// group and partition; building some tasks is not free).
type Tasks = Arc<Mutex<HashMap<String, Arc<dyn Task>>>>;

/// A Harmony aggregate as a DataFusion UDAF.
#[derive(Clone)]
pub struct HarmonyUdaf {
    kind: Kind,
    signature: Signature,
    tasks: Tasks,
    /// The spec and the query text, when bound (then the body is the only argument).
    bound: Option<Arc<(String, String)>>,
}

impl std::fmt::Debug for HarmonyUdaf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.name())
    }
}

impl PartialEq for HarmonyUdaf {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.bound == other.bound
    }
}
impl Eq for HarmonyUdaf {}
impl std::hash::Hash for HarmonyUdaf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.kind.hash(state);
        self.bound.hash(state);
    }
}

impl HarmonyUdaf {
    /// The aggregate `kind`.
    pub fn new(kind: Kind) -> Self {
        let arities = if kind.takes_query() { vec![2, 3] } else { vec![2] };
        let signature = Signature::one_of(arities.into_iter().map(TypeSignature::Any).collect(), Volatility::Immutable);
        HarmonyUdaf { kind, signature, tasks: Tasks::default(), bound: None }
    }
    /// The aggregate `kind` bound to a collection's `spec` and a `query` (`""`: the defaults):
    /// one argument, the report bodies (or saved states).
    pub fn bound(kind: Kind, spec: &str, query: &str) -> AggregateUDF {
        let signature = Signature::any(1, Volatility::Immutable);
        let bound = Some(Arc::new((spec.to_string(), query.to_string())));
        AggregateUDF::new_from_impl(HarmonyUdaf { kind, signature, tasks: Tasks::default(), bound })
    }
    /// As a DataFusion function (to register, or to call from the DataFrame API).
    pub fn udaf(kind: Kind) -> AggregateUDF {
        AggregateUDF::new_from_impl(Self::new(kind))
    }

    fn err(&self, msg: impl std::fmt::Display) -> DataFusionError {
        DataFusionError::Execution(format!("{}: {msg}", self.kind.name()))
    }

    fn task(&self, spec: &str) -> Result<Arc<dyn Task>> {
        let mut tasks = self.tasks.lock().map_err(|_| self.err("a poisoned task cache"))?;
        if let Some(t) = tasks.get(spec) {
            return Ok(t.clone());
        }
        let config = CollectionConfig::from_json(spec).map_err(|e| self.err(format!("argument 2 (spec): {e}")))?;
        let task: Arc<dyn Task> =
            harmony_tasks::build(&config).map_err(|e| self.err(format!("argument 2 (spec): {e}")))?.into();
        if !task.mergeable() {
            return Err(self.err(format!(
                "collection {} (task \"{}\") depends on the order of its reports: it has no mergeable state (aggregate it with `harmony aggregate --engine local`)",
                config.id,
                config.task.kind().name()
            )));
        }
        tasks.insert(spec.to_string(), task.clone());
        Ok(task)
    }
}

/// The string literal argument `i` (`what`).
fn literal(args: &AccumulatorArgs<'_>, i: usize, what: &str, name: &str) -> Result<Option<String>> {
    let Some(expr) = args.exprs.get(i) else { return Ok(None) };
    let lit = expr.downcast_ref::<Literal>().ok_or_else(|| {
        DataFusionError::Plan(format!("{name}: argument {} ({what}) must be a string literal, got {expr}", i + 1))
    })?;
    match lit.value() {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => {
            Ok(Some(s.clone()))
        }
        v => Err(DataFusionError::Plan(format!(
            "{name}: argument {} ({what}) must be a non-null string, got {v:?}",
            i + 1
        ))),
    }
}

impl AggregateUDFImpl for HarmonyUdaf {
    fn name(&self) -> &str {
        self.kind.name()
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        let fields = self.kind != Kind::Merge && report_fields(&args[0]);
        if !is_binary(&args[0]) && !fields {
            let (what, ty) = match self.kind {
                Kind::Merge => ("saved states", "binary"),
                _ => ("report bodies", "binary or a struct of reports' fields (docs/EXPORT.md)"),
            };
            return Err(DataFusionError::Plan(format!(
                "{}: argument 1 ({what}) must be {ty}, got {}",
                self.kind.name(),
                args[0]
            )));
        }
        Ok(if self.kind == Kind::State { DataType::Binary } else { DataType::Utf8 })
    }
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(format!("{}[state]", args.name), DataType::Binary, true))])
    }
    fn simplify(&self) -> Option<AggregateFunctionSimplification> {
        if self.bound.is_some() {
            return None;
        }
        let kind = self.kind;
        Some(Box::new(move |f: AggregateFunction, _: &SimplifyContext| {
            let text = |e: Option<&Expr>| match e {
                Some(Expr::Literal(
                    ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)),
                    _,
                )) => Some(s.clone()),
                _ => None,
            };
            let args = &f.params.args;
            let (spec, query) =
                (text(args.get(1)), if args.len() > 2 { text(args.get(2)) } else { Some(String::new()) });
            let (Some(spec), Some(query)) = (spec, query) else {
                return Ok(Expr::AggregateFunction(f)); // accumulator() names the argument at fault
            };
            let p = f.params;
            let udaf = Arc::new(HarmonyUdaf::bound(kind, &spec, &query));
            let args = vec![p.args[0].clone()];
            Ok(Expr::AggregateFunction(AggregateFunction::new_udf(
                udaf,
                args,
                p.distinct,
                p.filter,
                p.order_by,
                p.null_treatment,
            )))
        }))
    }
    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let name = self.kind.name();
        let (spec, query) = match &self.bound {
            Some(b) => (b.0.clone(), (!b.1.is_empty()).then(|| b.1.clone())),
            None => {
                let spec = literal(&args, 1, "spec", name)?.ok_or_else(|| self.err("argument 2 (spec) is missing"))?;
                (spec, literal(&args, 2, "query", name)?)
            }
        };
        let query = match query {
            Some(q) => {
                Query::parse(&q).map_err(|(field, msg)| self.err(format!("argument 3 (query): {field}: {msg}")))?
            }
            None => Query::default(),
        };
        let task = self.task(&spec)?;
        let agg = task.aggregator();
        let (tally, dictionary) = (Tally::default(), DictionaryCounts::default());
        Ok(Box::new(HarmonyAccumulator { kind: self.kind, task, agg, query, tally, dictionary }))
    }
}

/// Binary, or a dictionary of binary values (report bodies: harmony_data::reports::Bodies).
fn is_binary(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(_, values) => binary_values(values),
        t => binary_values(t),
    }
}

/// The body types of reports as fields (harmony_data::reports::Bodies): OLH's, and
/// one-attribute fixed-point records'.
const FIELDS: [[(&str, DataType); 2]; 2] =
    [[("seed", DataType::Int64), ("y", DataType::Int32)], [("attribute", DataType::Int32), ("units", DataType::Int64)]];

/// Whether `t` is one of [`FIELDS`].
fn report_fields(t: &DataType) -> bool {
    let DataType::Struct(fields) = t else { return false };
    let has = |(name, ty): &(&str, DataType)| fields.find(name).is_some_and(|(_, f)| f.data_type() == ty);
    FIELDS.iter().any(|two| two.iter().all(has))
}

/// The report columns of a struct of reports' fields; an error names a null or another column.
fn report_columns(col: &dyn Array) -> Result<ReportColumns<'_>, String> {
    let s = col.as_struct_opt().ok_or_else(|| not_binary(col))?;
    let field = |name: &str| {
        let c = s.column_by_name(name).ok_or_else(|| not_binary(col))?;
        no_nulls(c, &format!("body.{name}")).map(|()| c)
    };
    let int32 = |name| field(name)?.as_primitive_opt::<Int32Type>().map(|a| a.values()).ok_or_else(|| not_binary(col));
    let int64 = |name| field(name)?.as_primitive_opt::<Int64Type>().map(|a| a.values()).ok_or_else(|| not_binary(col));
    if s.column_by_name("seed").is_some() {
        Ok(ReportColumns::Olh { seeds: int64("seed")?, ys: int32("y")? })
    } else {
        Ok(ReportColumns::FixedRecords { attributes: int32("attribute")?, units: int64("units")? })
    }
}

/// The first null row of `col`, as an error.
fn no_nulls(col: &dyn Array, what: &str) -> Result<(), String> {
    match col.null_count() {
        0 => Ok(()),
        _ => Err(format!("row {} of the batch: a null {what}", (0..col.len()).find(|&i| col.is_null(i)).unwrap_or(0))),
    }
}

/// The values of a binary column (`None` for another type).
fn binaries(col: &dyn Array) -> Option<Vec<&[u8]>> {
    Some(match col.data_type() {
        DataType::Binary => col.as_binary::<i32>().iter().map(Option::unwrap_or_default).collect(),
        DataType::LargeBinary => col.as_binary::<i64>().iter().map(Option::unwrap_or_default).collect(),
        DataType::BinaryView => col.as_binary_view().iter().map(Option::unwrap_or_default).collect(),
        _ => return None,
    })
}

/// Calls `f` on every value of a binary column; a null is an error naming its row.
fn each_binary(col: &ArrayRef, what: &str, f: &mut dyn FnMut(&[u8]) -> Result<(), String>) -> Result<(), String> {
    no_nulls(col, what)?;
    let values = binaries(col).ok_or_else(|| format!("a column of {}, expected binary {what}", col.data_type()))?;
    values.into_iter().enumerate().try_for_each(|(i, v)| f(v).map_err(|e| format!("row {i} of the batch: {e}")))
}

/// One group's (or partition's) aggregator.
struct HarmonyAccumulator {
    kind: Kind,
    task: Arc<dyn Task>,
    agg: Box<dyn TaskAggregator>,
    query: Query,
    /// Short reports counted, not yet added.
    tally: Tally,
    /// The rows of a dictionary column counted per report, not yet added.
    dictionary: DictionaryCounts,
}

impl std::fmt::Debug for HarmonyAccumulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({}, {} reports)", self.kind.name(), self.task.config().id, self.agg.count())
    }
}

impl HarmonyAccumulator {
    fn err(&self, msg: impl std::fmt::Display) -> DataFusionError {
        DataFusionError::Execution(format!("{} (collection {}): {msg}", self.kind.name(), self.task.config().id))
    }
    fn merge_states(&mut self, col: &ArrayRef) -> Result<()> {
        let (task, agg) = (&self.task, &mut self.agg);
        each_binary(col, "saved state", &mut |s| {
            state::merge(task.as_ref(), agg.as_mut(), s).map_err(|e| e.to_string())
        })
        .map_err(|e| self.err(e))
    }
    fn save(&mut self) -> Result<Vec<u8>> {
        self.flush()?;
        state::save(self.task.as_ref(), self.agg.as_ref()).map_err(|e| self.err(e))
    }
    /// Adds the counted reports.
    fn flush(&mut self) -> Result<()> {
        let flushed = self.tally.flush(self.agg.as_mut());
        flushed.map_err(|e| self.err(format!("invalid report: {e}")))?;
        let flushed = self.dictionary.flush(self.task.as_ref(), self.agg.as_mut());
        flushed.map_err(|e| self.err(e))
    }
    /// A column of report bodies: a dictionary's rows counted per index ([`DictionaryCounts`]);
    /// reports' fields handed over as columns ([`Task::add_checked_columns`]); otherwise short ones
    /// counted ([`Tally`]), the others validated and added as one batch ([`Task::add_checked_batch`]).
    fn add_bodies(&mut self, col: &ArrayRef) -> Result<(), String> {
        no_nulls(col, "report body")?;
        let invalid = |row: usize, e| format!("row {row} of the batch: invalid report: {e}");
        if let DataType::Struct(_) = col.data_type() {
            let columns = report_columns(col)?;
            return self.task.add_checked_columns(self.agg.as_mut(), columns).map_err(|(i, e)| invalid(i, e));
        }
        if let DataType::Dictionary(key, _) = col.data_type() {
            if let Some(dict) = col.as_dictionary_opt::<Int32Type>() {
                return self.dictionary.add(dict, self.task.as_ref(), self.agg.as_mut());
            }
            // Other index types (not what export writes): the values, row by row.
            let cast = datafusion::arrow::compute::cast(col, &DataType::BinaryView);
            let plain = cast.map_err(|e| format!("a dictionary column with {key} indices: {e}"))?;
            return self.add_bodies(&plain);
        }
        if !self.tally.on() {
            let bodies = binaries(col).ok_or_else(|| not_binary(col))?;
            return self.task.add_checked_batch(self.agg.as_mut(), &bodies).map_err(|(i, e)| invalid(i, e));
        }
        let task = self.task.as_ref();
        let (mut rows, mut long) = (Vec::new(), Vec::new());
        if let Some(views) = col.as_binary_view_opt() {
            for (row, &view) in views.views().iter().enumerate() {
                match key_of_view(view) {
                    Some(key) => self.tally.add(key, task).map_err(|e| invalid(row, e))?,
                    None => {
                        rows.push(row);
                        long.push(views.value(row));
                    }
                }
            }
        } else {
            for (row, body) in binaries(col).ok_or_else(|| not_binary(col))?.into_iter().enumerate() {
                match key_of(body) {
                    Some(key) => self.tally.add(key, task).map_err(|e| invalid(row, e))?,
                    None => {
                        rows.push(row);
                        long.push(body);
                    }
                }
            }
        }
        self.tally.counted((col.len() - long.len()) as u64);
        if !long.is_empty() {
            task.add_checked_batch(self.agg.as_mut(), &long).map_err(|(i, e)| invalid(rows[i], e))?;
        }
        if self.tally.due() {
            self.tally.flush(self.agg.as_mut()).map_err(|e| format!("invalid report: {e}"))?;
        }
        Ok(())
    }
}

fn not_binary(col: &dyn Array) -> String {
    format!("a column of {}, expected binary report bodies or reports' fields", col.data_type())
}

impl Accumulator for HarmonyAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if self.kind == Kind::Merge {
            return self.merge_states(&values[0]);
        }
        // Every report is validated as the server does before it is added.
        let added = self.add_bodies(&values[0]);
        added.map_err(|e| self.err(e))
    }
    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.merge_states(&states[0])
    }
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![ScalarValue::Binary(Some(self.save()?))])
    }
    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.kind == Kind::State {
            return Ok(ScalarValue::Binary(Some(self.save()?)));
        }
        self.flush()?;
        let doc = harmony_tasks::document(self.task.as_ref(), self.agg.as_ref(), &self.query)
            .map_err(|e| self.err(format!("query: {e}")))?;
        let json = serde_json::to_string(&doc).map_err(|e| self.err(e))?;
        Ok(ScalarValue::Utf8(Some(json)))
    }
    fn size(&self) -> usize {
        // The aggregator does not report its heap size; its counters are a few KiB for every
        // task but heavy hitters (which keep their reports).
        std::mem::size_of_val(self) + 4096
    }
}
