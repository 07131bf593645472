// `means`: each numeric attribute's mean (original units) and each categorical attribute's
// frequencies, with 95% CI error bars.
import { estCols } from '../format.js';
import { withErrorBars, EST_COLUMNS } from '../figure.js';

export function figures(doc) {
  const out = [];
  const numeric = doc.attributes.filter((a) => a.kind === 'numeric')
    .map((a) => ({ attribute: a.name, ...estCols(a) }));
  for (const [i, r] of numeric.entries()) {
    out.push({ id: `mean-${i}`, title: `Mean of ${r.attribute}`,
      spec: { height: 60, ...withErrorBars([r], { x: 'attribute', mark: 'point', horizontal: true, xTitle: '', yTitle: `mean of ${r.attribute} (95% CI)` }) },
      columns: [{ key: 'attribute', label: 'attribute' }, ...EST_COLUMNS], rows: [r] });
  }
  for (const [i, a] of doc.attributes.entries()) {
    if (a.kind !== 'categorical') continue;
    const rows = a.categories.map((c) => ({ attribute: a.name, label: c.label, ...estCols(c) }));
    out.push({ id: `freq-${i}`, title: `Frequencies of ${a.name}`,
      spec: { height: 220, ...withErrorBars(rows, { x: 'label', xTitle: a.name, yTitle: 'frequency (95% CI)' }) },
      columns: [{ key: 'attribute', label: 'attribute' }, { key: 'label', label: 'label' }, ...EST_COLUMNS], rows });
  }
  return out;
}
