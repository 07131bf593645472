// `linear-queries`: each query's unbiased answer with its 95% CI (and the projected answer).
import { estCols } from '../format.js';
import { withErrorBars, EST_COLUMNS } from '../figure.js';

export function figures(doc) {
  const rows = doc.queries.map((q) => ({ query: q.name, ...estCols(q), projected: q.projected ?? null }));
  return [{ id: 'queries', title: `Linear queries (${doc.mechanism})`,
    spec: { height: 24 * rows.length + 30, ...withErrorBars(rows, { x: 'query', mark: 'point', horizontal: true, xTitle: 'query', yTitle: 'answer (95% CI)', sort: null }) },
    columns: [{ key: 'query', label: 'query' }, ...EST_COLUMNS, { key: 'projected', label: 'projected', num: true }], rows }];
}
