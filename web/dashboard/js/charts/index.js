// The figures of an estimate document, by task.
import * as means from './means.js';
import * as frequency from './frequency.js';
import * as range from './range.js';
import * as range2d from './range2d.js';
import * as heavy from './heavy.js';
import * as marginals from './marginals.js';
import * as linear from './linear.js';
import * as train from './train.js';

const BY_TASK = { means, frequency, range, range2d, 'heavy-hitters': heavy, marginals, 'linear-queries': linear, train };

export function figuresOf(doc, history = { train: [] }) {
  const m = BY_TASK[doc.task];
  if (!m) return [];
  return m.figures(doc, history);
}
