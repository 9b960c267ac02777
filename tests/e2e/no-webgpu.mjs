// End to end: the page in a browser without WebGPU. Chromium with WebGPU turned off
// (`--disable-features=WebGPU`: no `navigator.gpu`, in the page or its worker) shows the page's
// notice (English and 中文, at 1,400 and 390 px; never wgpu's text), turns the engine target off,
// and still runs a chat workload against a real server: llama.cpp's llama-server (scripts/peer)
// serving the tiny GGUF fixture. Chat sends text, so this needs the page's tokenizer, which is
// loaded without a GPU. Then Chromium's default here (`navigator.gpu` present, `requestAdapter()`
// null without --enable-unsafe-webgpu) shows the no-adapter notice.
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

/** A new page in Chromium launched with `webgpu` flags; console errors are collected. */
async function open(webgpu) {
  await browser?.close();
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [...webgpu, '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-sandbox'],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 }, acceptDownloads: true });
  page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`${m.text()} (${m.location().url ?? ''})`); });
  return errors;
}

const byId = (id) => page.getByTestId(id);
const text = async (id) => (await byId(id).textContent()) ?? '';

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
  await check(await page.locator('[data-testid=target-kind] option[value=browser]').isDisabled(),
    'the engine target can still be picked');
  await check(await byId('model').isDisabled(), 'the model picker is enabled without WebGPU');
  return said;
}

// 1. WebGPU turned off: no navigator.gpu.
const errors = await open(['--disable-features=WebGPU']);
await page.goto(`${server.url}?requests=4&rate=8&input=8:16&output=4:4`);
await check(await page.evaluate(() => navigator.gpu === undefined), 'navigator.gpu is there with WebGPU disabled');
const said = await notice('missing');
console.log(`notice: ${said.slice(0, 160)}…`);
console.log(`status: ${await text('status')}`);
await page.screenshot({ path: `${out}/no-webgpu-1400.png` });
await page.locator('[data-testid=lang] button', { hasText: '中文' }).click();
const zh = await text('no-webgpu');
await check(/此浏览器不提供 WebGPU/.test(zh) && /Safari 26\+/.test(zh), `the notice is not in 中文: ${zh}`);
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
  { timeout: 30000 }).catch(async () => fail(`the peer's model was not listed: ${await page.locator('[role=alert]').allTextContents()}`));
await byId('target-api').selectOption('chat');
await check(await byId('run').isEnabled(), `Run is disabled: ${await page.locator('.run-card').textContent()}`);
await byId('run').click();
try { await byId('report').waitFor({ timeout: 180000 }); } catch {
  await fail(`no report from the chat run; errors shown: ${await page.locator('[role=alert]').allTextContents()}`);
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

// 3. Chromium's default on this machine: navigator.gpu is there, but no adapter without
// --enable-unsafe-webgpu. (Where it does give one, the page has WebGPU and no notice is due.)
const errorsDefault = await open([]);
await page.goto(server.url);
const adapter = await page.evaluate(async () => (navigator.gpu ? (await navigator.gpu.requestAdapter()) !== null : null));
if (adapter === false) {
  await notice('no-adapter');
  console.log(`no adapter: ${(await text('no-webgpu')).slice(0, 100)}…`);
} else {
  console.log(`Chromium's default here has ${adapter === null ? 'no navigator.gpu' : 'an adapter'}: no-adapter case not checked`);
  if (adapter === null) await notice('missing');
}
await check(errorsDefault.length === 0, `console errors: ${errorsDefault.join(' | ')}`);

await stop();
console.log(`ok, screenshots in ${out}/no-webgpu-*.png`);
