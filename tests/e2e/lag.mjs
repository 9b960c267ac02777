// Timestamp lag on the page (issue 18, item 5): one run of the Qwen3-0.6B shape (random bf16
// weights made on the GPU) in headless Chromium, then what the results JSON says about the main
// thread: per sampling step, the time from the ids readback resolving (its map callback) to the
// tokens' timestamp, and the long tasks (> 50 ms) a PerformanceObserver saw during the run.
// Not part of ./scripts/test (minutes on SwiftShader); figures go to BENCHMARKS.md.
// Usage: node tests/e2e/lag.mjs [DIST] [QUERY]
//   DIST: a folder built by scripts/build-web (default target/e2e/dist)
//   QUERY: the page's settings (default: qwen3-0.6b, 6 requests at 1 req/s, 32-64 in, 8-16 out)
//   LAG_TRACE=FILE: also record a Chrome trace of the run into FILE and print, for each task over
//   50 ms on the page's main thread, the trace events inside it (what the long tasks are made of).
//   LAG_BLOCK_MS=N: plant main-thread tasks of N ms during the run (a timer's task that spins, one
//   every 700 ms, at most LAG_BLOCKS, default 2, from the first request's progress on): the engine
//   runs in its worker, so no token's timestamp may wait for them. Exits 1 when a planted task
//   whose middle 70% a request was in the engine for (arrived before it, last token after) has no
//   step ending in that middle: an engine that waited for the main thread finishes nothing until the
//   task ends. (Not a bound on the steps' length: on a CPU "GPU" the spinning core takes a core from
//   the steps that run meanwhile, and a 2-core machine ran them 3x slower; take N well above that.)
// Exits 1 when a long task over 50 ms ran on the page's main thread during the run (the issue's
// acceptance), or when the results lack the lag or long-task figures. With LAG_BLOCK_MS, besides the
// plants, only a task over 100 ms fails, and none in the second after a plant (see below).
import { chromium } from 'playwright-core';
import { readFile } from 'node:fs/promises';
import { serve } from './serve.mjs';

const dist = process.argv[2] ?? 'target/e2e/dist';
const query = process.argv[3] ?? 'model=qwen3-0.6b&requests=6&rate=1&input=32:64&output=8:16&max_batch=4';
const server = await serve({ '/': dist });
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--enable-unsafe-webgpu', '--no-first-run', '--disable-background-networking', '--no-sandbox'],
});
const page = await (await browser.newContext({ acceptDownloads: true, viewport: { width: 1440, height: 1000 } })).newPage();
const byId = (id) => page.getByTestId(id);
const done = async (code, msg) => { console.log(msg); await browser.close(); await server.close(); process.exit(code); };
const t0 = Date.now();
await page.goto(`${server.url.replace(/\/$/, "")}/?${query}`);
await page.waitForFunction(() => /^(Ready|Error)/.test(document.querySelector('[data-testid=status]')?.textContent ?? ''),
  null, { timeout: 600000 });
const status = await byId('status').textContent();
if (!status.startsWith('Ready')) await done(1, `FAIL: ${status}`);
console.log(`${status.trim()} after ${((Date.now() - t0) / 1000).toFixed(0)} s`);
const traceFile = process.env.LAG_TRACE;
if (traceFile) {
  await browser.startTracing(page, { path: traceFile, categories: ['devtools.timeline', 'v8', 'blink.user_timing',
    'disabled-by-default-devtools.timeline', 'toplevel'] });
}
await byId('run').click();
const blockMs = Number(process.env.LAG_BLOCK_MS ?? 0);
const planted = [];
if (blockMs > 0) {
  await page.waitForFunction(() => /finished|已完成/.test(document.querySelector('[data-testid=progress]')?.textContent ?? ''),
    null, { timeout: 600000 });
  for (let i = 0; i < Number(process.env.LAG_BLOCKS ?? 2); i++) {
    if (await byId('report').isVisible()) break;
    // A task of the page's own (a timer's), as a chart redraw would be one.
    planted.push(await page.evaluate((ms) => new Promise((done) => setTimeout(() => {
      const t0 = performance.now();
      while (performance.now() - t0 < ms) { /* the planted main-thread task */ }
      done([t0 / 1000, performance.now() - t0]);
    }, 0)), blockMs));
    await page.waitForTimeout(700);
  }
}
await byId('report').waitFor({ timeout: 1800000 });
if (traceFile) await browser.stopTracing();
const [json] = await Promise.all([page.waitForEvent('download'), byId('download-json').click()]);
const result = JSON.parse(await readFile(await json.path(), 'utf8'));
const { timestamp_lag_ms: lag, long_tasks: tasks, completed, duration_s } = result.summary;
const steps = result.steps.filter((s) => typeof s.readback_lag_s === 'number');
const fmt = (x) => (x ?? NaN).toFixed(3);
console.log(JSON.stringify({ adapter: result.run_config.adapter?.name, kernels: result.run_config.kernels?.family,
  completed, duration_s, steps: result.steps.length, sampling_steps: steps.length,
  step_ms_mean: steps.reduce((a, s) => a + s.duration_s, 0) / steps.length * 1000,
  lag_ms: { mean: fmt(lag?.mean), p50: fmt(lag?.p50), p99: fmt(lag?.p99),
    max: fmt(Math.max(...steps.map((s) => s.readback_lag_s * 1000))) },
  long_tasks: tasks }));
// What each long task overlapped: a step (encode + GPU + readback) or the gap between steps.
for (const [at, ms] of tasks?.tasks ?? []) {
  const step = result.steps.find((s) => at >= s.t_s - s.duration_s && at <= s.t_s);
  console.log(`long task at ${at.toFixed(3)} s, ${ms.toFixed(0)} ms: `
    + (step ? `inside a step (${(step.t_s - step.duration_s).toFixed(3)}-${step.t_s.toFixed(3)} s)` : 'between steps'));
}
if (traceFile) explain(JSON.parse(await readFile(traceFile, 'utf8')));
if (!lag || !tasks) await done(1, 'FAIL: no lag or long-task figures');
if (blockMs > 0) {
  // Per request, the gaps between its tokens; the steps' durations.
  const gaps = result.requests.flatMap((r) => (r.token_times_s ?? []).slice(1).map((t, i) => (t - r.token_times_s[i]) * 1000));
  const itlMax = Math.max(...gaps);
  const stepMax = Math.max(...result.steps.map((s) => s.duration_s * 1000));
  console.log(JSON.stringify({ planted_ms: planted.map(([, ms]) => +ms.toFixed(1)), itl_max_ms: +itlMax.toFixed(1),
    itl_p99_ms: result.summary.itl_ms?.p99, step_max_ms: +stepMax.toFixed(1), long_tasks_seen: tasks.count }));
  // The planted tasks as the page's long-task watch saw them (seconds from the run's start, the
  // steps' clock), and of those a request decoded through, the ones no step finished inside.
  const ends = result.steps.map((s) => s.t_s);
  const middle = ([at, ms]) => [at + 0.15 * ms / 1000, at + 0.85 * ms / 1000];
  const decodedThrough = (tasks.tasks ?? []).filter(([, ms]) => ms >= 0.9 * blockMs).filter((task) => {
    const [from, to] = middle(task);
    return result.requests.some((r) => r.arrival_s <= from && r.token_times_s?.at(-1) >= to);
  });
  const waited = decodedThrough.filter((task) => {
    const [from, to] = middle(task);
    return !ends.some((t) => t > from && t < to);
  });
  console.log(`planted tasks with a request in the engine throughout: ${decodedThrough.length}; with no step ending inside: ${waited.length}`);
  if (!decodedThrough.length) await done(1, 'FAIL: no planted task fell while a request was decoding (nothing was checked)');
  if (waited.length) {
    await done(1, `FAIL: a planted ${blockMs} ms main-thread task stopped the engine: no step ended inside `
      + waited.map(([at, ms]) => `${at.toFixed(3)}-${(at + ms / 1000).toFixed(3)} s`).join(', '));
  }
  // The page's own long tasks besides the plants. One starting within 1 s of a plant's end is the
  // page catching up on what the worker sent meanwhile (the plant's doing). Any other over 100 ms
  // (RAIL's budget for answering input) fails; those of 50-100 ms are reported only: a 2-core
  // machine running the software GPU beside the page saw a few of 50-57 ms in a run.
  const kept = tasks.tasks ?? [];
  const plants = kept.filter(([, ms]) => ms >= 0.9 * blockMs);
  const others = kept.filter(([, ms]) => ms < 0.9 * blockMs);
  const catchingUp = ([at]) => plants.some(([p, ms]) => at >= p + ms / 1000 && at < p + ms / 1000 + 1);
  const slow = others.filter((task) => !catchingUp(task) && task[1] > 100);
  console.log(`long tasks besides the plants: ${others.length} (${others.filter(catchingUp).length} catching up after one), `
    + `longest ${Math.max(0, ...others.map(([, ms]) => ms)).toFixed(0)} ms`);
  if (tasks.count > kept.length) await done(1, `FAIL: ${tasks.count} long tasks, more than the ${kept.length} the results keep`);
  await done(slow.length ? 1 : 0, slow.length
    ? `FAIL: ${slow.length} long task(s) over 100 ms besides the plants and their catching up: `
      + slow.map(([at, ms]) => `${ms.toFixed(0)} ms at ${at.toFixed(3)} s`).join(', ')
    : `ok: ${planted.length} planted ${blockMs} ms main-thread tasks, no step waited for them`);
}
await done(tasks.count ? 1 : 0, tasks.count
  ? `FAIL: ${tasks.count} long task(s) on the main thread during the run, longest ${tasks.longest_ms.toFixed(0)} ms`
  : 'ok: no long task over 50 ms on the main thread during the run');

/** Each task over 50 ms on a renderer main thread in the trace: its wall time, the CPU time the
 *  thread actually ran in it (the trace's thread duration; the rest it was waiting for a core), and
 *  the events inside it by name with their CPU ms (nested events count in their parents too). */
function explain(trace) {
  const events = trace.traceEvents ?? trace;
  const main = new Set(events.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain')
    .map((e) => `${e.pid}:${e.tid}`));
  const onMain = events.filter((e) => e.ph === 'X' && main.has(`${e.pid}:${e.tid}`));
  const long = onMain.filter((e) => e.name === 'RunTask' && e.dur > 50000);
  const origin = Math.min(...onMain.map((e) => e.ts));
  for (const task of long) {
    const inside = new Map();
    for (const e of onMain) {
      if (e !== task && e.pid === task.pid && e.tid === task.tid && e.ts >= task.ts && e.ts + (e.dur ?? 0) <= task.ts + task.dur) {
        inside.set(e.name, (inside.get(e.name) ?? 0) + (e.tdur ?? 0) / 1000);
      }
    }
    const top = [...inside].sort((a, b) => b[1] - a[1]).slice(0, 8).map(([n, ms]) => `${n} ${ms.toFixed(1)}`).join(', ');
    console.log(`trace: task at ${((task.ts - origin) / 1e6).toFixed(3)} s (from the trace's start), wall ${(task.dur / 1000).toFixed(0)} ms, `
      + `CPU ${((task.tdur ?? 0) / 1000).toFixed(1)} ms: ${top}`);
  }
  console.log(`trace: ${long.length} task(s) over 50 ms on the main thread (the click on Run included)`);
  // The tasks that drew a frame (charts, progress) against the others (readbacks, steps, messages).
  const tasks = onMain.filter((e) => e.name === 'RunTask');
  const frames = new Set(onMain.filter((e) => e.name === 'FireAnimationFrame').map((f) =>
    tasks.find((t) => t.tid === f.tid && t.pid === f.pid && t.ts <= f.ts && f.ts <= t.ts + t.dur)));
  const stat = (list, key) => {
    const ms = list.map((t) => (t[key] ?? 0) / 1000).sort((a, b) => a - b);
    return ms.length ? `p50 ${ms[ms.length >> 1].toFixed(1)}, max ${ms.at(-1).toFixed(1)} ms` : '-';
  };
  const rest = tasks.filter((t) => !frames.has(t) && t.dur > 1000);
  console.log(`trace: ${frames.size} animation-frame tasks: CPU ${stat([...frames], 'tdur')}; wall ${stat([...frames], 'dur')}`);
  console.log(`trace: ${rest.length} other tasks over 1 ms: CPU ${stat(rest, 'tdur')}; wall ${stat(rest, 'dur')}`);
}
