// One collection: its name and a summary of every estimate first (summary.js: one table with the
// in-domain values, CIs and warnings, small multiples, or the empty / too-small state), then the
// report count over time (sampled every REFRESH_MS while live), the task's estimates drawn as an
// analyst reads them (each chart with its table), range queries, the trend per period of a
// collection with time buckets (trend.js), and the document as JSON / CSV.
import { el } from '../format.js';
import { estimates, days, config, listCollections } from '../api.js';
import { renderSummary } from '../summary.js';
import { renderFigures } from '../figure.js';
import { figuresOf } from '../charts/index.js';
import { encodeHoldout } from '../charts/train.js';
import { figure as countFigure, dayFigure } from '../charts/count.js';
import { toCsv, setDownload } from '../download.js';
import { trendPanel } from '../trend.js';

export const REFRESH_MS = 3000;
/** The per-day counts (a GROUP BY over the stored reports) are asked again at most this often. */
export const DAYS_MS = 30000;

export function render(main, { id, onError }) {
  const state = { samples: [], history: { train: [] }, lastKey: '', query: {}, good: null, ranged: false, days: null, daysAt: 0, daysCount: -1, timer: 0, stopped: false };
  const count = el('p', { id: 'report-count', 'aria-live': 'polite' });
  const countBox = el('div', { id: 'count-chart' });
  const figs = el('div', { id: 'estimates' });
  const jsonLink = el('a', { id: 'download-json', href: '#', text: 'Download JSON' });
  const csvLink = el('a', { id: 'download-csv', href: '#', text: 'Download CSV' });
  const live = el('input', { id: 'live', type: 'checkbox', checked: true });
  const rangeForm = el('form', { id: 'range-query', hidden: true },
    el('label', { for: 'ranges', text: 'Ranges (lo:hi, comma-separated)' }), el('input', { id: 'ranges', name: 'ranges', placeholder: '18:30,30:65' }),
    el('label', { for: 'quantiles', text: 'Quantiles' }), el('input', { id: 'quantiles', name: 'quantiles', placeholder: '0.1,0.5,0.9' }),
    el('label', { for: 'rects', text: 'Rectangles (x1:x2:y1:y2, comma-separated)' }), el('input', { id: 'rects', name: 'rects', placeholder: '25:45:35:45' }),
    el('button', { type: 'submit', text: 'Ask' }), el('p', { id: 'range-error', class: 'error', role: 'alert' }));
  rangeForm.addEventListener('submit', (e) => {
    e.preventDefault();
    state.good = state.query;
    state.query = { ranges: rangeForm.ranges.value.trim(), quantiles: rangeForm.quantiles.value.trim(), rects: rangeForm.rects.value.trim() };
    state.lastKey = '';
    document.getElementById('range-error').textContent = '';
    refresh();
  });
  // Training collections: a holdout CSV read and scored in this page only (never uploaded).
  const holdoutForm = el('form', { id: 'holdout', hidden: true },
    el('label', { for: 'holdout-file', text: 'holdout CSV (scored in this browser, never uploaded)' }), ' ',
    el('input', { id: 'holdout-file', type: 'file', accept: '.csv,text/csv' }),
    el('p', { id: 'holdout-status', class: 'note' }), el('p', { id: 'holdout-error', class: 'error', role: 'alert' }));
  holdoutForm.addEventListener('submit', (e) => e.preventDefault());
  holdoutForm.querySelector('input').addEventListener('change', async (e) => {
    const file = e.target.files?.[0];
    const status = document.getElementById('holdout-status');
    const error = document.getElementById('holdout-error');
    status.textContent = '';
    error.textContent = '';
    delete state.history.holdout;
    if (file) {
      try {
        const data = encodeHoldout(await config(id), await file.text());
        state.history.holdout = { name: file.name, data };
        status.textContent = `${file.name}: ${data.n} rows, ${data.d} features (kept in this page)`;
      } catch (err) {
        error.textContent = `${file.name} cannot be scored: ${err.message}`;
      }
    }
    state.lastKey = '';
    refresh();
  });
  const head = el('h2', { id: 'collection-h', text: `Collection ${id}` });
  const description = el('p', { id: 'collection-description', class: 'note', hidden: true });
  const summary = el('section', { id: 'summary', 'aria-labelledby': 'summary-h' });
  const trend = trendPanel(id);
  main.replaceChildren(el('section', { id: 'collection', 'aria-labelledby': 'collection-h' },
    el('p', {}, el('a', { href: '#/', text: '← All collections' })), head, description,
    el('p', { id: 'meta' }), summary, count, el('p', { id: 'updated', class: 'note' }),
    el('p', { class: 'controls' }, live, el('label', { for: 'live', text: ` Live refresh (every ${REFRESH_MS / 1000} s)` }), ' ',
      jsonLink, ' ', csvLink, ' ', el('a', { href: `playground.html?collection=${encodeURIComponent(id)}`, text: 'Device playground' })),
    rangeForm, holdoutForm, el('h2', { text: 'Estimates' }), figs, trend.node, el('h2', { text: 'Reports over time' }), countBox));
  // The name and description given at create (text only), when the list has them.
  listCollections().then((list) => {
    const c = list.find((x) => x.id === id);
    if (c?.name) head.textContent = c.name;
    if (c?.description) { description.textContent = c.description; description.hidden = false; }
    if (c?.created) head.title = `${id}, created ${c.created}`;
  }).catch(() => {});

  async function refresh() {
    clearTimeout(state.timer);
    if (state.stopped) return;
    let doc;
    try {
      doc = await estimates(id, state.query);
    } catch (e) {
      if (state.stopped) return;
      if (e.status === 401 || e.status === 403 || e.status === 404) return onError(e);
      if (e.status === 400 && state.good) {
        // A range or quantile the server refuses: its message, and the last good query again.
        document.getElementById('range-error').textContent = `400 ${e.field}: ${e.serverMessage}`;
        state.query = state.good;
        state.good = null;
        return refresh();
      }
      count.textContent = `could not refresh: ${e.message}`;
      schedule();
      return;
    }
    if (state.stopped) return;
    if (doc.task === 'range' && !state.ranged) {
      // harmony query's default quantiles.
      state.ranged = true;
      state.query = { ranges: '', quantiles: '0.1,0.5,0.9' };
      rangeForm.quantiles.value = state.query.quantiles;
      return refresh();
    }
    state.samples.push({ t: Date.now(), reports: doc.reports });
    if (state.samples.length > 600) state.samples.shift();
    // The live region changes with the count only (not with every refresh's time).
    const text = `${doc.reports.toLocaleString('en')} reports`;
    if (count.textContent !== text) count.textContent = text;
    document.getElementById('updated').textContent = `updated ${new Date().toISOString().slice(11, 19)} UTC`;
    count.dataset.reports = String(doc.reports);
    trend.update(doc.reports);
    document.getElementById('meta').textContent = `task ${doc.task} · ε ${doc.epsilon}`;
    rangeForm.hidden = doc.task !== 'range' && doc.task !== 'range2d';
    // range2d asks rectangles; range asks ranges and quantiles.
    for (const [name, task] of [['ranges', 'range'], ['quantiles', 'range'], ['rects', 'range2d']]) {
      rangeForm[name].hidden = doc.task !== task;
      rangeForm.querySelector(`label[for="${name}"]`).hidden = doc.task !== task;
    }
    holdoutForm.hidden = doc.task !== 'train';
    const key = `${doc.reports}|${JSON.stringify(state.query)}|${doc.task === 'train' ? doc.state.round : ''}`;
    if (doc.reports !== state.daysCount && Date.now() - state.daysAt >= DAYS_MS) {
      state.daysAt = Date.now();
      state.daysCount = doc.reports;
      state.days = await days(id).catch(() => state.days);
    }
    // No per-day chart without stored reports per day (training and adaptive-rounds collections
    // store gradients and answers, counted per round).
    await renderFigures(countBox, [countFigure(state.samples), ...(state.days?.length ? [dayFigure(state.days)] : [])]);
    if (key !== state.lastKey) {
      state.lastKey = key;
      const figures = figuresOf(doc, state.history);
      const shown = await renderSummary(summary, doc, id);
      summary.dataset.state = shown ?? 'none';
      // An empty collection draws no empty charts.
      if (shown !== 'empty') await renderFigures(figs, figures);
      else figs.replaceChildren(el('p', { class: 'note', text: 'No estimates until the first report.' }));
      setDownload(jsonLink, `${id}-estimates.json`, 'application/json', `${JSON.stringify(doc, null, 2)}\n`);
      setDownload(csvLink, `${id}-estimates.csv`, 'text/csv', toCsv(figures));
      figs.dataset.reports = String(doc.reports);
    }
    schedule();
  }
  function schedule() {
    if (live.checked && !state.stopped) state.timer = setTimeout(refresh, REFRESH_MS);
  }
  live.addEventListener('change', () => (live.checked ? refresh() : clearTimeout(state.timer)));
  refresh();
  return () => { state.stopped = true; clearTimeout(state.timer); };
}
