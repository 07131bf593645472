// `range`: the CDF with its pointwise 95% band, the quantiles as bands (their 95% intervals),
// and the shares of the ranges asked with CI error bars.
import { estCols } from '../format.js';
import { withErrorBars, EST_COLUMNS } from '../figure.js';

export function figures(doc) {
  const a = doc.attribute;
  const cdf = doc.cdf.map((p) => ({ x: p.x, bin: p.bin, ...estCols(p) }));
  const quant = doc.quantiles.map((q) => ({ q: q.q, lo: q.value?.[0] ?? null, hi: q.value?.[1] ?? null,
    int_lo: q.interval?.[0] ?? null, int_hi: q.interval?.[1] ?? null }));
  const out = [{ id: 'cdf', title: `CDF of ${a} (P[x < edge], 95% band; quantile intervals shaded)`,
    spec: { height: 260, layer: [
      { data: { values: quant.filter((q) => q.int_lo !== null) },
        mark: { type: 'rect', opacity: 0.15, color: '#d95f02' },
        encoding: { x: { field: 'int_lo', type: 'quantitative' }, x2: { field: 'int_hi' } } },
      { data: { values: cdf.filter((p) => p.ci_lo !== null) }, mark: { type: 'area', opacity: 0.3 },
        encoding: { x: { field: 'x', type: 'quantitative', title: a }, y: { field: 'ci_lo', type: 'quantitative' }, y2: { field: 'ci_hi' } } },
      { data: { values: cdf.filter((p) => p.estimate !== null) }, mark: { type: 'line', tooltip: true },
        encoding: { x: { field: 'x', type: 'quantitative', title: a }, y: { field: 'estimate', type: 'quantitative', title: 'P[x < edge]' } } },
    ] },
    columns: [{ key: 'bin', label: 'bin edge' }, { key: 'x', label: a, num: true }, ...EST_COLUMNS], rows: cdf }];
  out.push({ id: 'quantiles', title: `Quantiles of ${a} (estimated bin and 95% interval)`,
    spec: quant.some((q) => q.lo !== null) ? { height: 40 + 25 * quant.length, data: { values: quant.filter((q) => q.lo !== null) }, layer: [
      { mark: { type: 'rule', strokeWidth: 2 }, encoding: { y: { field: 'q', type: 'ordinal', title: 'q' }, x: { field: 'int_lo', type: 'quantitative', title: a }, x2: { field: 'int_hi' } } },
      { mark: { type: 'bar', height: 12, tooltip: true }, encoding: { y: { field: 'q', type: 'ordinal' }, x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' } } },
    ] } : null,
    columns: [{ key: 'q', label: 'q', num: true, digits: 2 }, { key: 'lo', label: 'bin low', num: true }, { key: 'hi', label: 'bin high', num: true },
      { key: 'int_lo', label: '95% interval low', num: true }, { key: 'int_hi', label: '95% interval high', num: true }], rows: quant });
  if (doc.ranges.length) {
    const rows = doc.ranges.map((r) => ({ range: `[${r.range[0]}, ${r.range[1]})`, ...estCols(r) }));
    out.push({ id: 'ranges', title: `Shares of ${a} in the ranges asked`,
      spec: { height: 200, ...withErrorBars(rows, { x: 'range', xTitle: a, yTitle: 'share (95% CI)', sort: null }) },
      columns: [{ key: 'range', label: 'range' }, ...EST_COLUMNS], rows });
  }
  return out;
}
