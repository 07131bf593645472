// The estimate document as JSON (as the server sent it) and as CSV (every figure's table, one
// block per table: a `table` column, the header, the rows; full precision).
export function toCsv(figures) {
  const q = (v) => {
    const s = v === null || v === undefined ? '' : String(v);
    return /[",\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
  };
  const blocks = figures.map((f) => [['table', ...f.columns.map((c) => c.label)],
    ...f.rows.map((r) => [f.id, ...f.columns.map((c) => r[c.key])])].map((row) => row.map(q).join(',')).join('\n'));
  return `${blocks.join('\n\n')}\n`;
}

/** Points `a` (an <a download>) at `text` as a file. */
export function setDownload(a, name, type, text) {
  if (a.href.startsWith('blob:')) URL.revokeObjectURL(a.href);
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
}
