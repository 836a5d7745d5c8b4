// sandhold code driver for javascript: runs cells in one vm context, like a
// notebook kernel. It runs INSIDE the sandbox as the sandbox user; it is not
// a boundary, only a protocol. Requests arrive on stdin as "<len>\n<json>";
// replies leave as frames, each one write() of at most PIPE_BUF bytes so
// that nothing else writing to the same pipe can tear it:
//   \x1e <nonce:32> <kind:C|E> <len:4 hex> <payload> \x1f
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');
const nonce = process.argv[process.argv.length - 1];
const CHUNK = 4000;
const pause = new Int32Array(new SharedArrayBuffer(4));

function writeAll(fd, buf) {
  for (;;) {
    try {
      fs.writeSync(fd, buf);
      return;
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
      Atomics.wait(pause, 0, 0, 2);
    }
  }
}

function send(fd, msg) {
  const data = Buffer.from(JSON.stringify(msg));
  let off = 0;
  do {
    const p = data.subarray(off, off + CHUNK);
    off += p.length;
    const kind = off >= data.length ? 'E' : 'C';
    const head = Buffer.from('\x1e' + nonce + kind + p.length.toString(16).padStart(4, '0'));
    writeAll(fd, Buffer.concat([head, p, Buffer.from('\x1f')]));
  } while (off < data.length);
}

const sandbox = {
  require, process, Buffer, console, module, exports: module.exports,
  setTimeout, clearTimeout, setInterval, clearInterval, setImmediate, clearImmediate,
  queueMicrotask, structuredClone, URL, URLSearchParams, TextEncoder, TextDecoder,
  AbortController, AbortSignal, atob, btoa, fetch: globalThis.fetch,
  __filename: '[cell]', __dirname: process.cwd(),
};
sandbox.global = sandbox;
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);

function errorOutput(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    const stack = String(e.stack || e);
    // Hide the driver's own frames.
    const lines = stack.split('\n').filter((l) => !l.includes('[eval]') && !l.includes('node:vm') && !l.includes('node:internal'));
    return { output_type: 'error', ename: String(e.name || 'Error'), evalue: String(e.message || ''), traceback: lines };
  }
  return { output_type: 'error', ename: 'Error', evalue: util.inspect(e), traceback: ['Uncaught ' + util.inspect(e)] };
}

async function runCell(req) {
  const outputs = [];
  let status = 'ok';
  // The cell's own environment variables (env), restored after it.
  const env = req.env || {};
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    if (req.cwd) process.chdir(req.cwd);
    let value = vm.runInContext(req.code, context, { filename: 'cell-' + req.id });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) {
      context._ = value;
      outputs.push({ output_type: 'execute_result', execution_count: req.id, metadata: {},
        data: { 'text/plain': util.inspect(value) } });
    }
  } catch (e) {
    status = 'error';
    outputs.push(errorOutput(e));
  }
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  send(2, { t: 'end', id: req.id });
  send(1, { t: 'result', id: req.id, status, outputs });
}

let buf = Buffer.alloc(0);
let busy = Promise.resolve();
process.stdin.on('data', (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  for (;;) {
    const nl = buf.indexOf(10);
    if (nl < 0) { if (buf.length > 20) process.exit(2); return; }
    const n = parseInt(buf.subarray(0, nl).toString(), 10);
    if (!(n >= 0)) process.exit(2);
    if (buf.length < nl + 1 + n) return;
    const req = JSON.parse(buf.subarray(nl + 1, nl + 1 + n).toString());
    buf = buf.subarray(nl + 1 + n);
    busy = busy.then(() => runCell(req));
  }
});
process.stdin.on('end', () => process.exit(0));
process.on('uncaughtException', (e) => { try { fs.writeSync(2, 'Uncaught ' + (e && e.stack || e) + '\n'); } catch (_) { /* gone */ } });
process.on('unhandledRejection', (e) => { try { fs.writeSync(2, 'Unhandled rejection ' + (e && e.stack || e) + '\n'); } catch (_) { /* gone */ } });
send(1, { t: 'ready', version: process.versions.node });
