// A static file server for the built app (scripts/build-web), with the cross-origin isolation
// headers trunk's dev server sends (Trunk.toml), on 127.0.0.1 and a free port.
// As a module: `const { url, close } = await serve({ '/': 'target/e2e/dist', '/fixtures/': 'tests/fixtures' })`.
// As a command: node tests/e2e/serve.mjs [DIR] [PORT]   (prints the URL; Ctrl-C stops it)
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const types = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm', '.json': 'application/json', '.png': 'image/png', '.svg': 'image/svg+xml',
};

/** Sends `file` at about `bytesPerSecond` (a slow network, to see progress and cancel). */
async function throttled(file, res, bytesPerSecond) {
  const chunk = 16384;
  for await (const part of createReadStream(file, { highWaterMark: chunk })) {
    if (res.destroyed) return;
    res.write(part);
    await new Promise((ok) => setTimeout(ok, (1000 * part.length) / bytesPerSecond));
  }
  res.end();
}

/** The byte range a `Range` header asks of a `size`-byte file: [first, last], null when it asks
 *  for none we serve (several ranges, another unit: the whole file is sent), 'unsatisfiable'
 *  when it lies past the end. */
function byteRange(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header ?? '');
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let first; let last;
  if (m[1] === '') { first = Math.max(0, size - Number(m[2])); last = size - 1; }
  else { first = Number(m[1]); last = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1); }
  return first > last || first >= size ? 'unsatisfiable' : [first, last];
}

/** `mounts`: URL prefix -> folder, or { dir, bytesPerSecond, ranges } for a slow one or one that
 *  ignores `Range` (ranges: false; otherwise single byte ranges are answered with 206). Resolves
 *  to { url, close, log } once listening; `log` lists each request as { method, path, range,
 *  status }. */
export async function serve(mounts, port = 0) {
  const roots = Object.entries(mounts)
    .map(([prefix, m]) => [prefix.endsWith('/') ? prefix : `${prefix}/`, resolve(m.dir ?? m), m.bytesPerSecond,
      m.ranges ?? true])
    .sort((a, b) => b[0].length - a[0].length);
  const log = [];
  const server = createServer(async (req, res) => {
    const headers = {
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
      'Cache-Control': 'no-store',
    };
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const mount = roots.find(([prefix]) => path.startsWith(prefix));
    let file = mount && normalize(join(mount[1], path.slice(mount[0].length)));
    if (!mount || !(file === mount[1] || file.startsWith(mount[1] + sep))) {
      res.writeHead(404, headers).end('not found');
      return;
    }
    try {
      let info = await stat(file);
      if (info.isDirectory()) {
        file = join(file, 'index.html');
        info = await stat(file);
      }
      const type = types[extname(file)] ?? 'application/octet-stream';
      const range = mount[3] ? byteRange(req.headers.range, info.size) : null;
      log.push({ method: req.method, path, range: req.headers.range ?? null, status: range ? 206 : 200 });
      if (range === 'unsatisfiable') {
        log.at(-1).status = 416;
        res.writeHead(416, { ...headers, 'Content-Range': `bytes */${info.size}` }).end();
        return;
      }
      if (range) {
        const [first, last] = range;
        res.writeHead(206, { ...headers, 'Content-Type': type, 'Content-Length': last - first + 1,
          'Content-Range': `bytes ${first}-${last}/${info.size}`, 'Accept-Ranges': 'bytes' });
        if (req.method === 'HEAD') res.end();
        else createReadStream(file, { start: first, end: last }).pipe(res);
        return;
      }
      res.writeHead(200, { ...headers, 'Content-Type': type, 'Content-Length': info.size,
        ...(mount[3] ? { 'Accept-Ranges': 'bytes' } : {}) });
      if (req.method === 'HEAD') res.end();
      else if (mount[2]) await throttled(file, res, mount[2]);
      else createReadStream(file).pipe(res);
    } catch {
      res.writeHead(404, headers).end('not found');
    }
  });
  await new Promise((ok, fail) => { server.once('error', fail); server.listen(port, '127.0.0.1', ok); });
  const url = `http://127.0.0.1:${server.address().port}/`;
  return { url, log, close: () => new Promise((ok) => { server.closeAllConnections(); server.close(ok); }) };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { url } = await serve({ '/': process.argv[2] ?? 'target/e2e/dist' }, Number(process.argv[3] ?? 0));
  console.log(url);
}
