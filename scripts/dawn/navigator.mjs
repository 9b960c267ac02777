// Imported first by scripts/dawn/run.mjs, and preloaded into the Node process that runs tests/dawn
// (NODE_ARGS=--import=<this file>, set by dawn_env): Dawn's
// WebGPU (the `webgpu` npm package, dawn.node) as `navigator.gpu`, where wgpu's browser backend
// looks for it. wgpu looks on a global that has a `Window` or `WorkerGlobalScope` property.
import { create, globals } from 'webgpu';

Object.assign(globalThis, globals);
globalThis.WorkerGlobalScope ??= class WorkerGlobalScope {};
const gpu = create(['backend=vulkan']);
Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true });
