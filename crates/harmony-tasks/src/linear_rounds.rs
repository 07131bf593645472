//! `linear-queries` with `mechanism: "adaptive-rounds"`: Bassily's adaptive queries
//! (harmony-analytics' [`AdaptiveQuery`]) answered in rounds, as `train` runs. Round t asks query
//! q_t of `batch_size` devices, each answering once with Duchi's 1-bit mechanism on q_t\[v\]/r_t;
//! when round t is full the next round opens with query t + 1 if the analyst has posted it, and
//! the analyst may choose it after reading the answers to queries ≤ t (the groups are disjoint:
//! a device answers once per collection, so query t + 1 never reaches a device that answered an
//! earlier one).
//!
//! [`QueryRounds`] is the pure state machine (the queries, one group accumulator per round) and
//! the task's accumulator: the server adds storage around it, `harmony simulate` runs it in
//! process with every query given up front (device i answers round ⌊i/batch_size⌋ + 1).
//!
//! # The round rule
//! The current round is the first one with fewer than `batch_size` answers, else the last one
//! (full: closed until the analyst posts the next query). A device answers the current round
//! only, while it is open; a query can be posted only when every round is full, so rounds never
//! overlap and the answers to query t are all in before query t + 1 is chosen.

use crate::erased::{TaskAggregator, encode_to};
pub use harmony_analytics::linear::QueryBitReport;
use harmony_analytics::linear::{AdaptiveAggregator, AdaptiveQuery, Domain, Workload};
use harmony_core::error::{Error, Result, Shown};
use harmony_core::state::{SaveState, StateReader, StateWriter, save_all};
use harmony_core::wire;
use harmony_protocol::QueryRound;
use harmony_protocol::estimates::{Est, LinearEstimate, LinearResult};
use rand::Rng;
use serde_json::Value as Json;
use std::any::Any;
use std::sync::Arc;

/// One round's query: as posted (JSON), its name and its randomizer.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundQuery {
    /// The query object as the analyst gave it.
    pub json: Json,
    /// Its name (`"name"`, else its JSON text).
    pub name: String,
    /// Duchi's 1-bit mechanism on q\[v\]/r.
    pub query: AdaptiveQuery,
}

/// Parses one query object over `domain` under budget ε; errors name `field`.
pub fn parse_query(json: &Json, domain: &Domain, epsilon: f64, field: &'static str) -> Result<RoundQuery> {
    let one = serde_json::json!({ "queries": [json] });
    let w = Workload::parse_json(&one.to_string(), domain).map_err(|e| renamed(field, e))?;
    let query = AdaptiveQuery::new(epsilon, w.row(0)).map_err(|e| renamed(field, e))?;
    Ok(RoundQuery { json: json.clone(), name: w.name(0).to_string(), query })
}

/// An analytics error as one of `field`, keeping its inner name (`queries[0].range`) and value.
fn renamed(field: &'static str, e: Error) -> Error {
    match e {
        Error::InvalidInput { name, value, expected } | Error::InvalidReport { field: name, value, expected } => {
            let name = name.replace("queries[0]", "query");
            Error::InvalidParameter { name: field, value: Shown(format!("{name} is {value}")), expected }
        }
        other => other,
    }
}

/// The query objects of an `adaptive-rounds` spec's workload (`{"queries": [Q, …]}`, at least
/// one); errors name `task.workload`.
pub fn spec_queries(workload: &Json) -> Result<Vec<Json>> {
    let expected = "{\"queries\": [Q, ...]} with at least one query object (adaptive-rounds posts each later query)";
    match workload.get("queries") {
        Some(Json::Array(qs)) if !qs.is_empty() && workload.get("matrix").is_none() => Ok(qs.clone()),
        _ => Err(Error::param("task.workload", Shown(preview(workload)), expected)),
    }
}

fn preview(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 60 { format!("{}…", &s[..s.floor_char_boundary(57)]) } else { s }
}

/// The rounds of one collection: the queries so far and each round's answers (see the module
/// docs for the round rule). Order matters, so rounds do not merge.
#[derive(Debug, Clone)]
pub struct QueryRounds {
    domain: Arc<Domain>,
    epsilon: f64,
    batch_size: u64,
    queries: Vec<RoundQuery>,
    groups: Vec<AdaptiveAggregator>,
}

impl QueryRounds {
    /// Rounds for `queries` (at least one) over `domain`, `batch_size` ≥ 1 devices each, nothing
    /// answered yet. Errors name `task.workload` / `task.batch_size`.
    pub fn new(domain: Arc<Domain>, epsilon: f64, batch_size: u64, queries: &[Json]) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::param("task.batch_size", 0, "an integer >= 1 (the devices that answer each query)"));
        }
        if queries.is_empty() {
            return Err(Error::param("task.workload", "no queries", "at least one query (round 1's)"));
        }
        let mut r = QueryRounds { domain, epsilon, batch_size, queries: Vec::new(), groups: Vec::new() };
        for q in queries {
            r.append(parse_query(q, &r.domain, epsilon, "task.workload")?);
        }
        Ok(r)
    }
    fn append(&mut self, q: RoundQuery) {
        self.groups.push(q.query.aggregator());
        self.queries.push(q);
    }
    /// The queries so far (query t − 1 is round t's).
    pub fn queries(&self) -> &[RoundQuery] {
        &self.queries
    }
    /// Devices per round.
    pub fn batch_size(&self) -> u64 {
        self.batch_size
    }
    /// The current round (1-based): the first with fewer than `batch_size` answers, else the last.
    pub fn round(&self) -> u64 {
        let t = self.groups.iter().position(|g| g.count() < self.batch_size).unwrap_or(self.groups.len() - 1);
        t as u64 + 1
    }
    /// Answers received in round `round` (0 for a round that does not exist).
    pub fn received(&self, round: u64) -> u64 {
        round.checked_sub(1).and_then(|t| self.groups.get(t as usize)).map_or(0, AdaptiveAggregator::count)
    }
    /// Whether the current round takes answers.
    pub fn open(&self) -> bool {
        self.received(self.round()) < self.batch_size
    }
    /// `GET …/query`: the current round.
    pub fn state(&self) -> QueryRound {
        let round = self.round();
        let q = &self.queries[round as usize - 1];
        QueryRound {
            round,
            name: q.name.clone(),
            query: q.json.clone(),
            scale: q.query.scale(),
            batch_size: self.batch_size,
            received: self.received(round),
            open: self.open(),
        }
    }
    /// Why a report is not one for the open round (`round` names it), or `Ok`.
    pub fn check(&self, r: &QueryBitReport) -> Result<()> {
        let (round, asked) = (self.round(), r.query as u64 + 1);
        if !self.open() {
            let expected = format!(
                "no answer: round {round} is full ({} answers); the analyst's next query opens round {}",
                self.batch_size,
                round + 1
            );
            return Err(Error::report("round", asked, expected));
        }
        if asked != round {
            return Err(Error::report("round", asked, format!("the open round {round} (query index {})", round - 1)));
        }
        Ok(())
    }
    /// Adds one device's answer to the open round; returns whether it filled the round. Errors:
    /// [`QueryRounds::check`]'s (nothing changes).
    pub fn answer(&mut self, r: &QueryBitReport) -> Result<bool> {
        self.check(r)?;
        let g = &mut self.groups[r.query as usize];
        g.add(r.positive);
        Ok(g.count() == self.batch_size)
    }
    /// Parses the analyst's next query (errors name `query`) without adding it.
    pub fn parse(&self, json: &Json) -> Result<RoundQuery> {
        parse_query(json, &self.domain, self.epsilon, "query")
    }
    /// Appends the next query, opening round d + 1. Errors: a round still open (`round` names
    /// it), a bad query (`query`).
    pub fn push(&mut self, json: &Json) -> Result<QueryRound> {
        if self.open() {
            let round = self.round();
            let expected = format!(
                "every round full before the next query: round {round} has {} of its {} answers",
                self.received(round),
                self.batch_size
            );
            return Err(Error::param("round", round, expected));
        }
        let q = self.parse(json)?;
        self.append(q);
        Ok(self.state())
    }
    /// A device's answer to `round` (its record's domain index v): Duchi's bit on q_t\[v\]/r_t
    /// with `rng`, encoded into `out`. Errors: a query that does not parse over the domain, a
    /// scale that is not the query's (the round was altered), v outside the domain.
    pub fn randomize(&self, round: &QueryRound, v: usize, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let q = self.parse(&round.query)?;
        if q.query.scale() != round.scale {
            let expected = format!("the query's max |q[v]| = {}", q.query.scale());
            return Err(Error::input("round.scale", round.scale, expected));
        }
        if round.round == 0 || round.round > u32::MAX as u64 {
            return Err(Error::input("round.round", round.round, "a round in [1, 2^32]"));
        }
        let positive = q.query.randomize(v, rng)?;
        encode_to(&QueryBitReport { query: (round.round - 1) as u32, positive }, out);
        Ok(())
    }
    /// Each query's smallest and largest weight: the range its answer lies in.
    pub fn weight_bounds(&self) -> Vec<[f64; 2]> {
        let bounds = |w: &[f64]| {
            [w.iter().copied().fold(f64::INFINITY, f64::min), w.iter().copied().fold(f64::NEG_INFINITY, f64::max)]
        };
        self.queries.iter().map(|q| bounds(q.query.weights())).collect()
    }
    /// The estimate document: every query's unbiased answer with its standard error (`null`
    /// before its round has an answer) and each round's answers.
    pub fn document(&self) -> LinearEstimate {
        let queries = self
            .queries
            .iter()
            .zip(&self.groups)
            .map(|(q, g)| LinearResult {
                name: q.name.clone(),
                answer: if g.count() == 0 { Est::NONE } else { Est::from_core(&g.estimate()) },
                projected: None,
            })
            .collect();
        LinearEstimate {
            mechanism: "adaptive-rounds".to_string(),
            domain_size: self.domain.size(),
            sigma: None,
            group_reports: self.groups.iter().map(AdaptiveAggregator::count).collect(),
            queries,
            projection_bound: None,
            in_domain_note: None,
            warnings: Vec::new(),
        }
    }
}

/// The query objects of a saved state and the bytes after them.
fn saved_queries(state: &[u8]) -> Result<(Vec<Json>, &[u8])> {
    let bad = |e: String| Error::Incompatible(format!("a saved query rounds state: {e}"));
    let (len, rest) = state.split_first_chunk::<8>().ok_or_else(|| bad("8 bytes of length expected".into()))?;
    let len = usize::try_from(u64::from_le_bytes(*len)).unwrap_or(usize::MAX);
    if len > rest.len() {
        return Err(bad(format!("queries of {len} bytes, only {} left", rest.len())));
    }
    let (text, rest) = rest.split_at(len);
    let queries = serde_json::from_slice(text).map_err(|e| bad(format!("queries: {e}")))?;
    Ok((queries, rest))
}

impl QueryRounds {
    /// Errors unless every round holds at most `batch_size` answers and none follows a round
    /// that is not full.
    fn check_rule(&self) -> Result<()> {
        let counts: Vec<u64> = self.groups.iter().map(AdaptiveAggregator::count).collect();
        let partial = counts.iter().position(|&n| n < self.batch_size).unwrap_or(counts.len());
        if counts.iter().any(|&n| n > self.batch_size) || counts[partial..].iter().skip(1).any(|&n| n > 0) {
            let expected = format!("at most {} per round, none after a round that is not full", self.batch_size);
            return Err(Error::param("round answers", Shown(format!("{counts:?}")), expected));
        }
        Ok(())
    }
}

impl TaskAggregator for QueryRounds {
    fn add(&mut self, report: &[u8]) -> Result<()> {
        self.answer(&wire::decode::<QueryBitReport>(report)?).map(|_| ())
    }
    fn merge(&mut self, _other: &dyn TaskAggregator) -> Result<()> {
        Err(Error::Incompatible("adaptive query rounds depend on the order of the answers: they do not merge".into()))
    }
    fn count(&self) -> u64 {
        self.groups.iter().map(AdaptiveAggregator::count).sum()
    }
    fn clone_box(&self) -> Box<dyn TaskAggregator> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    /// The queries (their JSON text, after its byte length) and each round's answer counts.
    fn save(&self, out: &mut Vec<u8>) -> Result<()> {
        let queries: Vec<&Json> = self.queries.iter().map(|q| &q.json).collect();
        let text = serde_json::to_vec(&queries).map_err(|e| Error::Incompatible(format!("query rounds: {e}")))?;
        let mut w = StateWriter(out);
        w.len(text.len());
        w.0.extend_from_slice(&text);
        save_all(&mut w, &self.groups);
        Ok(())
    }
    /// Folds in saved rounds: the query lists must agree where both have one (the longer list
    /// is kept), the answers of each round add, and the result must keep the round rule (at
    /// most `batch_size` per round, no answer after a round that is not full). Into a fresh
    /// accumulator a saved state loads as it is. All or nothing.
    fn merge_saved(&mut self, state: &[u8]) -> Result<()> {
        let (queries, rest) = saved_queries(state)?;
        let mut merged = self.clone();
        for (t, q) in queries.iter().enumerate() {
            match merged.queries.get(t) {
                Some(have) if have.json == *q => {}
                Some(have) => {
                    let expected = format!("query {} of these rounds, {}", t + 1, preview(&have.json));
                    return Err(Error::param("saved query", Shown(preview(q)), expected));
                }
                None => merged.append(merged.parse(q)?),
            }
        }
        let mut r = StateReader::new(rest);
        r.len_exactly("rounds", queries.len())?;
        merged.groups[..queries.len()].iter_mut().try_for_each(|g| g.merge_state(&mut r))?;
        r.finish()?;
        merged.check_rule()?;
        *self = merged;
        Ok(())
    }
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_core::sampling::fast_rng;
    use serde_json::json;

    fn rounds(batch: u64) -> QueryRounds {
        let dom = Arc::new(Domain::indices(4).unwrap());
        QueryRounds::new(dom, 1.0, batch, &[json!({"range": [0, 1]})]).unwrap()
    }

    fn bit(q: u32) -> QueryBitReport {
        QueryBitReport { query: q, positive: true }
    }

    /// The round rule: answers only to the open round, a query only when every round is full,
    /// errors naming `round`/`query`.
    #[test]
    fn round_rule() {
        let mut r = rounds(2);
        assert_eq!((r.round(), r.open()), (1, true));
        assert!(r.check(&bit(1)).unwrap_err().to_string().contains("round"));
        let e = r.push(&json!({"range": [0, 2]})).unwrap_err().to_string();
        assert!(e.contains("round") && e.contains("0 of its 2 answers"), "{e}");
        assert!(!r.answer(&bit(0)).unwrap());
        assert!(r.answer(&bit(0)).unwrap());
        assert_eq!((r.round(), r.open()), (1, false));
        let e = r.answer(&bit(0)).unwrap_err().to_string();
        assert!(e.contains("round 1 is full"), "{e}");
        assert!(r.push(&json!({"range": [0, 9]})).unwrap_err().to_string().contains("query"));
        let s = r.push(&json!({"name": "low", "weights": [1, 0.5, 0, -2]})).unwrap();
        assert_eq!((s.round, s.name.as_str(), s.scale, s.received, s.open), (2, "low", 2.0, 0, true));
        assert!(r.check(&bit(0)).unwrap_err().to_string().contains("the open round 2"));
        r.answer(&bit(1)).unwrap();
        assert_eq!(r.count(), 3);
        let d = r.document();
        assert_eq!(d.group_reports, vec![2, 1]);
        assert_eq!(d.queries[0].answer.estimate, Some(Est::from_core(&r.groups[0].estimate()).estimate.unwrap()));
        assert!(r.clone_box().merge(&r).is_err());
        assert!(QueryRounds::new(Arc::new(Domain::indices(4).unwrap()), 1.0, 0, &[json!({"range": [0, 1]})]).is_err());
    }

    /// A device's answer is the query's Duchi bit at the round's index, and a round whose scale
    /// was altered is refused.
    #[test]
    fn device_answers_the_round() {
        let r = rounds(5);
        let mut state = r.state();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        r.randomize(&state, 1, &mut fast_rng(3), &mut a).unwrap();
        let q = &r.queries()[0].query;
        let want = QueryBitReport { query: 0, positive: q.randomize(1, &mut fast_rng(3)).unwrap() };
        encode_to(&want, &mut b);
        assert_eq!(a, b);
        state.scale = 3.0;
        assert!(r.randomize(&state, 1, &mut fast_rng(3), &mut a).unwrap_err().to_string().contains("round.scale"));
    }

    /// Saved rounds load into fresh ones as the same state (queries, posted ones included, and
    /// every round's answers); two halves of the answers merge into the whole; states that
    /// break the round rule or disagree on a query are refused and change nothing.
    #[test]
    fn saved_rounds_load_and_halves_merge_into_the_whole() {
        let saved = |r: &QueryRounds| {
            let mut out = Vec::new();
            r.save(&mut out).unwrap();
            out
        };
        let mut whole = rounds(4);
        let (mut one, mut two) = (rounds(4), rounds(4));
        for (i, positive) in [true, false, true, true].into_iter().enumerate() {
            let a = QueryBitReport { query: 0, positive };
            whole.answer(&a).unwrap();
            if i % 2 == 0 {
                one.answer(&a).unwrap()
            } else {
                two.answer(&a).unwrap()
            };
        }
        let next = json!({"name": "high", "range": [2, 3]});
        whole.push(&next).unwrap();
        whole.answer(&QueryBitReport { query: 1, positive: false }).unwrap();
        let mut back = rounds(4);
        back.merge_saved(&saved(&whole)).unwrap();
        assert_eq!((back.queries(), &back.groups, back.state()), (whole.queries(), &whole.groups, whole.state()));
        assert_eq!(back.document(), whole.document());

        one.merge_saved(&saved(&two)).unwrap();
        assert_eq!((&one.groups, one.round(), one.open()), (&whole.groups[..1].to_vec(), 1, false));
        one.push(&next).unwrap();
        let mut tail = rounds(4);
        tail.merge_saved(&saved(&one)).unwrap();
        assert_eq!((tail.state(), tail.count()), (one.state(), 4));
        let before = one.clone();
        let e = one.merge_saved(&saved(&whole)).unwrap_err().to_string();
        assert!(e.contains("round answers") && e.contains("[8, 1]"), "{e}");
        assert_eq!((one.queries(), &one.groups), (before.queries(), &before.groups), "all or nothing");
        let other = QueryRounds::new(Arc::new(Domain::indices(4).unwrap()), 1.0, 4, &[json!({"range": [0, 2]})]);
        let e = other.unwrap().merge_saved(&saved(&whole)).unwrap_err().to_string();
        assert!(e.contains("saved query") && e.contains("query 1"), "{e}");
        assert!(rounds(4).merge_saved(&saved(&whole)[..5]).is_err());
    }

    /// A round whose answers are all the same bit (what anonymous posts filling a round send)
    /// still reports a positive standard error: at least r·√((C² − 1)/m).
    #[test]
    fn identical_answers_do_not_report_a_standard_error_of_zero() {
        let mut r = rounds(50);
        for _ in 0..50 {
            r.answer(&bit(0)).unwrap();
        }
        let q = &r.queries()[0].query;
        let floor = q.scale() * ((q.c() * q.c() - 1.0) / 50.0).sqrt();
        let se = r.document().queries[0].answer.std_error.unwrap();
        assert!(se >= floor * (1.0 - 1e-12) && floor > 0.0, "SE {se}, floor {floor}");
    }
}
