// Types of harmony.js (the wasm exports' own types are in ./pkg/harmony_wasm.d.ts).
export { Collection, DeviceState, checkConfig } from './pkg/harmony_wasm.js';

/** What the app (never the server) lets a collection ask of this device. */
export interface Policy {
  /** The largest ε one collection may spend (the Rust default is 10). */
  max_epsilon: number;
  /** The tasks allowed, e.g. ["means", "frequency"] (absent: every task). */
  tasks?: Array<'means' | 'frequency' | 'range' | 'heavy-hitters' | 'marginals' | 'linear-queries' | 'train'>;
  /** The mechanism, strategy and method names allowed, e.g. ["grr", "olh"] (absent: every one). */
  mechanisms?: string[];
  /** At most ε per rolling window of days across collections: "2/1" or {epsilon: 2, days: 1}. */
  budget?: string | { epsilon: number; days: number };
}

/** A device's input: a record by attribute name (numbers or labels), or heavy hitters' items. */
export type DeviceInput = Record<string, number | string> | string | string[];

/** One report as the ledger keeps it. */
export interface LedgerEntry {
  item: { id: string; report: string };
  acknowledged: boolean;
  round?: number;
}

/** What storage holds under the device's key. */
export interface DeviceStateJson {
  ledger?: Record<string, LedgerEntry>;
  spends?: Array<{ collection: string; epsilon: number; at: number }>;
}

export interface RetryOptions {
  attempts?: number;
  baseMs?: number;
  maxMs?: number;
  maxRetryAfterMs?: number;
  timeoutMs?: number;
}

/** A Storage-like object (localStorage, sessionStorage, memoryStorage()). */
export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** An asynchronous storage (indexedDbStorage()): reads see every tab's committed writes. */
export interface AsyncStorageLike {
  getItemAsync(key: string): Promise<string | null>;
  setItemAsync(key: string, value: string): Promise<void>;
}

/** The device state in IndexedDB database `name` (default "harmony-device"): the default storage. */
export function indexedDbStorage(name?: string): AsyncStorageLike;

export interface HarmonyDeviceOptions {
  /** The server's base URL ('' : this page's origin). */
  server?: string;
  /** The app's policy; null: the default (max_epsilon 10, every task and mechanism, no budget). */
  policy?: Policy | null;
  /** Where the ledger and the budget persist (default: indexedDbStorage(), else localStorage). */
  storage?: StorageLike | AsyncStorageLike;
  /** The key in storage (default "harmony-device"). */
  storageKey?: string;
  retry?: RetryOptions;
  fetch?: typeof fetch;
}

export interface Contribution {
  reportId: string;
  accepted: number;
  duplicates: number;
}

export class HarmonyDevice {
  constructor(options?: HarmonyDeviceOptions);
  /** The persisted ledger and budget. */
  state(): Promise<DeviceStateJson>;
  /** Reports `record` once to the collection; see README.md. Rejects with the policy's refusal
   * (an Error whose message is the Rust client's), a HarmonyHttpError, or "already reported". */
  contribute(collectionId: string, record: DeviceInput): Promise<Contribution>;
}

export class HarmonyHttpError extends Error {
  status: number;
  field: string;
  url: string;
}

/** Loads the wasm module once (default: ./pkg/harmony_wasm_bg.wasm next to harmony.js). */
export function initHarmony(wasmUrl?: string | URL): Promise<unknown>;
/** A Storage-like object in memory. */
export function memoryStorage(): StorageLike & { removeItem(key: string): void };
