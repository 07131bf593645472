// `train`: the model's coefficients per round (sampled on each refresh: the server keeps the
// current round only) and the current model's coefficients.
export function figures(doc, history) {
  const s = doc.state;
  const rows = doc.features.map((f, i) => ({ feature: f, coefficient: s.model[i], last_iterate: s.parameters[i] }));
  const seen = new Set(history.train.map((h) => `${h.round}/${h.feature}`));
  for (const r of rows) if (!seen.has(`${s.round}/${r.feature}`)) history.train.push({ round: s.round, feature: r.feature, coefficient: r.coefficient });
  return [
    { id: 'rounds', title: `Coefficients per round (round ${s.round}${s.done ? ', done' : ''}; ${s.received} of ${s.batch_size} gradients in this round)`,
      spec: { height: 240, data: { values: history.train }, mark: { type: 'line', point: true, tooltip: true },
        encoding: { x: { field: 'round', type: 'quantitative' }, y: { field: 'coefficient', type: 'quantitative' }, color: { field: 'feature', type: 'nominal' } } },
      columns: [{ key: 'round', label: 'round' }, { key: 'feature', label: 'feature' }, { key: 'coefficient', label: 'coefficient', num: true }], rows: history.train },
    { id: 'model', title: 'The model to use (coefficients)',
      columns: [{ key: 'feature', label: 'feature' }, { key: 'coefficient', label: 'model', num: true }, { key: 'last_iterate', label: 'last iterate', num: true }], rows },
  ];
}
