// `train`: the model's coefficients per round (sampled on each refresh: the server keeps the
// current round only) and the current model's coefficients; with a holdout CSV picked in the
// page (scored here, never uploaded: encodeHoldout and scoreModel below), each sampled round's
// model scored on it.

/** The rounds axis: whole rounds only. */
const ROUND = { field: 'round', type: 'quantitative', axis: { tickMinStep: 1, format: 'd' } };

export function figures(doc, history) {
  const s = doc.state;
  const rows = doc.features.map((f, i) => ({ feature: f, coefficient: s.model[i], last_iterate: s.parameters[i] }));
  const seen = new Set(history.train.map((h) => `${h.round}/${h.feature}`));
  for (const r of rows) if (!seen.has(`${s.round}/${r.feature}`)) history.train.push({ round: s.round, feature: r.feature, coefficient: r.coefficient });
  history.models ??= new Map();
  history.models.set(s.round, s.model.slice());
  const out = [
    { id: 'rounds', title: `Coefficients per round (round ${s.round}${s.done ? ', done' : ''}; ${s.received} of ${s.batch_size} gradients in this round)`,
      spec: { height: 240, data: { values: history.train }, mark: { type: 'line', point: true, tooltip: true },
        encoding: { x: { field: 'round', type: 'quantitative' }, y: { field: 'coefficient', type: 'quantitative' }, color: { field: 'feature', type: 'nominal' } } },
      columns: [{ key: 'round', label: 'round' }, { key: 'feature', label: 'feature' }, { key: 'coefficient', label: 'coefficient', num: true }], rows: history.train },
    { id: 'model', title: 'The model to use (coefficients)',
      columns: [{ key: 'feature', label: 'feature' }, { key: 'coefficient', label: 'model', num: true }, { key: 'last_iterate', label: 'last iterate', num: true }], rows },
  ];
  const h = history.holdout;
  if (!h) return out;
  const per = [...history.models.entries()].sort((a, b) => a[0] - b[0]).map(([round, w]) => ({ round, ...scoreModel(h.data, w) }));
  const cur = scoreModel(h.data, s.model);
  const cls = h.data.classification;
  const lossName = { linear: 'squared loss (z − y)²/2', logistic: 'logistic loss ln(1 + exp(−yz))', svm: 'hinge loss max(0, 1 − yz)' }[h.data.loss];
  const note = `${h.name}: ${h.data.n} rows, scored in this browser (never uploaded).`;
  out.push({ id: 'holdout-current', title: `The current model (round ${s.round}) on the holdout`, note,
    columns: [{ key: 'measure', label: 'measure' }, { key: 'value', label: 'value', num: true }],
    rows: [
      { measure: cls ? 'misclassification' : 'mse', value: cur.value },
      ...(cls ? [{ measure: 'accuracy', value: cur.accuracy }] : []),
      { measure: `mean ${lossName}`, value: cur.loss },
      { measure: `${cur.baseline} predictor's ${cls ? 'misclassification' : 'mse'}`, value: cur.baseline_value },
    ] });
  const lossRows = per.flatMap((p) => [
    { round: p.round, measure: cls ? 'misclassification' : 'mse (predictions clamped to [-1, 1])', value: p.value },
    { round: p.round, measure: `mean ${lossName}`, value: p.loss }]);
  out.push({ id: 'holdout-loss', title: `Loss per round on the holdout (${h.data.n} rows)`,
    spec: { height: 200, data: { values: lossRows }, mark: { type: 'line', point: true, tooltip: true },
      encoding: { x: ROUND, y: { field: 'value', type: 'quantitative', title: 'loss' }, color: { field: 'measure', type: 'nominal' } } },
    columns: [{ key: 'round', label: 'round' }, { key: 'measure', label: 'measure' }, { key: 'value', label: 'value', num: true }], rows: lossRows });
  if (cls) {
    const accRows = per.map((p) => ({ round: p.round, accuracy: p.accuracy, majority: 1 - p.baseline_value }));
    out.push({ id: 'holdout-accuracy', title: `Accuracy per round on the holdout (${h.data.n} rows)`,
      spec: { height: 200, data: { values: accRows }, mark: { type: 'line', point: true, tooltip: true },
        encoding: { x: ROUND, y: { field: 'accuracy', type: 'quantitative', scale: { domain: [0, 1] } } } },
      columns: [{ key: 'round', label: 'round' }, { key: 'accuracy', label: 'accuracy', num: true }, { key: 'majority', label: 'majority predictor', num: true }], rows: accRows });
  }
  return out;
}

// A holdout CSV scored in this browser (never uploaded): its rows mapped to the model's features
// exactly as the Rust feature map does (harmony-data's encoding with the `error` invalid policy,
// then harmony-learn's FeatureMap with the zero-one encoding of harmony-tasks' train::feature_map),
// and each model scored with the metric `harmony query --data` prints (harmony-learn's
// cv::Experiment::score) plus the task's mean loss (harmony-learn's Loss::value).

/** harmony-data's default missing tokens (matched ignoring ASCII case) and the empty cell. */
const MISSING = ['', 'NA', 'N/A', 'NaN', 'null', 'None', '?'].map((t) => t.toLowerCase());
const isMissing = (s) => MISSING.includes(s.toLowerCase());
/** A finite decimal number as Rust's f64 parse reads it (inf / NaN are not numbers here). */
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** RFC 4180 CSV: rows of fields (quotes, "" inside quotes, CRLF); empty lines skipped. */
export function parseCsv(text) {
  const rows = [];
  let row = [], field = '', quoted = false, i = 0, any = false;
  if (text.charCodeAt(0) === 0xfeff) i = 1;
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') { field += '"'; i++; } else quoted = false;
      } else field += c;
    } else if (c === '"') { quoted = true; any = true; }
    else if (c === ',') { row.push(field); field = ''; any = true; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      if (any || field !== '') { row.push(field); rows.push(row); }
      row = []; field = ''; any = false;
    } else { field += c; any = true; }
  }
  if (any || field !== '') { row.push(field); rows.push(row); }
  return rows;
}

/** Range::to_unit_clamped: x in [min, max] to [-1, 1]. */
function toUnit(x, min, max) {
  const wide = !Number.isFinite(2 * (max - min));
  const t = wide ? 2 * ((0.5 * x - 0.5 * min) / (0.5 * max - 0.5 * min)) - 1 : 2 * (x - min) / (max - min) - 1;
  return Math.min(1, Math.max(-1, t));
}

/** One cell of attribute `a` (trimmed text, or undefined for a missing field): a unit value, a
 * category index, or an error message (harmony-data's `describe`). */
function encodeCell(a, s) {
  if (a.kind === 'numeric') {
    const expected = `a number in [${a.min}, ${a.max}]`;
    if (s === undefined || isMissing(s)) return { err: `${a.name} is missing (${s === undefined ? 'a null' : s === '' ? 'an empty cell' : `"${s}"`}), expected ${expected}` };
    if (!NUMBER.test(s)) return { err: `${a.name} is "${s}", expected ${expected}` };
    const x = Number(s);
    if (!(x >= a.min && x <= a.max)) return { err: `${a.name} is ${x}, expected ${expected}` };
    return { v: toUnit(x, a.min, a.max) };
  }
  const idx = s === undefined ? -1 : a.categories.indexOf(s);
  if (idx >= 0) return { v: idx };
  const q = a.categories.indexOf('?');
  const labels = a.categories.slice(0, 8).map((l) => `"${l}"`).join(', ') + (a.categories.length > 8 ? `, … (${a.categories.length} labels)` : '');
  if (s === undefined || isMissing(s)) {
    return q >= 0 ? { v: q } : { err: `${a.name} is missing (${s === undefined ? 'a null' : s === '' ? 'an empty cell' : `"${s}"`}), expected one of ${labels}` };
  }
  return { err: `${a.name} is "${s}", expected one of ${labels}` };
}

/**
 * The holdout's design matrix and targets for a training collection's published config
 * ({schema, task: {task, target, positive, threshold}, train: {features, dimension}}).
 * Throws an Error with a message for the analyst when the file does not fit.
 */
export function encodeHoldout(config, text) {
  const { schema } = config;
  const spec = config.task;
  const rows = parseCsv(text);
  if (rows.length === 0) throw new Error('the file is empty (a header row with the schema\'s columns is needed)');
  const header = rows[0].map((h) => h.trim());
  const cols = schema.map((a) => {
    const j = header.indexOf(a.name);
    if (j < 0) throw new Error(`the file has no column "${a.name}" (columns: ${header.slice(0, 50).join(', ')})`);
    return j;
  });
  const t = schema.findIndex((a) => a.name === spec.target);
  if (t < 0) throw new Error(`the schema has no target column "${spec.target}"`);
  // The feature columns, as FeatureMap::new builds them.
  const columns = [{ bias: true }];
  const names = ['(intercept)'];
  schema.forEach((a, j) => {
    if (j === t) return;
    if (a.kind === 'numeric') { columns.push({ j }); names.push(a.name); }
    else a.categories.forEach((l, c) => { if (c >= 1) { columns.push({ j, c }); names.push(`${a.name}=${l}`); } });
  });
  const want = config.train?.features ?? [];
  if (names.length !== want.length || names.some((n, i) => n !== want[i])) {
    throw new Error(`the features built from the schema (${names.join(', ')}) are not the collection's (${want.join(', ')}): this page cannot score this model`);
  }
  // The target, as FeatureMap::target reads it.
  const ta = schema[t];
  let target;
  if (spec.task === 'linear') {
    if (ta.kind !== 'numeric') throw new Error(`target ${ta.name} is categorical: linear regression needs a numeric target`);
    target = (v) => v;
  } else if (ta.kind === 'categorical') {
    const pos = spec.positive != null ? ta.categories.indexOf(spec.positive) : ta.categories.length === 2 ? 1 : -1;
    if (pos < 0) throw new Error(`target ${ta.name}: no positive label`);
    target = (v) => (v === pos ? 1 : -1);
  } else {
    if (typeof spec.threshold !== 'number') throw new Error(`target ${ta.name} is numeric and the task has no threshold`);
    const cut = toUnit(spec.threshold, ta.min, ta.max);
    target = (v) => (v > cut ? 1 : -1);
  }
  const x = [], y = [];
  for (let r = 1; r < rows.length; r++) {
    const cells = rows[r];
    const vals = [];
    for (let j = 0; j < schema.length; j++) {
      const raw = cells[cols[j]];
      const e = encodeCell(schema[j], raw === undefined ? undefined : raw.trim());
      if (e.err) throw new Error(`row ${r + 1}, column "${schema[j].name}": ${e.err}`);
      vals.push(e.v);
    }
    x.push(columns.map((c) => (c.bias ? 1 : c.c === undefined ? vals[c.j] : vals[c.j] === c.c ? 1 : 0)));
    y.push(target(vals[t]));
  }
  if (y.length === 0) throw new Error('the file has no data rows');
  return { x, y, d: names.length, n: y.length, classification: spec.task !== 'linear', loss: spec.task };
}

/**
 * The score of weights `w` on an encoded holdout: `metric`/`value` as `harmony query --data`
 * prints them (misclassification, 0 predicted as −1; or the MSE of predictions clamped to
 * [-1, 1]), `accuracy` (classifiers: 1 − misclassification), `loss` (the task's mean ℓ(⟨w, x⟩, y):
 * (z − y)²/2, ln(1 + e^{−yz}) or max(0, 1 − yz); no λ term) and the trivial predictor's metric.
 */
export function scoreModel(data, w) {
  let metric = 0, loss = 0;
  for (let i = 0; i < data.n; i++) {
    const row = data.x[i], yi = data.y[i];
    let z = 0;
    for (let k = 0; k < data.d; k++) z += w[k] * row[k];
    if (data.classification) {
      metric += (z > 0) !== (yi > 0) ? 1 : 0;
      const m = -yi * z;
      loss += data.loss === 'svm' ? Math.max(0, 1 - yi * z) : m > 0 ? m + Math.log1p(Math.exp(-m)) : Math.log1p(Math.exp(m));
    } else {
      const p = Math.min(1, Math.max(-1, z));
      metric += (p - yi) ** 2;
      loss += 0.5 * (z - yi) ** 2;
    }
  }
  const n = data.n;
  let baseline;
  if (data.classification) {
    const pos = data.y.filter((v) => v > 0).length;
    baseline = Math.min(pos, n - pos) / n;
  } else {
    const mean = data.y.reduce((a, b) => a + b, 0) / n;
    baseline = data.y.reduce((a, v) => a + (v - mean) ** 2, 0) / n;
  }
  return {
    metric: data.classification ? 'misclassification' : 'mse', value: metric / n,
    accuracy: data.classification ? 1 - metric / n : null, loss: loss / n,
    baseline: data.classification ? 'majority' : 'mean', baseline_value: baseline,
  };
}
