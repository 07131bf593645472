// `heavy-hitters`: the top items with frequency, SE and CI (table), drawn as bars with error bars;
// the prefix search's levels.
import { estCols } from '../format.js';
import { withErrorBars, EST_COLUMNS } from '../figure.js';

export function figures(doc) {
  const rows = doc.items.map((it, i) => ({ rank: i + 1, item: it.item ?? `(code ${it.code})`, code: it.code, ...estCols(it) }));
  return [
    { id: 'top', title: `Top ${rows.length} items (${doc.method}, ${doc.bits}-bit codes)`,
      spec: rows.length ? { height: 24 * rows.length + 20, ...withErrorBars(rows, { x: 'item', horizontal: true, xTitle: 'item', yTitle: 'frequency (95% CI)', sort: null }) } : null,
      note: rows.length ? null : 'No items yet: every level of the search needs a report.',
      columns: [{ key: 'rank', label: 'rank' }, { key: 'item', label: 'item' }, { key: 'code', label: 'code' }, ...EST_COLUMNS], rows },
    { id: 'levels', title: 'Levels of the prefix search',
      columns: [{ key: 'prefix_bits', label: 'prefix bits' }, { key: 'reports', label: 'reports' }, { key: 'candidates', label: 'candidates' }, { key: 'kept', label: 'kept' }],
      rows: doc.levels },
  ];
}
