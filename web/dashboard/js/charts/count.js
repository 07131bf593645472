// The report count over time, sampled on each live refresh, and the stored reports per UTC day
// received (GET …/days).
export function figure(samples) {
  const rows = samples.map((s) => ({ time: new Date(s.t).toISOString().slice(11, 19), t: s.t, reports: s.reports }));
  return { id: 'count', title: 'Reports over time (sampled on each refresh)',
    spec: { height: 160, data: { values: rows }, mark: { type: 'line', point: true, tooltip: true },
      encoding: { x: { field: 't', type: 'temporal', title: 'time (UTC)', scale: { type: 'utc' }, axis: { format: '%H:%M:%S', labelAngle: 0 } }, y: { field: 'reports', type: 'quantitative', title: 'reports' } } },
    columns: [{ key: 'time', label: 'time (UTC)' }, { key: 'reports', label: 'reports' }], rows: rows.slice(-10) };
}

export function dayFigure(days) {
  const rows = days.map((d) => ({ day: d.day ?? 'before days were kept', reports: d.reports }));
  return { id: 'days', title: 'Stored reports per day (UTC, day received)',
    spec: { height: 140, data: { values: rows }, mark: { type: 'bar', tooltip: true },
      encoding: { x: { field: 'day', type: 'ordinal', title: 'day (UTC)', axis: { labelAngle: 0 } }, y: { field: 'reports', type: 'quantitative', title: 'reports' } } },
    columns: [{ key: 'day', label: 'day (UTC)' }, { key: 'reports', label: 'reports' }], rows };
}
