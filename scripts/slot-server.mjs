#!/usr/bin/env node
// A server of known capacity, for measuring what `bench --rate max` costs against one: an
// OpenAI-compatible /v1/completions that serves SLOTS requests at a time, first come first served
// (the others wait, unanswered, for a slot), each streaming TOKENS chunks GAP_MS apart, then its
// usage and [DONE]. Its capacity is about SLOTS / (TOKENS × GAP_MS) requests per second. A request
// whose client went away is dropped, waiting or streaming, as vLLM and llama.cpp abort them.
//
//   node scripts/slot-server.mjs [--port 18100] [--slots 8] [--tokens 5] [--gap-ms 20]
//
// It prints its endpoint and serves until killed. Not used by the tests (tests/it/serving.rs has
// the same server in Rust, in-process).
import { createServer } from 'node:http';

const option = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const port = option('port', 18100);
const slots = option('slots', 8);
const tokens = option('tokens', 5);
const gapMs = option('gap-ms', 20);

let busy = 0;
const waiting = [];
const slot = () => new Promise((ok) => (busy < slots ? (busy += 1, ok()) : waiting.push(ok)));
const free = () => {
  const next = waiting.shift();
  if (next) next(); else busy -= 1;
};
const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

const server = createServer({ keepAliveTimeout: 60000 }, async (req, res) => {
  if (req.method === 'GET' && req.url.startsWith('/v1/models')) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ object: 'list', data: [{ id: 'slot-model', object: 'model' }] }));
    return;
  }
  for await (const _ of req); // the body
  // A client that went away while its request waited frees nothing it never took.
  let closed = false;
  res.on('close', () => { closed = true; });
  await slot();
  if (closed) { free(); return; }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (let i = 0; i < tokens && !closed; i += 1) {
    res.write(`data: {"choices":[{"index":0,"text":"t${i}","finish_reason":null}]}\n\n`);
    await sleep(gapMs);
  }
  free();
  res.end(`data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":${tokens}}}\n\ndata: [DONE]\n\n`);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${port}/v1 · ${slots} slots · ${tokens} tokens ${gapMs} ms apart · about ` +
    `${(slots / (tokens * gapMs / 1000)).toFixed(1)} requests/s flat out`);
});
