// End-to-end check of the dashboard in headless Chromium (WebGPU via SwiftShader, so the
// workloads are tiny): settings from the URL, inline validation, a live run with charts, the
// report and its downloads, a second run and the comparison, cancelling, history after a
// reload, the language switch and the playground. Saves a screenshot of the page after the first run.
// Usage: node tests/e2e/dashboard.mjs http://127.0.0.1:8080/ [screenshot.png]
import { chromium } from 'playwright-core';
import { readFile } from 'node:fs/promises';

const base = process.argv[2] ?? 'http://127.0.0.1:8080/';
const shot = process.argv[3] ?? 'target/dashboard.png';
const workload = 'requests=8&rate=20&input=16:48&output=8:16';
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--enable-unsafe-webgpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-sandbox'],
});
const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, acceptDownloads: true });
const page = await context.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
const fail = async (msg) => {
  console.error(`FAIL: ${msg}`);
  if (errors.length) console.error(`console errors: ${errors.join(' | ')}`);
  await page.screenshot({ path: shot, fullPage: true });
  await browser.close();
  process.exit(1);
};
const check = async (ok, msg) => { if (!ok) await fail(msg); };
const byId = (id) => page.getByTestId(id);
const text = async (id) => (await byId(id).textContent()) ?? '';
const points = async (id) => Number(await byId(id).getAttribute('data-points'));

async function waitReady() {
  try {
    await page.waitForFunction(() => /^(Ready|Error)/.test(document.querySelector('[data-testid=status]')?.textContent ?? ''),
      null, { timeout: 180000 });
  } catch { await fail(`model never became ready; status: ${await text('status')}`); }
  const status = await text('status');
  await check(status.startsWith('Ready'), `status: ${status}`);
  return status;
}

async function runAndWait(label) {
  const t0 = Date.now();
  await check(await byId('run').isEnabled(), `${label}: Run is disabled`);
  await byId('run').click();
  await check(await byId('run').isDisabled(), `${label}: Run stays enabled while running`);
  // Live: progress and points before the report.
  try {
    await page.waitForFunction(() => /finished \d+ \/ \d+/.test(document.querySelector('[data-testid=progress]')?.textContent ?? ''),
      null, { timeout: 120000 });
  } catch { await fail(`${label}: no "finished k / n" progress`); }
  try {
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=chart-batch]')?.dataset.points) > 0
      || document.querySelector('[data-testid=report]'), null, { timeout: 120000 });
  } catch { await fail(`${label}: the charts never moved`); }
  try {
    await byId('report').waitFor({ timeout: 300000 });
  } catch { await fail(`${label}: no report; progress: ${await byId('progress').textContent().catch(() => '-')}`); }
  console.log(`${label}: report after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

// 1. Settings come from the URL.
await page.goto(`${base}?${workload}`);
console.log(`status: ${await waitReady()}`);
await check(await byId('setting-requests').inputValue() === '8', 'requests not read from the URL');
await check(await byId('setting-input').inputValue() === '16:48', 'input length not read from the URL');

// 2. Validated as typed: a message by the field, Run disabled, the URL follows.
await byId('setting-rate').fill('fast');
await check((await page.locator('.field.invalid').count()) === 1, 'no inline error for rate "fast"');
await check(await byId('run').isDisabled(), 'Run enabled with an invalid rate');
await byId('setting-output').fill('9:3');
await check(/minimum is above the maximum/.test(await page.locator('.field.invalid').nth(1).textContent()), 'no range message');
await byId('setting-rate').fill('20');
await byId('setting-output').fill('8:16');
await check((await page.locator('.field.invalid').count()) === 0, 'errors stay after fixing the fields');
await check(page.url().includes('requests=8') && page.url().includes('rate=20'), `URL not mirrored: ${page.url()}`);

// 3. A run: live charts, then the report.
await runAndWait('run 1');
for (const id of ['chart-ttft', 'chart-tpot', 'chart-throughput', 'chart-batch', 'chart-kv']) {
  const n = await points(id);
  console.log(`${id}: ${n} points`);
  await check(n > 0, `${id} has no points`);
}
await check(await points('chart-ttft') === 8, 'TTFT chart should have one point per request');
const dots = await page.locator('[data-testid=chart-ttft] svg circle').count();
await check(dots >= 8, `TTFT chart draws ${dots} dots`);
const summary = await text('summary');
await check(/TTFT/.test(summary) && /P99\.9/.test(summary), 'summary table incomplete');
await check(/Benchmark report/.test(await text('text-report')), 'English text report missing');
await check((await text('diagnosis')).length > 0, 'no diagnosis');
await page.evaluate(() => window.scrollTo(0, 0));
await page.screenshot({ path: shot, fullPage: true });

// 4. Downloads: the CLI's JSON schema and the CSV.
const [json] = await Promise.all([page.waitForEvent('download'), byId('download-json').click()]);
const result = JSON.parse(await readFile(await json.path(), 'utf8'));
for (const key of ['config', 'summary', 'diagnosis', 'baseline', 'requests', 'steps']) {
  await check(key in result, `JSON has no ${key}`);
}
await check(result.requests.length === 8 && result.config.workload.num_requests === 8, 'JSON has the wrong requests');
const [csv] = await Promise.all([page.waitForEvent('download'), byId('download-csv').click()]);
const rows = (await readFile(await csv.path(), 'utf8')).trim().split('\r\n');
await check(rows.length === 9 && rows[0].startsWith('id,arrival_s'), `CSV has ${rows.length} rows`);
console.log(`downloads: ${json.suggestedFilename()} (${result.steps.length} steps), ${csv.suggestedFilename()}`);

// 5. The report's own language toggle.
await page.locator('[data-testid=report] .segmented button', { hasText: '中文' }).click();
await check(/性能测试报告/.test(await text('text-report')), 'Chinese text report missing');

// 6. A second run with a batch of one, then compare the two.
await byId('setting-max_batch').fill('1');
await runAndWait('run 2');
await check(await page.locator('.runs .run').count() === 2, 'history does not list two runs');
const boxes = page.locator('.runs .run input[type=checkbox]');
await boxes.nth(1).check();
await boxes.nth(0).check();
await byId('comparison').waitFor({ timeout: 5000 }).catch(() => fail('no comparison for two ticked runs'));
const deltas = await page.locator('[data-testid=comparison] td.delta').allTextContents();
console.log(`comparison: ${deltas.slice(0, 6).join(' ')} …`);
await check(deltas.some((d) => /%$/.test(d)), 'comparison shows no percentages');
await check(await page.locator('[data-testid=comparison] td.better, [data-testid=comparison] td.worse').count() > 0,
  'no better/worse colouring');

// 7. Cancel: a longer run stops early and still reports what it measured.
await byId('setting-requests').fill('40');
await check(await byId('cancel').isDisabled(), 'Cancel enabled while idle');
await byId('run').click();
try {
  await page.waitForFunction(() => /finished [1-9]\d* \/ 40/.test(document.querySelector('[data-testid=progress]')?.textContent ?? ''),
    null, { timeout: 120000 });
} catch { await fail('cancel run: nothing finished'); }
await byId('cancel').click();
await byId('report').waitFor({ timeout: 120000 }).catch(() => fail('no report after cancel'));
const cancelled = await page.locator('.runs .run .run-name').first().textContent();
console.log(`cancelled run: ${cancelled}`);
await check(/cancelled/.test(cancelled), 'the cancelled run is not marked');
await check(Number((await page.locator('.stat-value').nth(1).textContent()).trim()) > 0, 'a cancelled run shows no failed requests');
await byId('setting-requests').fill('8');

// 8. History survives a reload; the language switch relabels the page.
await page.reload();
await waitReady();
await check(await page.locator('.runs .run').count() === 3, 'history lost on reload');
await check(await byId('setting-max_batch').inputValue() === '1', 'max batch not kept in the URL');
await page.locator('[data-testid=lang] button', { hasText: '中文' }).click();
await check((await text('run')).includes('运行'), 'Run button not translated');
await check((await text('status')).startsWith('就绪'), 'status not translated');
await check(page.url().includes('lang=zh'), 'language not in the URL');
await page.locator('[data-testid=lang] button', { hasText: 'English' }).click();

// 9. The playground streams tokens with their latencies.
await byId('generate').click();
try {
  await page.waitForFunction(() => /TTFT|Error/.test(document.querySelector('[data-testid=timing]')?.textContent ?? ''),
    null, { timeout: 180000 });
} catch { await fail('generation did not finish'); }
const timing = await text('timing');
console.log(`playground: ${timing}`);
await check(!timing.startsWith('Error'), timing);
await check(await page.locator('[data-testid=tokens] .token').count() > 0, 'no token chips');

await check(errors.length === 0, `console errors: ${errors.join(' | ')}`);
await browser.close();
console.log(`ok, screenshot at ${shot}`);
