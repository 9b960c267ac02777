// End to end: the page in a browser without WebGPU. Chromium launched without the flags that
// enable WebGPU here, and with it disabled (`--disable-features=WebGPU`): Chromium 156 still
// exposes `navigator.gpu`, but `requestAdapter()` answers null (the case the issue saw: wgpu's
// "no GPU adapter: … not compiled in"). The page shows its own notice (English and 中文, at 1,400
// and 390 px), turns the engine target off, and runs a chat workload against a real server:
// llama.cpp's llama-server (scripts/peer) serving the tiny GGUF fixture. Chat sends text, so this
// needs the page's tokenizer, loaded without a GPU. Then a browser with no `navigator.gpu` at all
// (Firefox on Linux, Safari before 26), made by an init script that hides it from the page and its
// engine worker: the notice says this browser offers no WebGPU.
// Usage: TOKENMETER_LLAMA_SERVER=PATH node tests/e2e/no-webgpu.mjs [DIST] [OUT]
//   DIST: a folder built by scripts/build-web (default target/e2e/dist); OUT: screenshots
//   (default target/e2e).
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdir, readFile } from 'node:fs/promises';
import { serve } from './serve.mjs';

const dist = process.argv[2] ?? 'target/e2e/dist';
const out = process.argv[3] ?? 'target/e2e';
const llamaServer = process.env.TOKENMETER_LLAMA_SERVER;
if (!llamaServer) {
  console.error('FAIL: TOKENMETER_LLAMA_SERVER must name llama-server (scripts/peer prints it)');
  process.exit(1);
}
await mkdir(out, { recursive: true });

// The peer on a free port (as scripts/test starts it for the browser tests).
const port = await new Promise((ok) => {
  const probe = createServer().listen(0, '127.0.0.1', () => { const p = probe.address().port; probe.close(() => ok(p)); });
});
const peerLog = [];
const peer = spawn(llamaServer, ['-m', 'tests/fixtures/peer/qwen3-tiny.gguf', '--alias', 'qwen3-tiny',
  '--host', '127.0.0.1', '--port', String(port), '-t', '1', '-c', '4096', '-np', '4',
  '--cors-headers', 'Authorization,Content-Type,Accept'], { stdio: ['ignore', 'pipe', 'pipe'] });
for (const stream of [peer.stdout, peer.stderr]) stream.on('data', (d) => peerLog.push(String(d)));
const endpoint = `http://127.0.0.1:${port}/v1`;
const server = await serve({ '/': dist });
let browser = null;
let page = null;

const stop = async () => {
  await browser?.close();
  await server.close();
  peer.kill();
};
const fail = async (msg) => {
  console.error(`FAIL: ${msg}`);
  if (page) await page.screenshot({ path: `${out}/no-webgpu-failed.png`, fullPage: true }).catch(() => {});
  await stop();
  process.exit(1);
};
const check = async (ok, msg) => { if (!ok) await fail(msg); };

for (let i = 0; ; i += 1) {
  if (peer.exitCode !== null) await fail(`llama-server exited: ${peerLog.join('').slice(-2000)}`);
  const up = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok).catch(() => false);
  if (up) break;
  if (i > 240) await fail('llama-server did not start in 120 s');
  await new Promise((ok) => setTimeout(ok, 500));
}

/** A new page in Chromium without WebGPU (`hideGpu`: nor `navigator.gpu`); console errors are
 *  collected. */
async function open(hideGpu) {
  await browser?.close();
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--disable-features=WebGPU', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-sandbox'],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
  if (hideGpu) await context.addInitScript(hideNavigatorGpu);
  page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`${m.text()} (${m.location().url ?? ''})`); });
  return errors;
}

/** In the page (an init script): no `navigator.gpu` there, nor in the workers it starts. Each
 *  worker's script is wrapped in one that imports it (statically: it runs before any message
 *  arrives) and then deletes the property; the page's own revoke of the script's Blob URL is
 *  skipped, since the wrapper imports it later. */
function hideNavigatorGpu() {
  delete Navigator.prototype.gpu;
  const PageWorker = window.Worker;
  URL.revokeObjectURL = () => {};
  window.Worker = class extends PageWorker {
    constructor(url, options) {
      const wrapper = `import ${JSON.stringify(String(url))};\ndelete WorkerNavigator.prototype.gpu;\n`;
      super(URL.createObjectURL(new Blob([wrapper], { type: 'text/javascript' })), options);
    }
  };
}

const byId = (id) => page.getByTestId(id);
const text = async (id) => (await byId(id).textContent()) ?? '';
const alerts = async () => (await page.locator('[role=alert]').allTextContents()).filter(Boolean).join(' | ');

/** Waits for the notice; checks why, that it is the page's own words (no wgpu text) and that the
 *  status line and the target card follow it. */
async function notice(why) {
  try { await byId('no-webgpu').waitFor({ timeout: 120000 }); } catch {
    await fail(`no notice without WebGPU; status: ${await text('status')}`);
  }
  await check(await byId('no-webgpu').getAttribute('data-why') === why,
    `the notice says ${await byId('no-webgpu').getAttribute('data-why')}, not ${why}`);
  const said = await text('no-webgpu');
  await check(!/compiled in|adapter:/.test(said), `wgpu's text in the notice: ${said}`);
  await check(/Chrome and Edge 113\+/.test(said) && /Safari 26\+/.test(said) && /Firefox 141\+/.test(said),
    `the notice names no browser that works: ${said}`);
  await check(/server needs no GPU/.test(said), `the notice does not say a server needs no GPU: ${said}`);
  // Start-up ended: the tokenizer loaded (the status says so once it has).
  await page.waitForFunction(() => /^No WebGPU/.test(document.querySelector('[data-testid=status]')?.textContent ?? ''),
    null, { timeout: 60000 }).catch(async () => fail(`status: ${await text('status')}`));
  await check(await byId('target-kind').inputValue() === 'remote', 'the target is not the server');
  // (Playwright's isDisabled() does not read an <option>'s own attribute.)
  await check(await page.locator('[data-testid=target-kind] option[value=browser]').evaluate((o) => o.disabled),
    'the engine target can still be picked');
  await check(await byId('model').isDisabled(), 'the model picker is enabled without WebGPU');
  return said;
}

// 1. WebGPU off: navigator.gpu is there, but no adapter.
const errors = await open(false);
await page.goto(`${server.url}?requests=4&rate=8&input=8:16&output=4:4`);
const offered = await page.evaluate(async () => (navigator.gpu ? (await navigator.gpu.requestAdapter()) !== null : null));
await check(offered === false, `expected navigator.gpu and no adapter, got ${offered === null ? 'no navigator.gpu' : 'an adapter'}`);
const said = await notice('no-adapter');
console.log(`notice: ${said.slice(0, 160)}…`);
console.log(`status: ${await text('status')}`);
await page.screenshot({ path: `${out}/no-webgpu-1400.png` });
await page.locator('[data-testid=lang] button', { hasText: '中文' }).click();
const zh = await text('no-webgpu');
await check(/WebGPU 在此找不到 GPU/.test(zh) && /Safari 26\+/.test(zh), `the notice is not in 中文: ${zh}`);
await check(/^此浏览器没有 WebGPU/.test(await text('status')), `the status is not in 中文: ${await text('status')}`);
await page.screenshot({ path: `${out}/no-webgpu-zh.png` });
await page.locator('[data-testid=lang] button', { hasText: 'English' }).click();
await page.setViewportSize({ width: 390, height: 844 });
await page.waitForFunction(() => document.documentElement.scrollWidth - window.innerWidth <= 1, null, { timeout: 5000 })
  .catch(() => {});
const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
await check(overflow <= 1, `at 390 px the page is ${overflow} px wider than the screen`);
await page.screenshot({ path: `${out}/no-webgpu-390.png` });
await page.setViewportSize({ width: 1400, height: 1000 });

// 2. A chat run against the peer, as a user would set it up: its URL, the model it lists, chat.
await byId('target-endpoint').fill(endpoint);
await byId('fetch-models').click();
await page.waitForFunction(() => document.querySelector('[data-testid=target-model]')?.value === 'qwen3-tiny', null,
  { timeout: 30000 }).catch(async () => fail(`the peer's model was not listed: ${await alerts()}`));
await byId('target-api').selectOption('chat');
await check(await byId('run').isEnabled(), `Run is disabled: ${await page.locator('.run-card').textContent()}`);
await byId('run').click();
// The report, or the run's error (a chat run without the tokenizer ends at once).
await page.waitForFunction(() => document.querySelector('[data-testid=report], .run-card .error'), null,
  { timeout: 180000 }).catch(() => {});
if (!(await byId('report').isVisible())) {
  await fail(`no report from the chat run; errors shown: ${await alerts()}`);
}
const [file] = await Promise.all([page.waitForEvent('download'), byId('download-json').click()]);
const result = JSON.parse(await readFile(await file.path(), 'utf8'));
const target = result.run_config.target ?? {};
await check(target.base_url === endpoint && target.api === 'chat' && target.model === 'qwen3-tiny',
  `the record does not name the peer's chat API: ${JSON.stringify(target)}`);
const done = result.requests.filter((r) => !r.error && r.output_len > 0);
await check(result.requests.length === 4 && done.length === 4,
  `${done.length} of 4 chat requests streamed (${JSON.stringify(result.requests.map((r) => r.error ?? r.output_len))})`);
await check((await text('history')).includes('qwen3-tiny @'), 'the chat run is not in the history');
console.log(`chat run: ${done.length} requests against llama-server, TTFT p50 ${result.summary.ttft_ms.p50.toFixed(1)} ms`);
await check(errors.length === 0, `console errors: ${errors.join(' | ')}`);

// 3. A browser with no navigator.gpu at all, in the page and in its engine worker.
const errorsHidden = await open(true);
await page.goto(server.url);
await check(await page.evaluate(() => navigator.gpu === undefined), 'navigator.gpu is still there');
await notice('missing');
await check(/This browser offers no WebGPU/.test(await text('no-webgpu')), `the notice: ${await text('no-webgpu')}`);
await page.screenshot({ path: `${out}/no-webgpu-missing.png` });
await check(errorsHidden.length === 0, `console errors: ${errorsHidden.join(' | ')}`);

await stop();
console.log(`ok, screenshots in ${out}/no-webgpu-*.png`);
