// The estimates of an estimate document by path, and the multiple-comparison rule of the trend
// panel: pure functions (no DOM), shared by trend.js and the tests.

/** The family-wise error rate of the Holm–Bonferroni rule over the comparisons shown. */
export const FAMILY_ALPHA = 0.05;

export const RULE = 'Holm–Bonferroni over the comparisons shown (each period against the previous one, '
  + `for the chosen estimate) at family-wise level ${FAMILY_ALPHA}: sorted by p-value, the i-th smallest `
  + `(from 0) of m is flagged while p ≤ ${FAMILY_ALPHA}/(m − i)`;

// The document's own fields, not estimates (the server's change test walks the result only).
const META = new Set(['collection', 'reports', 'epsilon']);

/** An element's name in a path, as the server's change test names it: label, attribute, q, else its index. */
function elementName(v, i) {
  for (const k of ['label', 'attribute', 'q']) {
    if (typeof v?.[k] === 'string') return v[k];
    if (typeof v?.[k] === 'number') return `${k}=${v[k]}`;
  }
  return String(i);
}

/** An element's name as shown: its name, label, attribute or q, else its index. */
function shownName(v, i) {
  const n = v?.name ?? v?.label ?? v?.attribute ?? (v?.q === undefined ? undefined : `q=${v.q}`);
  return n === undefined ? `#${i}` : String(n);
}

const isEst = (v) => v && typeof v === 'object' && typeof v.estimate === 'number' && Number.isFinite(v.estimate)
  && typeof v.std_error === 'number' && Number.isFinite(v.std_error) && v.std_error > 0;

/**
 * Every estimate with a standard error in `doc`: [{path, label, est}], `path` as the server's
 * `/compare` names it (e.g. `attributes[1].categories[p]`), `label` as shown (`c › p`).
 */
export function estimatesOf(doc) {
  const out = [];
  const walk = (v, path, label) => {
    if (isEst(v)) {
      // A means document's numeric attribute is its mean.
      const shown = v.kind === 'numeric' && label.length ? [...label.slice(0, -1), `mean of ${label[label.length - 1]}`] : label;
      out.push({ path, label: shown.join(' › ') || path, est: v });
      return;
    }
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, `${path}[${elementName(x, i)}]`, [...label, shownName(x, i)]));
    } else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (path === '' && META.has(k)) continue;
        // An array's key names its kind (`attributes`, `categories`): its elements name themselves.
        walk(x, path ? `${path}.${k}` : k, Array.isArray(x) ? label : [...label, k]);
      }
    }
  };
  walk(doc, '', []);
  return out;
}

/** Which of `ps` the Holm–Bonferroni rule at level `alpha` flags. */
export function holm(ps, alpha = FAMILY_ALPHA) {
  const order = ps.map((p, i) => i).sort((i, j) => ps[i] - ps[j]);
  const out = ps.map(() => false);
  for (const [rank, i] of order.entries()) {
    if (!(ps[i] <= alpha / (ps.length - rank))) break;
    out[i] = true;
  }
  return out;
}
