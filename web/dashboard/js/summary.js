// The answer first: one compact table of every estimate (the in-domain value where the server
// gives one, else the raw one; its 95% CI; the raw estimate beside it where they differ; the
// precision warning of its subject), small multiples under it (bars with error bars for
// categories, intervals for means and answers), or an explicit state when the collection is
// empty or too small to say anything (every subject carries a precision warning).
import { el, fmt } from './format.js';
import { renderFigures, withErrorBars } from './figure.js';

/** Rows of the summary table beyond this are left to the detailed figures below. */
export const MAX_ROWS = 80;

/** The value to show of an Est: in-domain where present, else raw; `raw` set when they differ. */
export function shown(e) {
  const d = e?.in_domain;
  const estimate = d ? d.estimate : (e?.estimate ?? null);
  const ci = d ? (d.ci95 ?? null) : (e?.ci95 ?? null);
  return { estimate, ci_lo: ci?.[0] ?? null, ci_hi: ci?.[1] ?? null, raw: d ? (e?.estimate ?? null) : null };
}

const row = (subject, item, e, kind) => ({ subject, item, kind, ...shown(e) });

function meansRows(doc) {
  return doc.attributes.flatMap((a) => (a.kind === 'numeric'
    ? [row(a.name, 'mean', a, 'interval')]
    : a.categories.map((c) => row(a.name, c.label, c, 'share'))));
}

function rangeRows(doc) {
  const quant = doc.quantiles.filter((q) => q.value).map((q) => ({ subject: doc.attribute, item: `quantile ${q.q}`, kind: 'quantile',
    estimate: null, text: `[${fmt(q.value[0], 2)}, ${fmt(q.value[1], 2)})`, ci_lo: q.interval?.[0] ?? null, ci_hi: q.interval?.[1] ?? null, raw: null }));
  const ranges = doc.ranges.map((r) => row(doc.attribute, `share in [${r.range[0]}, ${r.range[1]})`, r, 'share'));
  return [...quant, ...ranges];
}

function marginalRows(doc) {
  return doc.marginals.flatMap((m) => {
    const sizes = m.labels.map((l) => l.length);
    return m.cells.map((c, i) => {
      const idx = [];
      let rest = i;
      for (let k = sizes.length - 1; k >= 0; k--) { idx.unshift(rest % sizes[k]); rest = Math.floor(rest / sizes[k]); }
      return row(m.attributes.join(' × '), idx.map((j, k) => m.labels[k][j]).join(' · '), c, 'share');
    });
  });
}

/** range2d: the rectangles asked, then the 10 cells of largest share (the heatmap has them all). */
function rectRows(doc) {
  const subject = `${doc.x} × ${doc.y}`;
  const edge = ([lo, hi], t) => +(lo + ((hi - lo) * t) / doc.bins).toPrecision(6);
  const cells = doc.heatmap.flatMap((r, iy) => r.map((e, ix) => ({ e, ix, iy })))
    .filter((c) => c.e.estimate !== null).sort((a, b) => shown(b.e).estimate - shown(a.e).estimate).slice(0, 10)
    .map((c) => row(subject, `cell [${edge(doc.x_bounds, c.ix)}, ${edge(doc.x_bounds, c.ix + 1)}) × [${edge(doc.y_bounds, c.iy)}, ${edge(doc.y_bounds, c.iy + 1)})`, c.e, 'share'));
  return [...doc.rects.map((r) => row(subject, `share in [${r.rect[0]}, ${r.rect[1]}) × [${r.rect[2]}, ${r.rect[3]})`, r, 'share')), ...cells];
}

const ROWS = {
  means: meansRows,
  frequency: (doc) => doc.categories.map((c) => row(doc.attribute, c.label, c, 'share')),
  range: rangeRows,
  range2d: rectRows,
  'heavy-hitters': (doc) => doc.items.map((it) => row('heavy hitters', it.item ?? `(code ${it.code})`, it, 'share')),
  marginals: marginalRows,
  'linear-queries': (doc) => doc.queries.map((q) => row(q.name, 'answer', q, 'interval')),
};

/** Every estimate of the document as summary rows ([] for tasks without a summary: train). */
export function summaryRows(doc) {
  return ROWS[doc.task]?.(doc) ?? [];
}

/** 'empty' (no reports), 'too-small' (every subject warned), 'ok', or null (no summary). */
export function stateOf(doc, rows) {
  if (!ROWS[doc.task]) return null;
  if (!doc.reports) return 'empty';
  const warned = new Set((doc.warnings ?? []).map((w) => w.subject));
  const subjects = new Set(rows.map((r) => r.subject));
  const allWarned = subjects.size > 0 && [...subjects].every((s) => warned.has(s));
  return !rows.some((r) => r.estimate !== null || r.text) || allWarned ? 'too-small' : 'ok';
}

function summaryTable(rows, warned) {
  const cut = rows.slice(0, MAX_ROWS);
  return el('table', { class: 'numbers summary', id: 'summary-table' },
    el('caption', { text: 'Every estimate: in-domain value and 95% CI (raw unbiased estimate beside it where it differs)' }),
    el('thead', {}, el('tr', {}, ['subject', 'value', 'estimate', '95% CI', 'raw', 'note'].map((h) => el('th', { scope: 'col', text: h })))),
    el('tbody', {}, cut.map((r) => el('tr', { class: warned.has(r.subject) ? 'warned' : null },
      el('th', { scope: 'row', text: r.subject }), el('td', { text: r.item }),
      el('td', { class: 'num', text: r.text ?? fmt(r.estimate) }),
      el('td', { class: 'num', text: r.ci_lo === null ? '—' : `[${fmt(r.ci_lo)}, ${fmt(r.ci_hi)}]` }),
      el('td', { class: 'num', text: r.raw === null ? '' : fmt(r.raw) }),
      el('td', { text: warned.has(r.subject) ? 'imprecise' : '' })))),
    rows.length > cut.length ? el('tfoot', {}, el('tr', {}, el('td', { colspan: '6', text: `${rows.length - cut.length} more in the details below` }))) : null);
}

/** Small multiples: one small chart per subject (bars for shares, intervals otherwise). */
export function smallMultiples(rows) {
  const bySubject = new Map();
  for (const r of rows) if (r.estimate !== null && r.kind !== 'quantile') bySubject.set(r.subject, [...(bySubject.get(r.subject) ?? []), r]);
  return [...bySubject.entries()].slice(0, 24).map(([subject, rs], i) => {
    // Data keyed by fixed field names: a label or subject is only ever a data value or a title.
    const values = rs.slice(0, 30).map((r, k) => ({ label: r.item, order: k, estimate: r.estimate, ci_lo: r.ci_lo, ci_hi: r.ci_hi }));
    const share = rs[0].kind === 'share';
    const spec = withErrorBars(values, { x: 'label', mark: share ? 'bar' : 'point', horizontal: true, xTitle: '',
      yTitle: share ? 'share (95% CI)' : 'estimate (95% CI)', sort: { field: 'order', op: 'min' } });
    return { id: `small-${i}`, title: subject, small: true, spec: { width: 220, height: Math.max(24, 16 * values.length), ...spec },
      columns: [], rows: [] };
  });
}

function noteList(doc) {
  const items = [];
  if (doc.in_domain_note) items.push(el('li', { text: doc.in_domain_note }));
  for (const w of doc.warnings ?? []) items.push(el('li', { class: 'warning', text: w.message }));
  return items.length ? el('ul', { id: 'summary-notes', class: 'notes' }, items) : null;
}

/** Renders the summary of `doc` into `box`; returns the state ('empty', 'too-small', 'ok', null). */
export async function renderSummary(box, doc, id) {
  const rows = summaryRows(doc);
  const state = stateOf(doc, rows);
  if (state === null) { box.replaceChildren(); return null; }
  const warned = new Set((doc.warnings ?? []).map((w) => w.subject));
  const head = el('h2', { id: 'summary-h', text: 'Summary' });
  if (state === 'empty') {
    box.replaceChildren(head, el('div', { id: 'empty-state', class: 'state', role: 'status' },
      el('p', { text: 'No reports yet: nothing to estimate.' }),
      el('p', {}, 'Send some with ', el('code', { text: `harmony submit --server URL --collection ${id} --data FILE` }),
        ' or open the ', el('a', { href: `playground.html?collection=${encodeURIComponent(id)}`, text: 'device playground' }), '.')));
    return state;
  }
  const small = state === 'ok' ? el('div', { id: 'small-multiples', class: 'small-multiples' }) : null;
  const tooSmall = state === 'too-small' ? el('div', { id: 'too-small-state', class: 'state', role: 'status' },
    el('p', { text: `Too few reports to say anything yet (${doc.reports.toLocaleString('en')}): every estimate's standard error is large against its scale. The numbers below are noise-dominated.` }),
    el('p', { text: `About ${Math.max(...doc.warnings.map((w) => w.reports_needed)).toLocaleString('en')} reports would bring every standard error to 1% of its scale.` })) : null;
  box.replaceChildren(...[head, tooSmall, summaryTable(rows, warned), noteList(doc), small].filter(Boolean));
  if (small) await renderFigures(small, smallMultiples(rows));
  return state;
}
