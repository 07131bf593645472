// A simulated device's record in a collection's schema: random values in the schema's domains
// (numeric: a hump over [min, max]; categorical: Zipf-like weights over the labels, the first
// label most common) or, for heavy hitters, one item of a small built-in vocabulary (Zipf-like).
// Simulation only (Math.random): the SDK randomizes with its own CSPRNG.
export const ITEMS = ['apple', 'banana', 'cherry', 'date', 'elderberry', 'fig', 'grape', 'honeydew', 'kiwi', 'lemon',
  'mango', 'nectarine', 'orange', 'papaya', 'quince', 'raspberry', 'strawberry', 'tangerine', 'ugli', 'watermelon'];

function zipf(n, s = 1) {
  const w = Array.from({ length: n }, (_, i) => 1 / (i + 1) ** s);
  const total = w.reduce((a, b) => a + b, 0);
  let u = Math.random() * total;
  for (let i = 0; i < n; i++) { u -= w[i]; if (u <= 0) return i; }
  return n - 1;
}

/** One record for the config's task (an object by attribute name, or an item string). */
export function randomRecord(config) {
  if (config.task.kind === 'heavy-hitters') return ITEMS[zipf(ITEMS.length)];
  const rec = {};
  for (const a of config.schema) {
    if (a.kind === 'numeric') {
      // The mean of three uniforms, pulled towards the lower third: a skewed hump.
      const u = (Math.random() + Math.random() + Math.random()) / 3;
      rec[a.name] = a.min + (a.max - a.min) * u ** 1.4;
    } else {
      rec[a.name] = a.categories[zipf(a.categories.length, 0.8)];
    }
  }
  return rec;
}

/** Why the playground cannot run this collection's devices (null: it can). */
export function unsupported(config) {
  if (config.task.kind === 'train') return 'training collections take gradients (harmony submit); the browser SDK posts record reports only';
  if (config.task.mechanism === 'adaptive-rounds') return 'adaptive-rounds collections take answers to rounds (harmony submit); the browser SDK posts record reports only';
  return null;
}
