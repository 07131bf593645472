// One chart and its text alternative: a <figure> with the Vega-Lite chart (vendored Vega +
// Vega-Lite + vega-embed, loaded on first use) and a <table> of the same numbers under it.
// A figure: {id, title, spec (Vega-Lite, data as `values`), columns: [{key, label, num}], rows}.
import { el, fmt } from './format.js';

let vegaReady = null;

/** Loads the vendored Vega scripts once (classic scripts: window.vegaEmbed). */
export function loadVega() {
  vegaReady ??= ['vega.min.js', 'vega-lite.min.js', 'vega-embed.min.js'].reduce((p, f) => p.then(() => new Promise((ok, fail) => {
    const s = el('script', { src: new URL(`../vendor/${f}`, import.meta.url).href });
    s.onload = ok;
    s.onerror = () => fail(new Error(`could not load ${f}`));
    document.head.append(s);
  })), Promise.resolve());
  return vegaReady;
}

/** The table of a figure (the numbers of the chart, DIGITS decimals). */
export function table(f) {
  return el('table', { class: 'numbers', 'data-figure': f.id },
    el('caption', { text: `${f.title}: the numbers` }),
    el('thead', {}, el('tr', {}, f.columns.map((c) => el('th', { scope: 'col', text: c.label })))),
    el('tbody', {}, f.rows.map((r) => el('tr', {}, f.columns.map((c) => c.num
      ? el('td', { class: 'num', text: fmt(r[c.key], c.digits) })
      : el('td', { text: r[c.key] ?? '—' }))))));
}

/** Renders the figures into `container` (replacing what was there). */
export async function renderFigures(container, figures) {
  const nodes = figures.map((f) => {
    // Small multiples have their numbers in the summary table above them.
    const alt = f.small ? 'chart; the summary table has its numbers' : 'chart; the table below has its numbers';
    const vis = el('div', { class: 'vis', role: 'img', 'aria-label': `${f.title} (${alt})` });
    const fig = el('figure', { class: f.small ? 'chart small' : 'chart', id: `fig-${f.id}`, 'data-figure': f.id },
      el('figcaption', {}, el('h3', { text: f.title }), f.note ? el('p', { class: 'note', text: f.note }) : null),
      f.spec ? vis : null, f.small ? null : table(f));
    return { f, fig, vis };
  });
  container.replaceChildren(...nodes.map((n) => n.fig));
  if (!nodes.some((n) => n.f.spec)) return;
  await loadVega();
  await Promise.all(nodes.filter((n) => n.f.spec).map(({ f, vis }) => window.vegaEmbed(vis,
    { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', width: 'container', ...f.spec },
    { actions: false, renderer: 'svg', ast: false }).catch((e) => {
    vis.replaceChildren(el('p', { class: 'error', text: `chart failed: ${e.message}` }));
  })));
}

/** Vega-Lite layers: a bar (or point) per row at `y` with a 95% CI error bar (ci_lo, ci_hi). */
export function withErrorBars(rows, { x, y = 'estimate', mark = 'bar', xTitle, yTitle, horizontal = false, sort = null }) {
  const cat = { field: x, type: 'nominal', title: xTitle ?? x, sort, axis: horizontal ? {} : { labelAngle: -30 } };
  // Means and answers are not shares: their axis need not start at zero.
  const val = { field: y, type: 'quantitative', title: yTitle ?? y, scale: { zero: mark === 'bar' } };
  const pos = horizontal ? { y: cat, x: val } : { x: cat, y: val };
  const lo = { field: 'ci_lo', type: 'quantitative', title: yTitle ?? y, scale: { zero: mark === 'bar' } };
  const hi = { field: 'ci_hi' };
  const bars = horizontal ? { y: cat, x: lo, x2: hi } : { x: cat, y: lo, y2: hi };
  return {
    data: { values: rows.filter((r) => r[y] !== null) },
    layer: [
      { mark: { type: mark, tooltip: true }, encoding: pos },
      { transform: [{ filter: 'isValid(datum.ci_lo) && isValid(datum.ci_hi)' }],
        mark: { type: 'errorbar', thickness: 1.5, color: '#1b1b1b' }, encoding: bars },
    ],
  };
}

export const EST_COLUMNS = [
  { key: 'estimate', label: 'estimate', num: true },
  { key: 'se', label: 'SE', num: true },
  { key: 'ci_lo', label: '95% CI low', num: true },
  { key: 'ci_hi', label: '95% CI high', num: true },
  { key: 'raw', label: 'raw (unbiased)', num: true },
];
