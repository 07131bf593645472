// The device playground: N simulated devices in this page, each a HarmonyDevice (the wasm SDK,
// served from /dashboard/sdk/) with its own in-memory ledger, posting one report each to a
// collection, `concurrency` at a time; the live count and estimates (with the dashboard's token,
// if signed in) refresh every LIVE_MS.
import { HarmonyDevice, memoryStorage, initHarmony } from '../sdk/harmony.js';
import { config as fetchConfig, estimates, token } from './api.js';
import { randomRecord, unsupported } from './records.js';
import { renderFigures } from './figure.js';
import { figuresOf } from './charts/index.js';

const LIVE_MS = 2000;
const $ = (id) => document.getElementById(id);
const form = $('run');
const params = new URLSearchParams(location.search);
if (params.get('collection')) form.collection.value = params.get('collection');
if (params.get('devices')) form.devices.value = params.get('devices');

const history = { train: [] };
let lastKey = '';

async function showLive(id) {
  if (!token.get()) {
    $('live-note').textContent = 'Sign in on the dashboard (this tab) to see the count and the estimates here.';
    return;
  }
  try {
    const doc = await estimates(id);
    $('report-count').textContent = `${doc.reports.toLocaleString('en')} reports on the server`;
    $('report-count').dataset.reports = String(doc.reports);
    const key = `${id}|${doc.reports}`;
    if (key !== lastKey) {
      lastKey = key;
      await renderFigures($('estimates'), figuresOf(doc, history));
    }
  } catch (e) {
    $('live-note').textContent = `estimates: ${e.message}`;
  }
}

async function run(id, n, concurrency) {
  const cfg = await fetchConfig(id);
  const why = unsupported(cfg);
  if (why) throw new Error(`cannot run devices here: ${why}`);
  await initHarmony();
  const progress = $('progress');
  const text = $('progress-text');
  progress.max = n;
  progress.value = 0;
  let next = 0, done = 0, accepted = 0, failed = 0, lastError = '';
  const t0 = performance.now();
  const show = () => {
    progress.value = done;
    text.textContent = `${done} / ${n} devices done: ${accepted} reports accepted, ${failed} failed${lastError ? ` (last error: ${lastError})` : ''}; ${((performance.now() - t0) / 1000).toFixed(1)} s`;
  };
  const live = setInterval(() => showLive(id), LIVE_MS);
  text.dataset.state = 'running';
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        next++;
        const device = new HarmonyDevice({ storage: memoryStorage(), retry: { baseMs: 50 } });
        try {
          const ack = await device.contribute(id, randomRecord(cfg));
          accepted += ack.accepted;
        } catch (e) {
          failed++;
          lastError = e.message;
        }
        done++;
        show();
      }
    }));
  } finally {
    clearInterval(live);
  }
  show();
  text.dataset.state = 'done';
  text.dataset.accepted = String(accepted);
  await showLive(id);
}

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  $('run-error').textContent = '';
  const id = form.collection.value.trim();
  const start = $('start');
  start.disabled = true;
  try {
    await run(id, Number(form.devices.value), Number(form.concurrency.value));
  } catch (err) {
    $('run-error').textContent = err.message;
    $('progress-text').dataset.state = 'failed';
  } finally {
    start.disabled = false;
  }
});
if (form.collection.value) showLive(form.collection.value);
