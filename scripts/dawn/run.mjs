// scripts/dawn-run's Node side: Dawn as navigator.gpu (navigator.mjs, imported first), then the wasm
// build's `run(args)` (src/bin/dawn.rs). Usage: node scripts/dawn/run.mjs PKG_DIR SUBCOMMAND ARGS…
// where PKG_DIR holds `wasm-bindgen --target nodejs` output of tokenmeter-dawn.wasm. The JSON
// result goes to stdout, progress to stderr; exit 1 with one `error:` line on failure.
import './navigator.mjs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkg, ...args] = process.argv.slice(2);
if (!pkg) {
  console.error('usage: node scripts/dawn/run.mjs PKG_DIR adapter|roofline|speed ARGS');
  process.exit(2);
}
const glue = await import(pathToFileURL(resolve(pkg, 'tokenmeter-dawn.js')).href);
const run = glue.run ?? glue.default?.run;
try {
  const out = await run(args);
  process.stdout.write(out + '\n');
  // dawn.node keeps the event loop alive: end the process once the result is out.
  process.exit(0);
} catch (e) {
  console.error(`error: ${e?.message ?? e}`);
  process.exit(1);
}
