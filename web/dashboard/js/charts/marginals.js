// `marginals`: a heatmap per 2-way marginal (cell shares; the table has SE and CI), bars with
// error bars for 1-way ones, tables for higher ways.
import { estCols } from '../format.js';
import { withErrorBars, EST_COLUMNS } from '../figure.js';

function cells(m) {
  // Row-major, the last attribute fastest.
  const sizes = m.labels.map((l) => l.length);
  return m.cells.map((c, i) => {
    const idx = [];
    let rest = i;
    for (let k = sizes.length - 1; k >= 0; k--) { idx.unshift(rest % sizes[k]); rest = Math.floor(rest / sizes[k]); }
    // Fixed field names (an attribute name such as `b.c` would be read as a nested path) and a
    // numeric order per attribute (labels never enter a spec, where Vega compiles them into code).
    const r = {};
    m.attributes.forEach((_, k) => { r[`f${k}`] = m.labels[k][idx[k]]; r[`o${k}`] = idx[k]; });
    return { ...r, ...estCols(c) };
  });
}

export function figures(doc) {
  return doc.marginals.map((m, i) => {
    const rows = cells(m);
    const name = m.attributes.join(' × ');
    const columns = [...m.attributes.map((a, k) => ({ key: `f${k}`, label: a })), ...EST_COLUMNS];
    const sort = (k) => ({ field: `o${k}`, op: 'min' });
    let spec = null;
    if (m.attributes.length === 2) {
      const [a, b] = m.attributes;
      spec = { height: Math.max(120, 22 * m.labels[0].length), data: { values: rows },
        mark: { type: 'rect', tooltip: true },
        encoding: { y: { field: 'f0', type: 'ordinal', title: a, sort: sort(0) }, x: { field: 'f1', type: 'ordinal', title: b, sort: sort(1) },
          color: { field: 'estimate', type: 'quantitative', title: 'share', scale: { scheme: 'blues' } } } };
    } else if (m.attributes.length === 1) {
      spec = { height: 200, ...withErrorBars(rows, { x: 'f0', xTitle: m.attributes[0], yTitle: 'share (95% CI)', sort: sort(0) }) };
    }
    return { id: `marginal-${i}`, title: `Marginal ${name}${m.predicted_sse != null ? ` (predicted SSE ${m.predicted_sse.toExponential(2)})` : ''}`,
      spec, columns, rows };
  });
}
