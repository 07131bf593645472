/* tslint:disable */
/* eslint-disable */
export const memory: WebAssembly.Memory;
export const __wbg_collection_free: (a: number, b: number) => void;
export const __wbg_devicestate_free: (a: number, b: number) => void;
export const checkConfig: (a: number, b: number, c: number, d: number, e: number, f: number, g: number) => void;
export const collection_configVersion: (a: number) => number;
export const collection_epsilon: (a: number) => number;
export const collection_id: (a: number, b: number) => void;
export const collection_new: (a: number, b: number, c: number, d: number, e: number, f: number, g: number) => void;
export const devicestate_acknowledge: (a: number, b: number, c: number, d: number) => void;
export const devicestate_new: (a: number, b: number, c: number) => void;
export const devicestate_prepare: (a: number, b: number, c: number, d: number, e: number, f: number) => void;
export const devicestate_state: (a: number, b: number) => void;
export const __wbindgen_export: (a: number) => void;
export const __wbindgen_export2: () => number;
export const __wbindgen_externrefs: WebAssembly.Table;
export const __wbindgen_add_to_stack_pointer: (a: number) => number;
export const __wbindgen_export3: (a: number, b: number) => number;
export const __wbindgen_export4: (a: number, b: number, c: number, d: number) => number;
export const __wbindgen_export5: (a: number, b: number, c: number) => void;
export const __wbindgen_export6: (a: number) => void;
export const __wbindgen_start: () => void;
