// `frequency`: one attribute's label frequencies with 95% CI error bars.
import { estCols } from '../format.js';
import { withErrorBars, EST_COLUMNS } from '../figure.js';

export function figures(doc) {
  const rows = doc.categories.map((c) => ({ label: c.label, ...estCols(c) }));
  return [{ id: 'frequency', title: `Frequencies of ${doc.attribute} (${doc.mechanism})`,
    spec: { height: 240, ...withErrorBars(rows, { x: 'label', xTitle: doc.attribute, yTitle: 'frequency (95% CI)' }) },
    columns: [{ key: 'label', label: 'label' }, ...EST_COLUMNS], rows }];
}
