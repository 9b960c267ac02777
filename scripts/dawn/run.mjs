// scripts/dawn-run's Node side: Dawn as navigator.gpu (navigator.mjs, imported first), then the wasm
// build's `run(args)` (src/bin/dawn.rs). Usage: node scripts/dawn/run.mjs PKG_DIR SUBCOMMAND ARGS…
// where PKG_DIR holds `wasm-bindgen --target nodejs` output of tokenmeter-dawn.wasm. The JSON
// result goes to stdout, progress to stderr; exit 1 with one `error:` line on failure.
import './navigator.mjs';
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const [pkg, ...args] = process.argv.slice(2);
if (!pkg) {
  console.error('usage: node scripts/dawn/run.mjs PKG_DIR adapter|roofline|speed|bench|generate ARGS');
  process.exit(2);
}
const glue = await import(pathToFileURL(resolve(pkg, 'tokenmeter-dawn.js')).href);
const run = glue.run ?? glue.default?.run;
try {
  // `--model DIR`: the wasm build cannot read files; the folder's files go to it first.
  const at = args.indexOf('--model');
  if (at >= 0 && args[at + 1]) {
    const dir = args[at + 1];
    const addFile = glue.add_file ?? glue.default?.add_file;
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (entry.isFile()) addFile(entry.name, await readFile(join(dir, entry.name)));
    }
  }
  const out = await run(args);
  process.stdout.write(out + '\n');
  // dawn.node keeps the event loop alive: end the process once the result is out.
  process.exit(0);
} catch (e) {
  console.error(`error: ${e?.message ?? e}`);
  process.exit(1);
}
