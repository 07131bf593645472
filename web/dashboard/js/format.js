// Number formatting shared by the tables, the CSV and the end-to-end test ("the printed precision").
export const DIGITS = 4;

/** A number with DIGITS decimals; null / undefined / non-finite: an em dash. */
export function fmt(x, digits = DIGITS) {
  return typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '—';
}

/** An Est ({estimate, std_error, ci95}) as table columns. */
export function estCols(e) {
  // The in-domain value and interval where the document has them (what is charted and listed
  // first: never outside the domain), the raw unbiased estimate beside them.
  const d = e?.in_domain;
  const ci = d ? d.ci95 : e?.ci95;
  return { estimate: (d ? d.estimate : e?.estimate) ?? null, se: e?.std_error ?? null,
    ci_lo: ci?.[0] ?? null, ci_hi: ci?.[1] ?? null, raw: e?.estimate ?? null };
}

/** An element with attributes and children (strings become text nodes). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c);
  return e;
}
