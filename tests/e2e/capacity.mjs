// The browser client's capacity (issue 17, item 5): the page's remote target against a local
// zero-latency OpenAI-compatible streaming server (in this script), in headless Chromium, at
// rising open-loop rates; for each, how late the page called fetch() after each request's planned
// arrival (the record's sent_s − arrival_s: the client's own lateness) and how many streams the
// server saw at once. The target is lateness p99 under 1 ms.
// Not part of ./scripts/test (minutes); figures go to BENCHMARKS.md.
// Usage: node tests/e2e/capacity.mjs [DIST] [--h2] [RATE:REQUESTS[:TOKENS[:GAP_MS]] ...]
//   DIST: a folder built by scripts/build-web (default target/e2e/dist)
//   --h2: serve over TLS with HTTP/2 (a self-signed certificate made with openssl; Chromium told to
//         accept it), so the browser is not held to an HTTP/1.1 origin's 6 connections
//   cases: default 50:500 100:1000 200:2000 500:3000 (4 tokens, no gap)
//   CAPACITY_DEBUG=1: also print each rate's latest sends (when in the run they were late)
// On a busy machine the renderer is descheduled for tens of ms at a time (seen at load average 5:
// sends 50-100 ms late every ~2 s, with no long task on the main thread): measure on a quiet one.
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { createSecureServer } from 'node:http2';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from './serve.mjs';

const args = process.argv.slice(2);
const h2 = args.includes('--h2');
const rest = args.filter((a) => a !== '--h2');
const dist = rest[0] && !/^\d/.test(rest[0]) ? rest.shift() : 'target/e2e/dist';
const cases = (rest.length ? rest : ['50:500', '100:1000', '200:2000', '500:3000']).map((c) => {
  const [rate, requests, tokens = 4, gap = 0] = c.split(':').map(Number);
  return { rate, requests, tokens, gap };
});

// The mock server: every completion streams `tokens` chunks `gap` ms apart, then usage and [DONE].
let reply = { tokens: 4, gap: 0 };
let inFlight = 0;
let mostInFlight = 0;
const cors = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': 'Authorization, Content-Type, Accept',
  'access-control-allow-methods': 'GET, POST, OPTIONS',
  'access-control-max-age': '86400',
};
async function handle(req, res) {
  if (req.method === 'OPTIONS') { res.writeHead(204, cors); res.end(); return; }
  if (req.method === 'GET' && req.url.startsWith('/v1/models')) {
    res.writeHead(200, { ...cors, 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data: [{ id: 'mock-model', object: 'model' }] }));
    return;
  }
  for await (const _ of req); // the body
  inFlight += 1;
  mostInFlight = Math.max(mostInFlight, inFlight);
  res.writeHead(200, { ...cors, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const { tokens, gap } = reply;
  for (let i = 0; i < tokens; i += 1) {
    res.write(`data: {"choices":[{"index":0,"text":"t${i}","finish_reason":null}]}\n\n`);
    if (gap > 0) await new Promise((ok) => setTimeout(ok, gap));
  }
  inFlight -= 1;
  res.end(`data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":${tokens}}}\n\ndata: [DONE]\n\n`);
}
let mock;
if (h2) {
  const dir = mkdtempSync(join(tmpdir(), 'tokenmeter-capacity-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')],
  { stdio: 'ignore' });
  mock = createSecureServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')),
    allowHTTP1: true, settings: { maxConcurrentStreams: 100000 } }, handle);
} else {
  mock = createServer({ keepAliveTimeout: 60000 }, handle);
}
await new Promise((ok) => mock.listen(0, '127.0.0.1', ok));
const endpoint = `${h2 ? 'https' : 'http'}://127.0.0.1:${mock.address().port}/v1`;

const site = await serve({ '/': dist });
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--enable-unsafe-webgpu', '--no-first-run', '--disable-background-networking', '--no-sandbox',
    ...(h2 ? ['--ignore-certificate-errors'] : [])],
});
const context = await browser.newContext({ acceptDownloads: true, ignoreHTTPSErrors: h2,
  viewport: { width: 1440, height: 1000 } });
const percentile = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (rank - lo);
};
const rows = [];
let failed = false;
for (const c of cases) {
  reply = { tokens: c.tokens, gap: c.gap };
  mostInFlight = 0;
  const page = await context.newPage();
  const byId = (id) => page.getByTestId(id);
  const query = new URLSearchParams({ target: 'remote', endpoint, served_model: 'mock-model', api: 'completions',
    arrival: 'poisson', rate: String(c.rate), requests: String(c.requests), input: '4:4',
    output: `${c.tokens}:${c.tokens}`, prompts: 'random' });
  await page.goto(`${site.url.replace(/\/$/, '')}/?${query}`);
  await page.waitForFunction(() => /^(Ready|Error)/.test(document.querySelector('[data-testid=status]')?.textContent ?? ''),
    null, { timeout: 600000 });
  await byId('run').click();
  await byId('report').waitFor({ timeout: 1800000 });
  const [json] = await Promise.all([page.waitForEvent('download'), byId('download-json').click()]);
  const result = JSON.parse(await readFile(await json.path(), 'utf8'));
  const late = result.requests.filter((r) => typeof r.sent_s === 'number').map((r) => (r.sent_s - r.arrival_s) * 1000);
  const errors = result.requests.filter((r) => r.error).length;
  const row = { rate: c.rate, requests: c.requests, tokens: c.tokens, gap_ms: c.gap, sent: late.length, errors,
    most_in_flight: mostInFlight, lateness_ms: { p50: percentile(late, 50), p99: percentile(late, 99),
      max: Math.max(...late) }, saturation: result.saturation?.reason ?? null };
  console.log(JSON.stringify(row));
  if (process.env.CAPACITY_DEBUG) {
    const worst = result.requests.filter((r) => typeof r.sent_s === 'number')
      .map((r) => [r.arrival_s, (r.sent_s - r.arrival_s) * 1000]).sort((a, b) => b[1] - a[1]).slice(0, 12);
    console.log('latest sends (arrival s, lateness ms):', worst.map(([a, l]) => `${a.toFixed(3)}:${l.toFixed(1)}`).join(' '));
  }
  if (late.length === 0) failed = true;
  rows.push(row);
  await page.close();
}
const f = (x) => (Number.isFinite(x) ? x.toFixed(3) : '–');
console.log(`\nbrowser client, ${h2 ? 'HTTPS + HTTP/2' : 'HTTP/1.1'}, Chromium ${browser.version()}`);
console.log('| rate (req/s) | requests | stream | streams in flight (most, server) | lateness p50 | p99 | max | errors |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.rate} | ${r.requests} | ${r.tokens} tokens${r.gap_ms ? `, ${r.gap_ms} ms apart` : ''} | `
    + `${r.most_in_flight} | ${f(r.lateness_ms.p50)} ms | ${f(r.lateness_ms.p99)} ms | ${f(r.lateness_ms.max)} ms | `
    + `${r.errors}${r.saturation ? ` (stopped: ${r.saturation})` : ''} |`);
}
await browser.close();
await site.close();
mock.close();
process.exit(failed ? 1 : 0);
