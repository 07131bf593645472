// The trend panel of a collection with time buckets: a window picker (from/to dates, the whole
// span by default), an estimate picker fed from the estimate documents, the estimate per period
// with its 95% CI band (GET …/series), and the changes between consecutive periods (GET
// …/compare for each pair) flagged under the Holm–Bonferroni rule over the comparisons shown
// (changes.js), listed under the chart and marked on it. A collection without time buckets
// (rounds: the API answers 501) shows no panel.
import { el, fmt } from './format.js';
import { windowed } from './api.js';
import { renderFigures } from './figure.js';
import { estimatesOf, holm, RULE } from './changes.js';

/** The trend is asked again on a live refresh at most this often, when the count changed. */
export const TREND_MS = 30000;
/** Comparisons asked at once. */
const PARALLEL = 6;

const day = (iso) => iso.slice(0, 10);
/** The date input of a window's end: the day of `iso`, or the next one when `iso` is not midnight. */
function endDay(iso) {
  if (iso.endsWith('T00:00:00Z')) return day(iso);
  return new Date(Date.parse(`${day(iso)}T00:00:00Z`) + 86400000).toISOString().slice(0, 10);
}
const periodLabel = (iso, period) => (period === 'hour' ? iso.slice(0, 16).replace('T', ' ') : day(iso));

/** `f` over `items`, PARALLEL at a time, in order. */
async function inBatches(items, f) {
  const out = [];
  for (let i = 0; i < items.length; i += PARALLEL) out.push(...await Promise.all(items.slice(i, i + PARALLEL).map(f)));
  return out;
}

/** The series of the window and the comparison of each point with the previous one. */
async function load(id, from, to) {
  const series = await windowed(id, 'series', { from, to });
  const pts = series.points;
  const comps = await inBatches(pts.slice(1).map((b, i) => [pts[i], b]),
    ([a, b]) => windowed(id, 'compare', { a_from: a.from, a_to: a.to, b_from: b.from, b_to: b.to }));
  return { period: series.period, points: pts, comps };
}

/** The rows of the chart and the changes for estimate `path`. */
export function trendRows(data, path) {
  const rows = data.points.map((p) => {
    const e = estimatesOf(p.document).find((x) => x.path === path)?.est;
    return { period: p.from, date: periodLabel(p.from, data.period), reports: p.document.reports,
      estimate: e?.estimate ?? null, se: e?.std_error ?? null, ci_lo: e?.ci95?.[0] ?? null, ci_hi: e?.ci95?.[1] ?? null,
      change: null, z: null, flagged: false };
  });
  const diffs = data.comps.map((c, i) => {
    const d = c.differences.find((x) => x.path === path);
    return d ? { ...d, row: rows[i + 1], prev: rows[i].date } : null;
  }).filter(Boolean);
  const flags = holm(diffs.map((d) => d.p));
  diffs.forEach((d, i) => {
    Object.assign(d.row, { change: d.difference, z: d.z, flagged: flags[i] });
    d.flagged = flags[i];
  });
  return { rows, diffs };
}

/** The Vega-Lite figure of the rows (figure.js): CI band, line and points, flagged periods marked. */
function trendFigure(rows, label, period) {
  const flagged = [{ filter: 'datum.flagged' }];
  const y = (field) => ({ field, type: 'quantitative', title: `${label} (95% CI)`, scale: { zero: false } });
  return { id: 'trend', title: `${label} per ${period}`,
    note: 'Shaded: the 95% CI of each period’s estimate. Red: a change from the previous period flagged by the rule below.',
    spec: { height: 240, data: { values: rows.filter((r) => r.estimate !== null) },
      encoding: { x: { field: 'period', type: 'temporal', title: `${period} (UTC)`, scale: { type: 'utc' },
        axis: { format: period === 'hour' ? '%m-%d %H:%M' : '%Y-%m-%d', labelAngle: -30 } } },
      layer: [
        { mark: { type: 'area', opacity: 0.25, color: '#4c78a8' }, encoding: { y: y('ci_lo'), y2: { field: 'ci_hi' } } },
        { mark: { type: 'line', point: true, tooltip: true, color: '#1f4e79' }, encoding: { y: y('estimate') } },
        { transform: flagged, mark: { type: 'rule', color: '#a40000', strokeDash: [4, 3] } },
        { transform: flagged, mark: { type: 'point', shape: 'diamond', size: 180, filled: true, color: '#a40000', tooltip: true },
          encoding: { y: y('estimate') } },
      ] },
    columns: [{ key: 'date', label: period }, { key: 'reports', label: 'reports' }, { key: 'estimate', label: 'estimate', num: true },
      { key: 'se', label: 'SE', num: true }, { key: 'ci_lo', label: '95% CI low', num: true }, { key: 'ci_hi', label: '95% CI high', num: true },
      { key: 'change', label: 'change from previous', num: true }, { key: 'z', label: 'z', num: true, digits: 2 },
      { key: 'flag', label: 'flagged' }],
    rows: rows.map((r) => ({ ...r, flag: r.flagged ? 'yes' : '' })) };
}

/** The list items of the flagged changes. */
function changeItems(diffs) {
  return diffs.filter((d) => d.flagged).map((d) => el('li', { 'data-date': d.row.date,
    text: `${d.row.date}: ${d.difference >= 0 ? '+' : '−'}${fmt(Math.abs(d.difference))} ± ${fmt(d.std_error)} `
      + `(z ${d.z.toFixed(2)}, p ${d.p.toExponential(2)}) from ${d.prev}` }));
}

/** The panel's elements (hidden until a series answers). */
function panelNodes() {
  const from = el('input', { id: 'trend-from', name: 'from', type: 'date' });
  const to = el('input', { id: 'trend-to', name: 'to', type: 'date' });
  const pick = el('select', { id: 'trend-estimate', name: 'estimate' });
  const form = el('form', { id: 'trend-window', class: 'controls' },
    el('label', { for: 'trend-from', text: 'From' }), from, el('label', { for: 'trend-to', text: 'To (exclusive)' }), to,
    el('button', { type: 'submit', text: 'Show window' }), el('label', { for: 'trend-estimate', text: 'Estimate' }), pick);
  const nodes = { from, to, pick, form, chart: el('div', { id: 'trend-chart' }), error: el('p', { id: 'trend-error', class: 'error', role: 'alert' }),
    changes: el('ul', { id: 'changes', class: 'notes' }), summary: el('p', { id: 'changes-summary', class: 'note', 'aria-live': 'polite' }) };
  nodes.section = el('section', { id: 'trend', 'aria-labelledby': 'trend-h', hidden: true },
    el('h2', { id: 'trend-h', text: 'Trend' }), form, nodes.error, nodes.chart,
    el('h3', { text: 'Changes between consecutive periods' }), el('p', { class: 'note', id: 'changes-rule', text: `Flagged: ${RULE}. z and SE from GET …/compare (independent windows).` }),
    nodes.summary, nodes.changes);
  return nodes;
}

/** The trend panel of collection `id`: {node, update(reports)} (update: a live refresh saw `reports`). */
export function trendPanel(id) {
  const n = panelNodes();
  const state = { data: null, reports: -1, at: 0, busy: false, again: false, off: false };
  async function draw() {
    const { data } = state;
    const paths = new Map();
    for (const p of data.points) for (const e of estimatesOf(p.document)) if (!paths.has(e.path)) paths.set(e.path, e.label);
    const keep = n.pick.value;
    n.pick.replaceChildren(...[...paths].map(([path, label]) => el('option', { value: path, text: label })));
    if (paths.has(keep)) n.pick.value = keep;
    const path = n.pick.value;
    const { rows, diffs } = trendRows(data, path);
    const flagged = changeItems(diffs);
    n.changes.replaceChildren(...flagged);
    n.summary.textContent = `${diffs.length} comparisons, ${flagged.length} flagged.`;
    await renderFigures(n.chart, data.points.length ? [trendFigure(rows, paths.get(path) ?? path, data.period)] : []);
    if (!data.points.length) n.chart.replaceChildren(el('p', { class: 'note', text: 'No reports in this window.' }));
    Object.assign(n.section.dataset, { points: String(rows.length), flagged: flagged.map((f) => f.dataset.date).join(' '), estimate: path });
  }
  async function fetchAndDraw() {
    if (state.off) return;
    // A window asked while another loads is asked when that one is drawn.
    if (state.busy) { state.again = true; return; }
    state.busy = true;
    n.error.textContent = '';
    try {
      state.data = await load(id, n.from.value, n.to.value);
      const pts = state.data.points;
      if (pts.length && !n.from.value && !n.to.value) {
        n.from.value = day(pts[0].from);
        n.to.value = endDay(pts[pts.length - 1].to);
      }
      n.section.hidden = false;
      await draw();
      n.section.dataset.state = 'shown';
    } catch (e) {
      // No time buckets (rounds; a store without buckets): no panel, and no error.
      if (e.status === 501) { state.off = true; n.section.hidden = true; n.section.dataset.state = 'off'; return; }
      n.section.hidden = false;
      n.section.dataset.state = 'error';
      n.error.textContent = e.status ? `${e.status} ${e.field}: ${e.serverMessage}` : e.message;
    } finally {
      Object.assign(state, { busy: false, at: Date.now() });
      if (state.again) { state.again = false; fetchAndDraw(); }
    }
  }
  n.form.addEventListener('submit', (e) => { e.preventDefault(); fetchAndDraw(); });
  n.pick.addEventListener('change', () => state.data && draw());
  return { node: n.section, update(reports) {
    if (reports === state.reports || (state.at && Date.now() - state.at < TREND_MS)) return;
    state.reports = reports;
    fetchAndDraw();
  } };
}
