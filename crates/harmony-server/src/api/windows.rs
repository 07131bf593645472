//! Continuous collection's reads: the estimates of a window (`GET …/estimates?from=&to=`), a
//! series of one document per period (`GET …/series`) and the change between two windows
//! (`GET …/compare`). Every one is a merge of bucket states ([`crate::buckets`]), never a rescan.

use super::blocking;
use crate::buckets::{Period, Window, iso};
use crate::compare::{Difference, INDEPENDENCE, RULE};
use crate::error::ApiError;
use crate::state::{AppState, Collection};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use harmony_protocol::estimates::{EstimateDocument, Query};
use std::collections::HashMap;

/// Most points a series answers.
pub const MAX_POINTS: usize = 1_000;

/// Splits the parameters `names` off a query string: (their values, the rest, for
/// [`Query::parse`]). A repeated one is a 400 naming it.
pub fn split_params<'a>(raw: &'a str, names: &[&'a str]) -> Result<(HashMap<&'a str, &'a str>, String), ApiError> {
    let (mut mine, mut rest) = (HashMap::new(), Vec::new());
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match names.iter().find(|n| **n == k) {
            Some(n) => {
                if mine.insert(*n, v).is_some() {
                    return Err(ApiError::bad(*n, format!("{n} given twice, expected it at most once")));
                }
            }
            None => rest.push(pair),
        }
    }
    Ok((mine, rest.join("&")))
}

/// The bucket states of `c`: 501 without (rounds keep no state to save; a store without buckets).
fn require_buckets(c: &Collection) -> Result<std::sync::MutexGuard<'_, crate::buckets::Buckets>, ApiError> {
    c.buckets().ok_or_else(|| {
        let why = if c.bucketable() {
            "this server's store keeps no bucket states"
        } else {
            "its reports depend on their order (model or query rounds) and keep no mergeable state"
        };
        let msg = format!("collection {:?} has no time windows: {why}", c.config.id);
        ApiError::new(StatusCode::NOT_IMPLEMENTED, "collection", msg)
    })
}

/// The collection's period.
fn period_of(c: &Collection) -> Result<Period, ApiError> {
    Ok(require_buckets(c)?.period)
}

/// The estimate document of the reports received in `w`: the merge of its buckets.
pub fn window_document(c: &Collection, w: &Window, query: &Query) -> Result<EstimateDocument, ApiError> {
    let agg = require_buckets(c)?.window(c.task.as_ref(), w).map_err(|e| ApiError::from_core("", e))?;
    let result = c.task.estimate(agg.as_ref(), query).map_err(|e| ApiError::from_core("query: ", e))?;
    Ok(EstimateDocument { collection: c.config.id.clone(), reports: agg.count(), epsilon: c.config.epsilon, result })
}

/// `GET …/estimates` with `from` or `to`: the window's document (blocking).
pub fn estimates_in(
    st: &AppState,
    c: &Collection,
    from: Option<&str>,
    to: Option<&str>,
    query: &Query,
) -> Result<EstimateDocument, ApiError> {
    let w = Window::parse(period_of(c)?, ("from", from), ("to", to))?;
    c.settle(st.inner.store.as_ref(), true)?;
    window_document(c, &w, query)
}

/// One period of a series.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct SeriesPoint {
    /// The period's first instant (UTC, `YYYY-MM-DDTHH:MM:SSZ`).
    pub from: String,
    /// The first instant after it.
    pub to: String,
    /// The estimate document of the reports received in it.
    pub document: EstimateDocument,
}

/// `GET /v1/collections/{id}/series`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Series {
    /// The collection id.
    pub collection: String,
    /// The series' period: `hour`, `day` or `week`.
    pub period: String,
    /// One point per period holding reports, in time order (periods without reports are left
    /// out).
    pub points: Vec<SeriesPoint>,
}

/// The series of `c` per `period` over `w` (blocking).
fn series_of(c: &Collection, period: Period, w: &Window, query: &Query) -> Result<Series, ApiError> {
    let groups = {
        let b = require_buckets(c)?;
        if !b.period.divides(period) {
            let msg = format!(
                "period is {:?}, but this collection's buckets are {}s: a series' period is the collection's or longer",
                period.name(),
                b.period.name()
            );
            return Err(ApiError::bad("period", msg));
        }
        let mut groups: Vec<(i64, Box<dyn harmony_tasks::TaskAggregator>)> = Vec::new();
        for (start, s) in b.states.range(w.from..w.to) {
            let p = period.start(*start);
            if groups.last().is_none_or(|(q, _)| *q != p) {
                if groups.len() == MAX_POINTS {
                    let msg = format!(
                        "more than {MAX_POINTS} {}s hold reports: narrow the window with from and to",
                        period.name()
                    );
                    return Err(ApiError::bad("from", msg));
                }
                groups.push((p, c.task.aggregator()));
            }
            let agg = &mut groups.last_mut().expect("a group").1;
            agg.merge(s.as_ref()).map_err(|e| ApiError::from_core("", e))?;
        }
        groups
    };
    let mut points = Vec::with_capacity(groups.len());
    for (p, agg) in groups {
        let result = c.task.estimate(agg.as_ref(), query).map_err(|e| ApiError::from_core("query: ", e))?;
        let (collection, epsilon) = (c.config.id.clone(), c.config.epsilon);
        let document = EstimateDocument { collection, reports: agg.count(), epsilon, result };
        points.push(SeriesPoint { from: iso(p), to: iso(p + period.seconds()), document });
    }
    Ok(Series { collection: c.config.id.clone(), period: period.name().into(), points })
}

/// `GET /v1/collections/{id}/series?period=day&from=&to=`: one estimate document per period.
#[utoipa::path(get, path = "/v1/collections/{id}/series", operation_id = "getSeries", tag = "collections",
    security(("analyst" = [])),
    params(
        ("id" = String, Path, description = "The collection id"),
        ("period" = Option<String>, Query, description = "`hour`, `day` or `week`: the collection's period (the default) or a longer one"),
        ("from" = Option<String>, Query, description = "First instant (inclusive): an ISO date `YYYY-MM-DD` or a UTC timestamp `YYYY-MM-DDTHH:MM[:SS]Z` on a bucket boundary; absent: the first report"),
        ("to" = Option<String>, Query, description = "First instant after the window (exclusive), as `from`; absent: after the last report"),
        ("ranges" = Option<String>, Query, description = "`range`: as in getEstimates"),
        ("quantiles" = Option<String>, Query, description = "`range`: as in getEstimates")
    ),
    responses(
        (status = 200, description = "One estimate document per period holding reports, each number with its standard error and 95% CI", body = Series),
        (status = 400, description = "A bad period, instant or query parameter (the field names it), or more than 1,000 points", body = harmony_protocol::ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "A token of another collection, or the metrics token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 501, description = "The collection has no time windows (model or query rounds)", body = harmony_protocol::ErrorBody),
        (status = 503, description = "The collection is quarantined, or the store is unreachable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn series(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    st.check_reader(&headers, &id)?;
    let c = st.collection(&id)?;
    let raw = raw.unwrap_or_default();
    let body = blocking(move || {
        let (p, rest) = split_params(&raw, &["period", "from", "to"])?;
        let query = Query::parse(&rest).map_err(|(field, message)| ApiError::bad(field, message))?;
        let own = period_of(&c)?;
        let period = p.get("period").map(|v| crate::buckets::parse_period("period", v)).transpose()?.unwrap_or(own);
        let w = Window::parse(own, ("from", p.get("from").copied()), ("to", p.get("to").copied()))?;
        c.settle(st.inner.store.as_ref(), true)?;
        series_of(&c, period, &w, &query)
    })
    .await?;
    Ok(axum::Json(body).into_response())
}

/// One window of a comparison.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct WindowInfo {
    /// Its first instant (`null`: open).
    pub from: Option<String>,
    /// The first instant after it (`null`: open).
    pub to: Option<String>,
    /// Reports received in it.
    pub reports: u64,
}

/// `GET /v1/collections/{id}/compare`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Comparison {
    /// The collection id.
    pub collection: String,
    /// Window A (the baseline).
    pub a: WindowInfo,
    /// Window B.
    pub b: WindowInfo,
    /// What the standard errors assume about the two windows' devices.
    pub independence: String,
    /// The multiple-comparison rule that sets `significant`.
    pub rule: String,
    /// Every estimate with a standard error in both windows: `b − a`, its SE and z.
    pub differences: Vec<Difference>,
}

/// The comparison of windows `a` and `b` of `c` (blocking; `c` settled).
pub fn compare_windows(c: &Collection, a: &Window, b: &Window, query: &Query) -> Result<Comparison, ApiError> {
    if a.overlaps(b) {
        let msg = "windows A and B overlap: they share reports, so their estimates are not independent; compare disjoint windows";
        return Err(ApiError::bad("b_from", msg));
    }
    let (da, db) = (window_document(c, a, query)?, window_document(c, b, query)?);
    let json =
        |d: &EstimateDocument| serde_json::to_value(&d.result).map_err(|_| ApiError::internal("a document to JSON"));
    let differences = crate::compare::differences(&json(&da)?, &json(&db)?);
    let info = |w: &Window, reports| {
        let (from, to) = w.describe();
        WindowInfo { from, to, reports }
    };
    Ok(Comparison {
        collection: c.config.id.clone(),
        a: info(a, da.reports),
        b: info(b, db.reports),
        independence: INDEPENDENCE.into(),
        rule: RULE.into(),
        differences,
    })
}

/// `GET /v1/collections/{id}/compare?a_from=&a_to=&b_from=&b_to=`: is the change real?
#[utoipa::path(get, path = "/v1/collections/{id}/compare", operation_id = "getCompare", tag = "collections",
    security(("analyst" = [])),
    params(
        ("id" = String, Path, description = "The collection id"),
        ("a_from" = Option<String>, Query, description = "Window A (the baseline): first instant, as in getSeries (absent: open)"),
        ("a_to" = Option<String>, Query, description = "Window A: first instant after it (absent: open)"),
        ("b_from" = Option<String>, Query, description = "Window B: first instant (absent: open)"),
        ("b_to" = Option<String>, Query, description = "Window B: first instant after it (absent: open)"),
        ("ranges" = Option<String>, Query, description = "`range`: as in getEstimates"),
        ("quantiles" = Option<String>, Query, description = "`range`: as in getEstimates")
    ),
    responses(
        (status = 200, description = "Each estimate's difference between the windows with its standard error, z, p-value and Holm–Bonferroni significance", body = Comparison),
        (status = 400, description = "A bad or misaligned instant, overlapping windows, or a bad query parameter (the field names it)", body = harmony_protocol::ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = harmony_protocol::ErrorBody),
        (status = 403, description = "A token of another collection, or the metrics token", body = harmony_protocol::ErrorBody),
        (status = 404, description = "No such collection", body = harmony_protocol::ErrorBody),
        (status = 501, description = "The collection has no time windows (model or query rounds)", body = harmony_protocol::ErrorBody),
        (status = 503, description = "The collection is quarantined, or the store is unreachable: retry", body = harmony_protocol::ErrorBody)
    ))]
pub async fn compare(
    State(st): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    st.check_reader(&headers, &id)?;
    let c = st.collection(&id)?;
    let raw = raw.unwrap_or_default();
    let body = blocking(move || {
        let (p, rest) = split_params(&raw, &["a_from", "a_to", "b_from", "b_to"])?;
        let query = Query::parse(&rest).map_err(|(field, message)| ApiError::bad(field, message))?;
        let own = period_of(&c)?;
        let side = |from: &'static str, to: &'static str| {
            Window::parse(own, (from, p.get(from).copied()), (to, p.get(to).copied()))
        };
        let (a, b) = (side("a_from", "a_to")?, side("b_from", "b_to")?);
        c.settle(st.inner.store.as_ref(), true)?;
        compare_windows(&c, &a, &b, &query)
    })
    .await?;
    Ok(axum::Json(body).into_response())
}
