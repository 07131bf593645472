/* tslint:disable */
/* eslint-disable */

/**
 * A collection's config checked against the device's policy, with its OS-seeded generator.
 */
export class Collection {
    free(): void;
    [Symbol.dispose](): void;
    /**
     * Parses and checks the config (see `checkConfig`); throws the refusal.
     */
    constructor(config: string, policy: string, asked: string);
    /**
     * The config's version (what a report batch names).
     */
    readonly configVersion: number;
    /**
     * ε of one report.
     */
    readonly epsilon: number;
    /**
     * The collection id.
     */
    readonly id: string;
}

/**
 * A device's ledger and budget over the JSON state the page persists.
 */
export class DeviceState {
    free(): void;
    [Symbol.dispose](): void;
    /**
     * Records the server's acknowledgement of the collection's report.
     */
    acknowledge(collection: string): void;
    /**
     * From the persisted state (JSON; empty: a new device).
     */
    constructor(state: string);
    /**
     * The collection's ledger entry `{"item": {"id", "report"}, "acknowledged"}` (JSON): made
     * once, charged to the budget at `now_seconds`, and the same entry until acknowledged;
     * throws the refusal (policy, budget, already reported, bad input).
     */
    prepare(collection: Collection, input: string, now_seconds: number): string;
    /**
     * The state to persist (JSON).
     */
    state(): string;
}

/**
 * Checks a fetched config (JSON text) against the app's policy (JSON text; empty: the default
 * policy) and that it is the collection `asked` for; throws the Rust client's refusal.
 */
export function checkConfig(config: string, policy: string, asked: string): void;

export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module;

export interface InitOutput {
    readonly memory: WebAssembly.Memory;
    readonly __wbg_collection_free: (a: number, b: number) => void;
    readonly __wbg_devicestate_free: (a: number, b: number) => void;
    readonly checkConfig: (a: number, b: number, c: number, d: number, e: number, f: number, g: number) => void;
    readonly collection_configVersion: (a: number) => number;
    readonly collection_epsilon: (a: number) => number;
    readonly collection_id: (a: number, b: number) => void;
    readonly collection_new: (a: number, b: number, c: number, d: number, e: number, f: number, g: number) => void;
    readonly devicestate_acknowledge: (a: number, b: number, c: number, d: number) => void;
    readonly devicestate_new: (a: number, b: number, c: number) => void;
    readonly devicestate_prepare: (a: number, b: number, c: number, d: number, e: number, f: number) => void;
    readonly devicestate_state: (a: number, b: number) => void;
    readonly __wbindgen_export: (a: number) => void;
    readonly __wbindgen_export2: () => number;
    readonly __wbindgen_externrefs: WebAssembly.Table;
    readonly __wbindgen_add_to_stack_pointer: (a: number) => number;
    readonly __wbindgen_export3: (a: number, b: number) => number;
    readonly __wbindgen_export4: (a: number, b: number, c: number, d: number) => number;
    readonly __wbindgen_export5: (a: number, b: number, c: number) => void;
    readonly __wbindgen_export6: (a: number) => void;
    readonly __wbindgen_start: () => void;
}

export type SyncInitInput = BufferSource | WebAssembly.Module;

/**
 * Instantiates the given `module`, which can either be bytes or
 * a precompiled `WebAssembly.Module`.
 *
 * @param {{ module: SyncInitInput }} module - Passing `SyncInitInput` directly is deprecated.
 *
 * @returns {InitOutput}
 */
export function initSync(module: { module: SyncInitInput } | SyncInitInput): InitOutput;

/**
 * If `module_or_path` is {RequestInfo} or {URL}, makes a request and
 * for everything else, calls `WebAssembly.instantiate` directly.
 *
 * @param {{ module_or_path: InitInput | Promise<InitInput> }} module_or_path - Passing `InitInput` directly is deprecated.
 *
 * @returns {Promise<InitOutput>}
 */
export default function __wbg_init (module_or_path?: { module_or_path: InitInput | Promise<InitInput> } | InitInput | Promise<InitInput>): Promise<InitOutput>;
