// End-to-end check of the served page in headless Chromium (WebGPU via SwiftShader):
// waits for the embedded model, generates an answer, checks it streamed, saves a screenshot.
// Usage: node tests/e2e/page.mjs http://127.0.0.1:8080/ [screenshot.png]
import { chromium } from 'playwright-core';

const url = process.argv[2] ?? 'http://127.0.0.1:8080/';
const shot = process.argv[3] ?? 'target/page.png';
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--enable-unsafe-webgpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-sandbox'],
});
const fail = async (msg) => { console.error(`FAIL: ${msg}`); await page.screenshot({ path: shot }); await browser.close(); process.exit(1); };
const page = await browser.newPage({ viewport: { width: 1100, height: 700 } });
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
await page.goto(url);
const status = page.getByTestId('status');
try {
  await page.waitForFunction(() => /^(Ready|Error)/.test(document.querySelector('[data-testid=status]')?.textContent ?? ''), null, { timeout: 120000 });
} catch { await fail(`model never became ready; status: ${await status.textContent()}`); }
const text = await status.textContent();
if (!text.startsWith('Ready')) await fail(`status: ${text}`);
console.log(`status: ${text}`);
const isolated = await page.evaluate(() => self.crossOriginIsolated);
console.log(`crossOriginIsolated: ${isolated}`);
await page.getByTestId('generate').click();
try {
  await page.waitForFunction(() => /TTFT|Error/.test(document.querySelector('[data-testid=timing]')?.textContent ?? ''), null, { timeout: 120000 });
} catch { await fail('generation did not finish'); }
const timing = await page.getByTestId('timing').textContent();
const answer = await page.getByTestId('answer').textContent();
console.log(`timing: ${timing}`);
console.log(`answer: ${JSON.stringify(answer.slice(0, 120))}`);
if (timing.startsWith('Error')) await fail(timing);
if (answer.length === 0) await fail('empty answer');
await page.screenshot({ path: shot });
if (errors.length) console.log(`console errors: ${errors.join(' | ')}`);
await browser.close();
console.log(`ok, screenshot at ${shot}`);
