//! Domains and workloads: the matrix A ∈ R^(d×J) of d linear queries over a domain \[J\].
//!
//! # Domain
//! [`Domain`] is a categorical attribute, or the cross-product of a few (binned numeric
//! attributes count as categorical, one label per bin). A record's index is row-major, the last
//! attribute fastest: v = Σ_a c_a · Π_{b > a} |A_b|.
//!
//! # Workload file formats
//! * **JSON list of queries**: `{"attributes": ["sex", "race"], "queries": [Q, …]}`
//!   (`attributes` is optional and only read by the CLI), each Q an object with an optional
//!   `"name"` and exactly one of:
//!   - `{"range": [a, b]}`: the records whose coordinate lies in \[a, b\] (inclusive), a and b
//!     being category indices (0-based) or labels;
//!   - `{"in": ["Female", …]}`: the records whose coordinate is one of these labels;
//!   - `{"weights": [w_0, …, w_(J−1)]}`: an explicit row of A;
//!   - `{"and": [Q, …]}`: the conjunction (product) of predicates.
//!
//!   `range` and `in` take `"attribute": NAME` when the domain has several attributes.
//! * **JSON matrix**: `{"matrix": [[…], …], "names": […]}` (names optional) or a bare array of
//!   rows; each row has J entries.
//! * **CSV matrix**: one query per line with J numbers, optionally preceded by a name field; an
//!   optional header line (no numbers) and `#` comment lines are skipped.
//! * **Built-ins**: `identity` (the J point queries: distribution estimation), `prefix` (the J
//!   prefix ranges \[0, j\]).

use harmony_core::{Error, Result};
use serde_json::Value as Json;

/// The largest domain accepted (J ≤ 2^24).
pub const MAX_DOMAIN: usize = 1 << 24;
/// The work limit (J²·d/2 multiply-adds) of the exact l2 sensitivity
/// ([`Workload::l2_sensitivity`]); larger workloads use the bound 2r.
pub const DIAMETER_WORK: usize = 1 << 27;
/// The largest workload accepted: d·J ≤ 2^26 entries (A is held densely, twice: 1 GiB).
pub const MAX_ENTRIES: usize = 1 << 26;

fn check_entries(d: usize, j: usize) -> Result<()> {
    if d.saturating_mul(j) > MAX_ENTRIES {
        return Err(Error::input(
            "workload size d × J",
            format!("{d} × {j}"),
            format!("at most {MAX_ENTRIES} entries (a dense matrix): fewer queries or a smaller domain"),
        ));
    }
    Ok(())
}

/// One attribute of a domain: its name and its ordered labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainAttribute {
    /// Attribute name.
    pub name: String,
    /// Ordered labels (categories, or bins of a numeric attribute).
    pub labels: Vec<String>,
}

/// A finite domain \[J\]: one attribute or the cross-product of several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    attributes: Vec<DomainAttribute>,
    strides: Vec<usize>,
    size: usize,
}

impl Domain {
    /// A domain from its attributes. Errors: no attribute, an attribute with fewer than 2
    /// labels, a repeated name, or J above [`MAX_DOMAIN`].
    pub fn new(attributes: Vec<DomainAttribute>) -> Result<Self> {
        if attributes.is_empty() {
            return Err(Error::input("attributes", "[]", "at least one attribute"));
        }
        let mut size = 1usize;
        for (i, a) in attributes.iter().enumerate() {
            if a.labels.len() < 2 {
                return Err(Error::input(format!("attribute \"{}\"", a.name), a.labels.len(), "at least 2 labels"));
            }
            if attributes[..i].iter().any(|b| b.name == a.name) {
                return Err(Error::input("attributes", &a.name, "distinct attribute names"));
            }
            size = size.saturating_mul(a.labels.len());
        }
        if size > MAX_DOMAIN {
            return Err(Error::input("domain size J", size, format!("at most {MAX_DOMAIN} (choose fewer attributes)")));
        }
        let mut strides = vec![1; attributes.len()];
        for a in (0..attributes.len().saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * attributes[a + 1].labels.len();
        }
        Ok(Domain { attributes, strides, size })
    }
    /// A one-attribute domain.
    pub fn single(name: impl Into<String>, labels: Vec<String>) -> Result<Self> {
        Self::new(vec![DomainAttribute { name: name.into(), labels }])
    }
    /// A one-attribute domain of J labels `0`, `1`, … (synthetic data).
    pub fn indices(j: usize) -> Result<Self> {
        Self::single("value", (0..j).map(|v| v.to_string()).collect())
    }
    /// J.
    pub fn size(&self) -> usize {
        self.size
    }
    /// The attributes, in order.
    pub fn attributes(&self) -> &[DomainAttribute] {
        &self.attributes
    }
    /// The index of a record from its coordinates (one label index per attribute). Errors: a
    /// wrong number of coordinates or one out of range.
    pub fn index(&self, coords: &[usize]) -> Result<usize> {
        if coords.len() != self.attributes.len() {
            return Err(Error::input("coordinates", coords.len(), format!("{} coordinates", self.attributes.len())));
        }
        let mut v = 0;
        for ((&c, a), &s) in coords.iter().zip(&self.attributes).zip(&self.strides) {
            if c >= a.labels.len() {
                return Err(Error::input(
                    format!("coordinate of \"{}\"", a.name),
                    c,
                    format!("an index < {}", a.labels.len()),
                ));
            }
            v += c * s;
        }
        Ok(v)
    }
    /// The label of record v: `label` for one attribute, `a=x, b=y` for several.
    pub fn label(&self, v: usize) -> String {
        if self.attributes.len() == 1 {
            return self.attributes[0].labels[v].clone();
        }
        let parts: Vec<String> = self
            .attributes
            .iter()
            .zip(&self.strides)
            .map(|(a, &s)| format!("{}={}", a.name, a.labels[(v / s) % a.labels.len()]))
            .collect();
        parts.join(", ")
    }
    fn position(&self, attribute: Option<&str>, ctx: &str) -> Result<usize> {
        match attribute {
            Some(name) => self.attributes.iter().position(|a| a.name == name).ok_or_else(|| {
                Error::input(
                    format!("{ctx}.attribute"),
                    name,
                    format!("one of the domain's attributes: {}", self.names().join(", ")),
                )
            }),
            None if self.attributes.len() == 1 => Ok(0),
            None => Err(Error::input(
                format!("{ctx}.attribute"),
                "(missing)",
                format!("an attribute name (the domain has {}: {})", self.attributes.len(), self.names().join(", ")),
            )),
        }
    }
    fn names(&self) -> Vec<&str> {
        self.attributes.iter().map(|a| a.name.as_str()).collect()
    }
    /// The 0/1 row over \[J\] of "coordinate `a` is in `mask`".
    fn lift(&self, a: usize, mask: &[bool]) -> Vec<f64> {
        let (s, k) = (self.strides[a], self.attributes[a].labels.len());
        (0..self.size).map(|v| if mask[(v / s) % k] { 1.0 } else { 0.0 }).collect()
    }
}

/// A workload: d linear queries over \[J\], the rows of A ∈ R^(d×J). The answer to query t on a
/// distribution p is ⟨a_t, p⟩ (for 0/1 rows: the fraction of records satisfying the predicate).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    names: Vec<String>,
    j: usize,
    /// Row-major d × J.
    rows: Vec<f64>,
    /// Column-major (J × d): column v of A is `cols[v·d..(v+1)·d]`.
    cols: Vec<f64>,
    identity: bool,
}

impl Workload {
    /// A workload from its rows. Errors: no query, J < 2, a row of the wrong length, a
    /// non-finite entry, names not one per row.
    pub fn from_rows(names: Vec<String>, j: usize, rows: Vec<Vec<f64>>) -> Result<Self> {
        if rows.is_empty() {
            return Err(Error::input("workload", "0 queries", "at least one query"));
        }
        if j < 2 {
            return Err(Error::input("domain size J", j, "at least 2"));
        }
        if names.len() != rows.len() {
            return Err(Error::input("names", names.len(), format!("one name per query ({})", rows.len())));
        }
        let d = rows.len();
        check_entries(d, j)?;
        let mut flat = Vec::with_capacity(d * j);
        for (t, row) in rows.iter().enumerate() {
            if row.len() != j {
                return Err(Error::input(
                    format!("query {t} (\"{}\")", names[t]),
                    format!("{} columns", row.len()),
                    format!("J = {j} columns (the domain size)"),
                ));
            }
            if let Some(v) = row.iter().position(|x| !x.is_finite()) {
                return Err(Error::input(format!("query {t}, column {v}"), row[v], "a finite number"));
            }
            flat.extend_from_slice(row);
        }
        let mut cols = vec![0.0; d * j];
        for t in 0..d {
            for v in 0..j {
                cols[v * d + t] = flat[t * j + v];
            }
        }
        let identity = d == j && (0..d).all(|t| (0..j).all(|v| flat[t * j + v] == if t == v { 1.0 } else { 0.0 }));
        Ok(Workload { names, j, rows: flat, cols, identity })
    }
    /// The J point queries over `domain` (A = I: distribution estimation). Errors: J² above
    /// [`MAX_ENTRIES`].
    pub fn identity(domain: &Domain) -> Result<Self> {
        let j = domain.size();
        check_entries(j, j)?;
        let rows = (0..j).map(|t| (0..j).map(|v| (t == v) as u8 as f64).collect()).collect();
        let names = (0..j).map(|v| domain.label(v)).collect();
        Self::from_rows(names, j, rows)
    }
    /// The J prefix ranges \[0, t\] over `domain`'s index order. Errors: J² above
    /// [`MAX_ENTRIES`].
    pub fn prefix(domain: &Domain) -> Result<Self> {
        let j = domain.size();
        check_entries(j, j)?;
        let rows = (0..j).map(|t| (0..j).map(|v| (v <= t) as u8 as f64).collect()).collect();
        let names = (0..j).map(|t| format!("<= {}", domain.label(t))).collect();
        Self::from_rows(names, j, rows)
    }
    /// Whether `name` is a built-in workload (`identity`, `prefix`).
    pub fn is_builtin(name: &str) -> bool {
        matches!(name, "identity" | "prefix")
    }
    /// A built-in workload by name (`identity`, `prefix`), or `None`.
    pub fn builtin(name: &str, domain: &Domain) -> Option<Result<Self>> {
        match name {
            "identity" => Some(Self::identity(domain)),
            "prefix" => Some(Self::prefix(domain)),
            _ => None,
        }
    }
    /// Parses a JSON workload (a list of queries or a matrix; see the module doc) over `domain`.
    pub fn parse_json(text: &str, domain: &Domain) -> Result<Self> {
        let root: Json = serde_json::from_str(text)
            .map_err(|e| Error::input("workload", e.to_string(), "valid JSON (see docs/ANALYTICS-LINEAR.md)"))?;
        let j = domain.size();
        if let Json::Array(rows) = &root {
            return Self::matrix_rows(rows, None, j);
        }
        let Json::Object(obj) = &root else {
            return Err(Error::input(
                "workload",
                kind(&root),
                "a JSON object with \"queries\" or \"matrix\", or an array of rows",
            ));
        };
        for k in obj.keys() {
            if !["attributes", "queries", "matrix", "names"].contains(&k.as_str()) {
                return Err(Error::input("workload key", k, "one of attributes, queries, matrix, names"));
            }
        }
        match (obj.get("queries"), obj.get("matrix")) {
            (Some(Json::Array(qs)), None) => {
                let mut names = Vec::with_capacity(qs.len());
                let mut rows = Vec::with_capacity(qs.len());
                for (i, q) in qs.iter().enumerate() {
                    let ctx = format!("queries[{i}]");
                    let name = match q.get("name") {
                        None => describe(q),
                        Some(Json::String(s)) => s.clone(),
                        Some(other) => return Err(Error::input(format!("{ctx}.name"), kind(other), "a string")),
                    };
                    rows.push(parse_query(q, &ctx, domain)?);
                    names.push(name);
                }
                Self::from_rows(names, j, rows)
            }
            (None, Some(Json::Array(rows))) => Self::matrix_rows(rows, obj.get("names"), j),
            (Some(_), Some(_)) => Err(Error::input("workload", "both queries and matrix", "one of them")),
            (Some(other), None) | (None, Some(other)) => Err(Error::input("workload", kind(other), "an array")),
            (None, None) => {
                Err(Error::input("workload", "no queries or matrix key", "\"queries\": [...] or \"matrix\": [[...]]"))
            }
        }
    }
    fn matrix_rows(rows: &[Json], names: Option<&Json>, j: usize) -> Result<Self> {
        let mut out = Vec::with_capacity(rows.len());
        for (t, row) in rows.iter().enumerate() {
            out.push(numbers(row, &format!("matrix row {t}"))?);
        }
        let names = match names {
            None => (0..out.len()).map(|t| format!("q{t}")).collect(),
            Some(Json::Array(ns)) => ns
                .iter()
                .enumerate()
                .map(|(t, n)| {
                    n.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| Error::input(format!("names[{t}]"), kind(n), "a string"))
                })
                .collect::<Result<_>>()?,
            Some(other) => return Err(Error::input("names", kind(other), "an array of strings")),
        };
        Self::from_rows(names, j, out)
    }
    /// The `attributes` list of a JSON workload, if it has one (the CLI uses it when
    /// `--attributes` is not given).
    pub fn json_attributes(text: &str) -> Result<Option<Vec<String>>> {
        let root: Json = serde_json::from_str(text)
            .map_err(|e| Error::input("workload", e.to_string(), "valid JSON (see docs/ANALYTICS-LINEAR.md)"))?;
        match root.get("attributes") {
            None => Ok(None),
            Some(Json::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| Error::input(format!("attributes[{i}]"), kind(x), "a string"))
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(Error::input("attributes", kind(other), "an array of attribute names")),
        }
    }
    /// Parses a CSV matrix with J columns (see the module doc).
    pub fn parse_csv(text: &str, j: usize) -> Result<Self> {
        let (mut names, mut rows) = (Vec::new(), Vec::new());
        let mut first = true;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let parsed: Vec<Option<f64>> = fields.iter().map(|f| f.parse::<f64>().ok()).collect();
            if first && parsed.iter().skip(1).all(Option::is_none) && fields.len() > 1 {
                first = false;
                continue; // header
            }
            first = false;
            let (name, values) = if parsed[0].is_none() {
                (fields[0].to_string(), &fields[1..])
            } else {
                (format!("q{}", rows.len()), &fields[..])
            };
            if values.len() != j {
                return Err(Error::input(
                    format!("CSV line {} (\"{name}\")", i + 1),
                    format!("{} values", values.len()),
                    format!("J = {j} values (the domain size), optionally after a name"),
                ));
            }
            let row = values
                .iter()
                .enumerate()
                .map(|(c, f)| {
                    f.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| {
                        Error::input(format!("CSV line {}, column {}", i + 1, c + 1), f, "a finite number")
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            names.push(name);
            rows.push(row);
        }
        Self::from_rows(names, j, rows)
    }
    /// d: the number of queries.
    pub fn queries(&self) -> usize {
        self.names.len()
    }
    /// J: the domain size.
    pub fn domain_size(&self) -> usize {
        self.j
    }
    /// The name of query t.
    pub fn name(&self, t: usize) -> &str {
        &self.names[t]
    }
    /// Row t of A (query t's weights over \[J\]).
    pub fn row(&self, t: usize) -> &[f64] {
        &self.rows[t * self.j..(t + 1) * self.j]
    }
    /// Column v of A (a user with value v's answers to the d queries).
    pub fn column(&self, v: usize) -> &[f64] {
        let d = self.queries();
        &self.cols[v * d..(v + 1) * d]
    }
    /// r = max_v ‖a_v‖₂ (the Gaussian mechanism's l2 sensitivity is 2r).
    pub fn max_column_norm(&self) -> f64 {
        (0..self.j).map(|v| self.column(v).iter().map(|x| x * x).sum::<f64>().sqrt()).fold(0.0, f64::max)
    }
    /// The l2 sensitivity of v ↦ a_v, Δ = max over pairs v, v' of ‖a_v − a_v'‖₂, and whether
    /// it is exact: √2 for A = I; by enumerating the pairs when J²·d/2 ≤ [`DIAMETER_WORK`];
    /// otherwise the bound 2r = 2·max_v ‖a_v‖₂ (triangle inequality), flagged `false`.
    pub fn l2_sensitivity(&self) -> (f64, bool) {
        if self.identity {
            return (std::f64::consts::SQRT_2, true);
        }
        let d = self.queries();
        if self.j.saturating_mul(self.j).saturating_mul(d) / 2 > DIAMETER_WORK {
            return (2.0 * self.max_column_norm(), false);
        }
        let mut best = 0.0f64;
        for v in 0..self.j {
            let a = self.column(v);
            for w in v + 1..self.j {
                let dist2: f64 = a.iter().zip(self.column(w)).map(|(x, y)| (x - y) * (x - y)).sum();
                best = best.max(dist2);
            }
        }
        (best.sqrt(), true)
    }
    /// Whether A is the J×J identity.
    pub fn is_identity(&self) -> bool {
        self.identity
    }
    /// A·p (the answers on a distribution p over \[J\]).
    pub fn apply(&self, p: &[f64]) -> Vec<f64> {
        assert_eq!(p.len(), self.j, "apply: p has {} entries, the workload J = {}", p.len(), self.j);
        (0..self.queries()).map(|t| self.row(t).iter().zip(p).map(|(a, b)| a * b).sum()).collect()
    }
    /// Aᵀ·g (a vector over \[J\]).
    pub fn apply_transpose(&self, g: &[f64]) -> Vec<f64> {
        assert_eq!(g.len(), self.queries(), "apply_transpose: g has {} entries, d = {}", g.len(), self.queries());
        (0..self.j).map(|v| self.column(v).iter().zip(g).map(|(a, b)| a * b).sum()).collect()
    }
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// A short default name for a query: its JSON text (truncated).
fn describe(q: &Json) -> String {
    let s = q.to_string();
    if s.len() > 60 { format!("{}…", &s[..s.floor_char_boundary(57)]) } else { s }
}

fn numbers(v: &Json, ctx: &str) -> Result<Vec<f64>> {
    let Json::Array(xs) = v else {
        return Err(Error::input(ctx.to_string(), kind(v), "an array of numbers"));
    };
    xs.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| Error::input(format!("{ctx}[{i}]"), x.to_string(), "a finite number"))
        })
        .collect()
}

/// Category index of a range endpoint: an index or a label.
fn endpoint(v: &Json, labels: &[String], ctx: &str) -> Result<usize> {
    match v {
        Json::Number(n) => n.as_u64().map(|x| x as usize).filter(|&x| x < labels.len()).ok_or_else(|| {
            Error::input(ctx.to_string(), n.to_string(), format!("a category index in [0, {})", labels.len()))
        }),
        Json::String(s) => labels
            .iter()
            .position(|l| l == s)
            .ok_or_else(|| Error::input(ctx.to_string(), s, format!("one of the labels {}", preview(labels)))),
        other => Err(Error::input(ctx.to_string(), kind(other), "a category index or label")),
    }
}

fn preview(labels: &[String]) -> String {
    if labels.len() <= 12 {
        format!("[{}]", labels.join(", "))
    } else {
        format!("[{}, … ({} labels)]", labels[..10].join(", "), labels.len())
    }
}

/// One query object → its row over \[J\].
fn parse_query(q: &Json, ctx: &str, domain: &Domain) -> Result<Vec<f64>> {
    let Json::Object(obj) = q else {
        return Err(Error::input(
            ctx.to_string(),
            kind(q),
            "a query object ({\"range\": …}, {\"in\": …}, {\"weights\": …} or {\"and\": …})",
        ));
    };
    let ops: Vec<&str> =
        obj.keys().map(String::as_str).filter(|k| ["range", "in", "weights", "and"].contains(k)).collect();
    for k in obj.keys() {
        if !["range", "in", "weights", "and", "name", "attribute"].contains(&k.as_str()) {
            return Err(Error::input(format!("{ctx} key"), k, "one of range, in, weights, and, name, attribute"));
        }
    }
    if ops.len() != 1 {
        return Err(Error::input(ctx.to_string(), format!("{} of range/in/weights/and", ops.len()), "exactly one"));
    }
    let attribute = match obj.get("attribute") {
        None => None,
        Some(Json::String(s)) => Some(s.as_str()),
        Some(other) => return Err(Error::input(format!("{ctx}.attribute"), kind(other), "an attribute name")),
    };
    let arg = &obj[ops[0]];
    match ops[0] {
        "weights" => {
            let w = numbers(arg, &format!("{ctx}.weights"))?;
            if w.len() != domain.size() {
                return Err(Error::input(
                    format!("{ctx}.weights"),
                    format!("{} entries", w.len()),
                    format!("J = {} entries (the domain size)", domain.size()),
                ));
            }
            Ok(w)
        }
        "and" => {
            let Json::Array(parts) = arg else {
                return Err(Error::input(format!("{ctx}.and"), kind(arg), "an array of queries"));
            };
            if parts.is_empty() {
                return Err(Error::input(format!("{ctx}.and"), "[]", "at least one query"));
            }
            let mut row = vec![1.0; domain.size()];
            for (i, p) in parts.iter().enumerate() {
                let sub = parse_query(p, &format!("{ctx}.and[{i}]"), domain)?;
                row.iter_mut().zip(sub).for_each(|(a, b)| *a *= b);
            }
            Ok(row)
        }
        op => label_mask(op, arg, attribute, ctx, domain),
    }
}

/// A `range` or `in` query's row: the mask of its labels of one attribute, lifted to \[J\].
fn label_mask(op: &str, arg: &Json, attribute: Option<&str>, ctx: &str, domain: &Domain) -> Result<Vec<f64>> {
    let a = domain.position(attribute, ctx)?;
    let labels = &domain.attributes()[a].labels;
    let mut mask = vec![false; labels.len()];
    let Json::Array(items) = arg else {
        return Err(Error::input(format!("{ctx}.{op}"), kind(arg), "an array"));
    };
    if op == "range" {
        if items.len() != 2 {
            return Err(Error::input(
                format!("{ctx}.range"),
                format!("{} endpoints", items.len()),
                "[a, b] (inclusive)",
            ));
        }
        let lo = endpoint(&items[0], labels, &format!("{ctx}.range[0]"))?;
        let hi = endpoint(&items[1], labels, &format!("{ctx}.range[1]"))?;
        if lo > hi {
            return Err(Error::input(format!("{ctx}.range"), format!("[{lo}, {hi}]"), "a <= b"));
        }
        mask[lo..=hi].iter_mut().for_each(|m| *m = true);
    } else {
        for (i, item) in items.iter().enumerate() {
            let Json::String(s) = item else {
                return Err(Error::input(format!("{ctx}.in[{i}]"), kind(item), "a label"));
            };
            let c = endpoint(item, labels, &format!("{ctx}.in[{i}]")).map_err(|_| {
                Error::input(
                    format!("{ctx}.in[{i}]"),
                    s,
                    format!("one of the labels of \"{}\" {}", domain.attributes()[a].name, preview(labels)),
                )
            })?;
            mask[c] = true;
        }
    }
    Ok(domain.lift(a, &mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }
    fn two() -> Domain {
        Domain::new(vec![
            DomainAttribute { name: "sex".into(), labels: labels(&["F", "M"]) },
            DomainAttribute { name: "age".into(), labels: labels(&["young", "mid", "old"]) },
        ])
        .unwrap()
    }

    #[test]
    fn domain_index_is_row_major() {
        let d = two();
        assert_eq!(d.size(), 6);
        assert_eq!(d.index(&[1, 2]).unwrap(), 5);
        assert_eq!(d.label(4), "sex=M, age=mid");
        assert!(d.index(&[2, 0]).is_err());
    }

    #[test]
    fn json_queries_build_the_expected_rows() {
        let d = two();
        let w = Workload::parse_json(
            r#"{"queries": [
                {"name": "women", "in": ["F"], "attribute": "sex"},
                {"range": ["mid", 2], "attribute": "age"},
                {"and": [{"in": ["M"], "attribute": "sex"}, {"range": [0, 0], "attribute": "age"}]},
                {"weights": [1, 2, 3, 4, 5, 6]}
            ]}"#,
            &d,
        )
        .unwrap();
        assert_eq!(w.queries(), 4);
        assert_eq!(w.name(0), "women");
        assert_eq!(w.row(0), &[1.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
        assert_eq!(w.row(1), &[0.0, 1.0, 1.0, 0.0, 1.0, 1.0]);
        assert_eq!(w.row(2), &[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
        assert_eq!(w.column(5), &[0.0, 1.0, 0.0, 6.0]);
        let p = [0.1, 0.2, 0.1, 0.3, 0.2, 0.1];
        let a = w.apply(&p);
        assert!((a[0] - 0.4).abs() < 1e-12 && (a[1] - 0.6).abs() < 1e-12);
        assert_eq!(w.apply_transpose(&[1.0, 0.0, 0.0, 0.0]), w.row(0));
    }

    #[test]
    fn matrices_from_json_and_csv() {
        let d = Domain::indices(3).unwrap();
        let w = Workload::parse_json("[[1,0,0],[0,1,0],[0,0,1]]", &d).unwrap();
        assert!(w.is_identity());
        assert!((w.max_column_norm() - 1.0).abs() < 1e-15);
        assert_eq!(w.l2_sensitivity(), (std::f64::consts::SQRT_2, true));
        // Columns (1, 0), (0, 1), (1, 1), (−1, 0): diameter ‖(1, 1) − (−1, 0)‖ = √5 < 2r = 2√2.
        let g = Workload::from_rows(
            vec!["a".into(), "b".into()],
            4,
            vec![vec![1.0, 0.0, 1.0, -1.0], vec![0.0, 1.0, 1.0, 0.0]],
        )
        .unwrap();
        let (delta, exact) = g.l2_sensitivity();
        assert!(exact && (delta - 5f64.sqrt()).abs() < 1e-15, "{delta}");
        let c = Workload::parse_csv("# a comment\nname,a,b,c\nfirst,1,1,0\n0,0.5,2\n", 3).unwrap();
        assert_eq!((c.queries(), c.name(0), c.name(1)), (2, "first", "q1"));
        assert_eq!(c.row(1), &[0.0, 0.5, 2.0]);
        assert!(Workload::prefix(&d).unwrap().row(1) == [1.0, 1.0, 0.0]);
        let big = Domain::indices(10_000).unwrap();
        let e = Workload::identity(&big).unwrap_err().to_string();
        assert!(e.contains("10000 × 10000") && e.contains("at most"), "{e}");
    }

    #[test]
    fn bad_workloads_get_clear_errors() {
        let d = two();
        let msg = |r: Result<Workload>| r.unwrap_err().to_string();
        let e = msg(Workload::parse_json(r#"{"matrix": [[1,0,0]]}"#, &d));
        assert!(e.contains("3 columns") && e.contains("J = 6"), "{e}");
        let e = msg(Workload::parse_csv("1,0,0\n", 6));
        assert!(e.contains("CSV line 1") && e.contains("3 values") && e.contains("J = 6"), "{e}");
        let e = msg(Workload::parse_json(r#"{"queries": [{"in": ["F"], "attribute": "race"}]}"#, &d));
        assert!(e.contains("queries[0].attribute") && e.contains("race") && e.contains("sex, age"), "{e}");
        let e = msg(Workload::parse_json(r#"{"queries": [{"in": ["F"]}]}"#, &d));
        assert!(e.contains("missing"), "{e}");
        let e = msg(Workload::parse_json(r#"{"queries": [{"in": ["X"], "attribute": "sex"}]}"#, &d));
        assert!(e.contains("\"X\"") && e.contains("[F, M]"), "{e}");
        let e = msg(Workload::parse_json(r#"{"queries": [{"range": [2, 1], "attribute": "age"}]}"#, &d));
        assert!(e.contains("a <= b"), "{e}");
        let e = msg(Workload::parse_json(r#"{"queries": [{"range": [0, 1], "in": ["F"]}]}"#, &d));
        assert!(e.contains("exactly one"), "{e}");
        let e = msg(Workload::parse_json(r#"{"queries": [{"weights": [1, 2]}]}"#, &d));
        assert!(e.contains("2 entries") && e.contains("J = 6"), "{e}");
        let e = msg(Workload::parse_json("{not json", &d));
        assert!(e.contains("valid JSON"), "{e}");
        let e = msg(Workload::parse_json(r#"{"queries": []}"#, &d));
        assert!(e.contains("at least one query"), "{e}");
    }
}
