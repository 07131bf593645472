//! `range2d`: two numeric attributes (x, y), each discretized to `2^L` equal-width bins over its
//! [min, max], collected through a quadtree of grids ([`Grid2d`]: the 1-D hierarchical
//! histograms with branching 4 over the `4^L` cells in Morton order). Rectangles are asked at
//! query time ([`Query::rects`]); the document holds the finest grid as a heatmap.
//!
//! A device maps each value to [-1, 1] with the schema, takes bins [`bin_of_unit`]`(t, 2^L)` and
//! reports its cell's Morton code through the hierarchy (its level drawn by itself, uniformly;
//! one report at the full ε). Reports, aggregator, save/merge are the `range` task's `hh` ones
//! ([`HhReport`], wire kind 20).
//!
//! # Cost of an estimate
//! The level oracles' estimates and the consistent leaves (O(4^L)), then one adjoint pass of the
//! constrained inference per answer (O(4^L) each): the heatmap's standard errors cost O(16^L),
//! about 22·10^6 node visits at L = 6 ([`MAX_GRID_LEVELS`]).

use crate::erased::{Task, TaskAggregator, Typed, encode_to};
use crate::input::{Input, unit};
use crate::range::{numeric_field, simulate_typed};
use crate::simulate::at_device;
use crate::text::Truth;
use harmony_analytics::range::grid2d::MAX_GRID_LEVELS;
use harmony_analytics::range::{Grid2d, GridAnswers, HhAggregator, HhReport, RangeEstimator, bin_of_unit};
use harmony_core::aggregate::Aggregator;
use harmony_core::error::{Error, Result};
use harmony_core::randomizer::Randomizer;
use harmony_core::schema::Schema;
use harmony_core::wire::{self, WireReport};
use harmony_protocol::estimates::{Est, Query, Range2dEstimate, RectResult, TaskEstimate};
use harmony_protocol::spec::{Range2dSpec, TaskSpec};
use harmony_protocol::{CollectionConfig, MAX_REPORT_BYTES};
use rand::Rng;

/// Levels L when the spec gives none (a 32 × 32 grid).
pub const DEFAULT_LEVELS: usize = 5;

/// The spec's levels (default [`DEFAULT_LEVELS`]), checked.
fn levels_of(spec: &Range2dSpec) -> Result<usize> {
    let l = spec.levels.unwrap_or(DEFAULT_LEVELS);
    if !(1..=MAX_GRID_LEVELS).contains(&l) {
        return Err(Error::param("task.levels", l, format!("an integer in [1, {MAX_GRID_LEVELS}]")));
    }
    Ok(l)
}

/// The spec of `x` × `y` at `levels` (default [`DEFAULT_LEVELS`] when resolved): what the CLI
/// sends.
pub fn task_spec(x: &str, y: &str, levels: Option<usize>) -> TaskSpec {
    TaskSpec::Range2d(Range2dSpec { x: x.to_string(), y: y.to_string(), levels })
}

/// Checks a spec against the schema and ε and writes out `levels`.
pub fn resolve(spec: &Range2dSpec, schema: &Schema, epsilon: f64) -> Result<Range2dSpec> {
    numeric_field(schema, "task.x", &spec.x)?;
    numeric_field(schema, "task.y", &spec.y)?;
    if spec.x == spec.y {
        return Err(Error::param("task.y", &spec.y, format!("an attribute other than task.x ({})", spec.x)));
    }
    let levels = levels_of(spec)?;
    let bytes = Grid2d::new(epsilon, levels)?.hierarchy().max_report_bytes();
    if bytes > MAX_REPORT_BYTES {
        return Err(Error::param("task.levels", levels, format!("fewer levels: a report takes up to {bytes} bytes")));
    }
    Ok(Range2dSpec { x: spec.x.clone(), y: spec.y.clone(), levels: Some(levels) })
}

/// One axis: the attribute's index, name and [min, max].
#[derive(Debug, Clone)]
struct Axis {
    index: usize,
    name: String,
    bounds: [f64; 2],
}

/// The `range2d` task.
#[derive(Debug)]
pub struct Range2dTask {
    config: CollectionConfig,
    axes: [Axis; 2],
    grid: Grid2d,
}

impl Range2dTask {
    /// Builds the randomizer of a resolved `range2d` config.
    pub fn new(config: CollectionConfig) -> Result<Self> {
        let TaskSpec::Range2d(spec) = &config.task else {
            return Err(Error::param("task", config.task.kind().name(), "range2d"));
        };
        let schema = config.schema()?;
        let axis = |field: &'static str, name: &String| {
            numeric_field(schema, field, name).map(|(index, bounds)| Axis { index, name: name.clone(), bounds })
        };
        let axes = [axis("task.x", &spec.x)?, axis("task.y", &spec.y)?];
        let grid = Grid2d::new(config.epsilon, levels_of(spec)?)?;
        Ok(Range2dTask { config, axes, grid })
    }
    /// The x attribute's name.
    pub fn x(&self) -> &str {
        &self.axes[0].name
    }
    /// The y attribute's name.
    pub fn y(&self) -> &str {
        &self.axes[1].name
    }
    /// Bins per axis, `2^L`.
    pub fn side(&self) -> usize {
        self.grid.side()
    }
    /// A device's bins `(x bin, y bin)`, or an error naming the attribute.
    pub fn bins(&self, input: &Input<'_>) -> Result<(usize, usize)> {
        let record = input.record("range2d")?;
        let bin = |a: &Axis| {
            let t = unit(record, a.index, &a.name)?;
            bin_of_unit(t, self.side())
                .ok_or_else(|| Error::input(a.name.as_str(), t, "a numeric value mapped to [-1, 1]"))
        };
        Ok((bin(&self.axes[0])?, bin(&self.axes[1])?))
    }
    /// A device's Morton cell.
    fn cell(&self, input: &Input<'_>) -> Result<usize> {
        let (ix, iy) = self.bins(input)?;
        self.grid.cell(ix, iy)
    }
    /// The bin edge nearest v (in the axis' units), within [0, 2^L].
    fn nearest_edge(&self, axis: usize, v: f64) -> usize {
        let [lo, hi] = self.axes[axis].bounds;
        let side = self.side() as f64;
        ((v - lo) / (hi - lo) * side).round().clamp(0.0, side) as usize
    }
    /// The estimate document from an aggregator of this task.
    fn document(&self, agg: &HhAggregator, query: &Query) -> Result<Range2dEstimate> {
        let side = self.side();
        let rect_bins: Vec<[usize; 4]> = query
            .rects
            .iter()
            .map(|r| {
                [
                    self.nearest_edge(0, r[0]),
                    self.nearest_edge(0, r[1]),
                    self.nearest_edge(1, r[2]),
                    self.nearest_edge(1, r[3]),
                ]
            })
            .collect();
        let est = agg.estimate().ok();
        let (heatmap, shares) = match &est {
            None => (vec![Est::NONE; side * side], vec![Est::NONE; rect_bins.len()]),
            Some(e) => {
                // Plug-in cell fractions in Morton order.
                let answers = GridAnswers::new(self.grid.levels(), e, &e.plug_in_freqs())?;
                let heat = answers.heatmap().into_iter().map(|(v, var)| Est::new(v, var.max(0.0).sqrt())).collect();
                let shares = rect_bins
                    .iter()
                    .map(|b| {
                        let (v, p) = answers.rect([b[0], b[1]], [b[2], b[3]])?;
                        Ok(Est::new(v, (p.noise + p.split).max(0.0).sqrt()))
                    })
                    .collect::<Result<_>>()?;
                (heat, shares)
            }
        };
        let mut doc = Range2dEstimate {
            x: self.axes[0].name.clone(),
            y: self.axes[1].name.clone(),
            bins: side,
            x_bounds: self.axes[0].bounds,
            y_bounds: self.axes[1].bounds,
            level_reports: agg.counts(),
            heatmap: heatmap.chunks(side).map(<[Est]>::to_vec).collect(),
            rects: query
                .rects
                .iter()
                .zip(rect_bins)
                .zip(shares)
                .map(|((&rect, bins), share)| RectResult { rect, bins, share })
                .collect(),
            in_domain_note: None,
            warnings: Vec::new(),
        };
        in_domain(&mut doc, agg.count());
        Ok(doc)
    }
    /// The true share of devices in each finest cell (`iy · 2^L + ix`).
    pub fn truth(&self, inputs: &[Input<'_>]) -> Result<Truth> {
        let side = self.side();
        let mut cells = vec![0.0; side * side];
        for input in inputs {
            let (ix, iy) = self.bins(input)?;
            cells[iy * side + ix] += 1.0;
        }
        let n = inputs.len().max(1) as f64;
        cells.iter_mut().for_each(|c| *c /= n);
        Ok(Truth::Grid { cells })
    }
}

/// The true share in bins `[x_a, x_b) × [y_a, y_b)` of the cells of a [`Truth::Grid`].
pub fn true_rect(cells: &[f64], side: usize, b: [usize; 4]) -> f64 {
    (b[2]..b[3]).flat_map(|iy| (b[0]..b[1]).map(move |ix| cells[iy * side + ix])).sum()
}

/// The document's (estimate, truth) pairs: every cell, then every rectangle.
pub fn truth_pairs<'a>(r: &'a Range2dEstimate, cells: &[f64]) -> Vec<(&'a Est, f64)> {
    if cells.len() != r.bins * r.bins {
        return Vec::new();
    }
    let heat = r.heatmap.iter().flatten().zip(cells.iter().copied());
    heat.chain(r.rects.iter().map(|x| (&x.share, true_rect(cells, r.bins, x.bins)))).collect()
}

impl Task for Range2dTask {
    fn config(&self) -> &CollectionConfig {
        &self.config
    }
    fn randomize(&self, input: &Input<'_>, rng: &mut dyn Rng, out: &mut Vec<u8>) -> Result<()> {
        let c = self.cell(input)?;
        encode_to(&self.grid.hierarchy().randomize(&c, rng)?, out);
        Ok(())
    }
    fn validate(&self, report: &[u8]) -> Result<()> {
        self.grid.hierarchy().validate(&wire::decode::<HhReport>(report)?)
    }
    fn aggregator(&self) -> Box<dyn TaskAggregator> {
        Box::new(Typed::wire(self.grid.hierarchy().aggregator()))
    }
    fn estimate(&self, agg: &dyn TaskAggregator, query: &Query) -> Result<TaskEstimate> {
        Ok(TaskEstimate::Range2d(self.document(Typed::<HhAggregator>::of(agg)?, query)?))
    }
    fn simulate(&self, inputs: &[Input<'_>], seed: u64, first: u64) -> Result<Box<dyn TaskAggregator>> {
        let mut cells = Vec::with_capacity(inputs.len());
        for (i, input) in inputs.iter().enumerate() {
            cells.push(self.cell(input).map_err(|e| at_device(e, first + i as u64))?);
        }
        let h = self.grid.hierarchy();
        Ok(Box::new(Typed::wire(simulate_typed(h, h.aggregator(), &cells, seed, first)?)))
    }
}

/// The wire kinds of this task's reports.
pub const REPORT_KINDS: [harmony_core::wire::WireKind; 1] = [HhReport::KIND];

/// The document in its domain: cells' and rectangles' shares clamped to [0, 1]; warns on the
/// largest standard error of a cell or a rectangle.
fn in_domain(doc: &mut Range2dEstimate, reports: u64) {
    use crate::domain::{clamp, max_se, note};
    let mut clamped = false;
    for e in doc.heatmap.iter_mut().flatten().chain(doc.rects.iter_mut().map(|r| &mut r.share)) {
        clamped |= clamp(e, 0.0, 1.0);
    }
    doc.in_domain_note = note(&[(clamped, "cells' and rectangles' shares clamped to [0, 1]")]);
    let se = max_se(doc.heatmap.iter().flatten().chain(doc.rects.iter().map(|r| &r.share)));
    let subject = format!("{} × {}", doc.x, doc.y);
    doc.warnings.extend(harmony_protocol::estimates::PrecisionWarning::check(&subject, se, 1.0, reports));
}
