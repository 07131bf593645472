// `range2d`: the finest grid as a heatmap (each cell's share; the table has SE and CI), the
// rectangles asked drawn over it, and their shares with CI error bars.
import { estCols } from '../format.js';
import { withErrorBars, EST_COLUMNS } from '../figure.js';

/** The bin edge t of an axis over [lo, hi] split into `bins`. */
const edge = ([lo, hi], bins, t) => lo + ((hi - lo) * t) / bins;

export function figures(doc) {
  const n = doc.bins;
  const cells = doc.heatmap.flatMap((row, iy) => row.map((e, ix) => ({
    ix, iy, x_lo: edge(doc.x_bounds, n, ix), x_hi: edge(doc.x_bounds, n, ix + 1),
    y_lo: edge(doc.y_bounds, n, iy), y_hi: edge(doc.y_bounds, n, iy + 1), ...estCols(e) })));
  const rects = doc.rects.map((r) => ({ rect: `[${r.rect[0]}, ${r.rect[1]}) × [${r.rect[2]}, ${r.rect[3]})`,
    x_lo: edge(doc.x_bounds, n, r.bins[0]), x_hi: edge(doc.x_bounds, n, r.bins[1]),
    y_lo: edge(doc.y_bounds, n, r.bins[2]), y_hi: edge(doc.y_bounds, n, r.bins[3]), ...estCols(r) }));
  const x = { field: 'x_lo', type: 'quantitative', title: doc.x, scale: { domain: doc.x_bounds, nice: false } };
  const y = { field: 'y_lo', type: 'quantitative', title: doc.y, scale: { domain: doc.y_bounds, nice: false } };
  const out = [{ id: 'heatmap', title: `Heatmap of ${doc.x} × ${doc.y} (share of devices per cell, ${n} × ${n}; rectangles asked outlined)`,
    spec: { height: 320, layer: [
      { data: { values: cells.filter((c) => c.estimate !== null) }, mark: { type: 'rect', tooltip: true },
        encoding: { x, x2: { field: 'x_hi' }, y, y2: { field: 'y_hi' },
          color: { field: 'estimate', type: 'quantitative', title: 'share', scale: { scheme: 'blues' } } } },
      { data: { values: rects }, mark: { type: 'rect', filled: false, stroke: '#d95f02', strokeWidth: 2 },
        encoding: { x, x2: { field: 'x_hi' }, y, y2: { field: 'y_hi' } } },
    ] },
    columns: [{ key: 'x_lo', label: `${doc.x} from`, num: true }, { key: 'x_hi', label: `${doc.x} to`, num: true },
      { key: 'y_lo', label: `${doc.y} from`, num: true }, { key: 'y_hi', label: `${doc.y} to`, num: true }, ...EST_COLUMNS],
    rows: cells }];
  if (rects.length) {
    out.push({ id: 'rects', title: `Shares of ${doc.x} × ${doc.y} in the rectangles asked`,
      spec: { height: 200, ...withErrorBars(rects, { x: 'rect', xTitle: 'rectangle', yTitle: 'share (95% CI)', sort: null }) },
      columns: [{ key: 'rect', label: 'rectangle' }, ...EST_COLUMNS], rows: rects });
  }
  return out;
}
