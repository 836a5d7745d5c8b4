// The unmodified npm packages e2b and @e2b/code-interpreter against a real
// sandhold server (run by internal/e2b's TestOfficialSDKs, which starts the
// server, sets E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY, and checks
// what each case printed).
//
//   node sdk.mjs CASE...   each case prints one JSON line:
//                          {"case": name, "ok": bool, "detail"|"error": …}
//
// Cases wait on conditions (a file appearing, an event arriving), never on
// time, except where the E2B documentation's own example sleeps.
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import {
  Sandbox,
  E2B,
  CommandExitError,
  TimeoutError,
  NotFoundError,
  SandboxNotFoundError,
  FileNotFoundError,
  SandboxError,
  AuthenticationError,
  RateLimitError,
  TemplateError,
  FileType,
} from 'e2b'

const env = process.env

// waitFor polls cond until it is truthy (30 s at most, or ms: a condition
// that never comes is a failure, not a hang).
async function waitFor(what, cond, ms = 30_000) {
  const end = Date.now() + ms
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

// rejects runs fn and returns the error it threw (failing if none).
async function rejects(fn, cls) {
  try {
    await fn()
  } catch (e) {
    if (cls) assert.ok(e instanceof cls, `want ${cls.name}, got ${e?.name}: ${e?.message}`)
    return e
  }
  throw new Error('expected an error')
}

const enc = (s) => new TextEncoder().encode(s)
const dec = (b) => new TextDecoder().decode(b)

const cases = {
  // E2B's quick start (docs/quickstart.mdx), as written.
  async 'docs.quickstart'() {
    const sbx = await CodeSandbox.create() // By default the sandbox is alive for 5 minutes
    const execution = await sbx.runCode('print("hello world")') // Execute Python inside the sandbox
    console.error(execution.logs)
    const files = await sbx.files.list('/')
    console.error(files.length)
    assert.deepEqual(execution.logs, { stdout: ['hello world\n'], stderr: [] })
    assert.ok(files.some((f) => f.name === 'workspace' && f.type === FileType.DIR))
    await sbx.kill()
    return { stdout: execution.logs.stdout }
  },

  // docs/code-interpreting/streaming.mdx: stdout, stderr and errors as they come.
  async 'docs.streaming'() {
    const codeToRun = `
  import time
  import sys
  print("This goes first to stdout")
  time.sleep(3)
  print("This goes later to stderr", file=sys.stderr)
  time.sleep(3)
  print("This goes last")
`
    const sandbox = await CodeSandbox.create()
    const seen = []
    await sandbox.runCode(codeToRun, {
      onError: (error) => seen.push(['error', error]),
      onStdout: (data) => seen.push(['stdout', data.line, data.error]),
      onStderr: (data) => seen.push(['stderr', data.line, data.error]),
    })
    assert.deepEqual(seen, [
      ['stdout', 'This goes first to stdout\n', false],
      ['stderr', 'This goes later to stderr\n', true],
      ['stdout', 'This goes last\n', false],
    ])
    await sandbox.kill()
    return seen
  },

  // The output really streams: the cell waits for a file that only the
  // onStdout callback of its first line writes.
  async 'ci.streams_while_running'() {
    const sbx = await CodeSandbox.create()
    const lines = []
    const ex = await sbx.runCode(
      'import os, time\nprint("first", flush=True)\nfor _ in range(600):\n    if os.path.exists("/workspace/go"): break\n    time.sleep(0.05)\nprint("second" if os.path.exists("/workspace/go") else "never streamed")',
      {
        onStdout: async (m) => {
          lines.push(m.line)
          if (m.line.startsWith('first')) await sbx.files.write('/workspace/go', '1')
        },
      }
    )
    assert.deepEqual(ex.logs.stdout, ['first\n', 'second\n'])
    await sbx.kill()
    return lines
  },

  // docs/code-interpreting/streaming.mdx (results) and static-charts.mdx.
  async 'docs.charts'() {
    const codeToRun = `
import matplotlib.pyplot as plt

# Prepare data
categories = ['Category A', 'Category B', 'Category C', 'Category D']
values = [10, 20, 15, 25]

# Create and customize the bar chart
plt.figure(figsize=(10, 6))
plt.bar(categories, values, color='green')
plt.xlabel('Categories')
plt.ylabel('Values')
plt.title('Values by Category')

# Display the chart
plt.show()
`
    const sandbox = await CodeSandbox.create()
    const results = []
    await sandbox.runCode(codeToRun, { onResult: (result) => results.push(result) })
    assert.equal(results.length, 1)
    const png = Buffer.from(results[0].png, 'base64')
    assert.equal(png.subarray(1, 4).toString(), 'PNG')
    // static-charts.mdx
    const execution = await sandbox.runCode(`
import matplotlib.pyplot as plt

plt.plot([1, 2, 3, 4])
plt.ylabel('some numbers')
plt.show()
`)
    const firstResult = execution.results[0]
    assert.ok(firstResult.png && Buffer.from(firstResult.png, 'base64').subarray(1, 4).toString() === 'PNG')
    assert.ok(firstResult.formats().includes('png'))
    // interactive-charts.mdx: E2B's own chart extraction is not served.
    assert.equal(firstResult.chart, undefined)
    await sandbox.kill()
    return { pngBytes: png.length, text: firstResult.text }
  },

  async 'ci.results_and_errors'() {
    const sbx = await CodeSandbox.create()
    const a = await sbx.runCode('x = 20\nx + 22')
    assert.equal(a.text, '42')
    assert.equal(a.results[0].isMainResult, true)
    const b = await sbx.runCode('x * 2') // the default context keeps state
    assert.equal(b.text, '40')
    const html = await sbx.runCode('class H:\n    def _repr_html_(self): return "<b>bold</b>"\nH()')
    assert.equal(html.results[0].html, '<b>bold</b>')
    const json = await sbx.runCode('class J:\n    def _repr_json_(self): return {"a": 1}\nJ()')
    assert.deepEqual(JSON.parse(json.results[0].json), { a: 1 })
    let onError
    const err = await sbx.runCode('def f():\n    return 1/0\nf()', { onError: (e) => (onError = e) })
    assert.equal(err.error.name, 'ZeroDivisionError')
    assert.equal(err.error.value, 'division by zero')
    assert.match(err.error.traceback, /line 2, in f/)
    assert.equal(onError.name, 'ZeroDivisionError')
    assert.ok(err.executionCount > 0)
    const js = await sbx.runCode('const a = 5; a * 3', { language: 'javascript' })
    assert.equal(js.text, '15')
    const jsLog = await sbx.runCode('console.log("from node")', { language: 'js' })
    assert.deepEqual(jsLog.logs.stdout, ['from node\n'])
    const sh = await sbx.runCode('echo from-bash', { language: 'bash' })
    assert.deepEqual(sh.logs.stdout, ['from-bash\n'])
    const ts = await rejects(() => sbx.runCode('const a: number = 1', { language: 'typescript' }), SandboxError)
    // envs: the cell's alone (E2B's code-interpreting/env-vars), restored after it.
    assert.equal((await sbx.runCode('import os; os.environ["CELL_VAR"]', { envs: { CELL_VAR: 'one cell' } })).text, "'one cell'")
    assert.equal((await sbx.runCode('os.environ.get("CELL_VAR")')).text, undefined)
    assert.equal((await sbx.runCode('process.env.CELL_VAR', { language: 'js', envs: { CELL_VAR: 'js cell' } })).text, "'js cell'")
    assert.equal((await sbx.runCode('process.env.CELL_VAR === undefined', { language: 'js' })).text, 'true')
    const bashEnvs = await rejects(() => sbx.runCode('echo $A', { language: 'bash', envs: { A: '1' } }), SandboxError)
    await rejects(() => sbx.runCode('1', { envs: { LD_PRELOAD: '/x.so' } }), SandboxError)
    await sbx.kill()
    return { typescript: ts.message, bashEnvs: bashEnvs.message }
  },

  async 'ci.contexts'() {
    const sbx = await CodeSandbox.create()
    const ctx = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' })
    assert.equal(ctx.language, 'python')
    assert.equal(ctx.cwd, '/tmp')
    await sbx.runCode('import os\ny = 7', { context: ctx })
    const cwd = await sbx.runCode('os.getcwd()', { context: ctx })
    assert.equal(cwd.text, "'/tmp'")
    assert.equal((await sbx.runCode('y + 1', { context: ctx })).text, '8')
    // Another context does not see it.
    const other = await sbx.createCodeContext()
    assert.equal((await sbx.runCode('y', { context: other })).error.name, 'NameError')
    const js = await sbx.createCodeContext({ language: 'javascript' })
    await sbx.runCode('var z = 3', { context: js })
    assert.equal((await sbx.runCode('z * 2', { context: js })).text, '6')
    const listed = await sbx.listCodeContexts()
    assert.ok(listed.some((c) => c.id === ctx.id) && listed.some((c) => c.id === js.id))
    await sbx.restartCodeContext(ctx)
    assert.equal((await sbx.runCode('y', { context: ctx })).error.name, 'NameError')
    await sbx.removeCodeContext(ctx.id)
    assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
    await rejects(() => sbx.runCode('1', { context: ctx }), NotFoundError)
    await sbx.kill()
    return listed.map((c) => c.language)
  },

  async 'sandbox.lifecycle'() {
    const sbx = await Sandbox.create({ metadata: { suite: 'lifecycle', n: '1' }, envs: { SUITE_VAR: 'from-create' }, timeoutMs: 120_000 })
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.deepEqual(info.metadata, { suite: 'lifecycle', n: '1' })
    assert.equal(info.state, 'running')
    assert.equal(info.templateId, 'host')
    assert.ok(info.cpuCount >= 1 && info.memoryMB > 0)
    const span = info.endAt - info.startedAt
    assert.ok(span > 110_000 && span <= 121_000, `endAt - startedAt = ${span}`)
    assert.deepEqual(await Sandbox.getInfo(sbx.sandboxId).then((i) => i.metadata), info.metadata)
    assert.equal((await sbx.commands.run('echo $SUITE_VAR')).stdout, 'from-create\n')
    assert.equal(await sbx.isRunning(), true)
    // setTimeout moves the end (shorter, then longer).
    await sbx.setTimeout(60_000)
    const t1 = (await sbx.getInfo()).endAt
    await Sandbox.setTimeout(sbx.sandboxId, 600_000)
    const t2 = (await sbx.getInfo()).endAt
    assert.ok(t2 - t1 > 500_000, `setTimeout: ${t1.toISOString()} then ${t2.toISOString()}`)
    const metrics = await sbx.getMetrics()
    assert.equal(metrics.length, 1)
    assert.ok(metrics[0].memTotal > 0 && metrics[0].cpuCount >= 1 && metrics[0].diskTotal > 0)
    assert.ok((await Sandbox.getMetrics(sbx.sandboxId)).length === 1)
    // connect from another object.
    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal((await again.commands.run('echo again')).stdout, 'again\n')
    assert.equal(await again.connect(), again)
    // pause hibernates (files kept, processes end, everything freed) →
    // not running; connect restores it under its id.
    await sbx.files.write('/workspace/kept.txt', 'kept across pause')
    const before = await sbx.commands.run('sleep 600', { background: true })
    assert.equal(await sbx.pause(), true)
    assert.equal(await sbx.isRunning(), false)
    assert.equal((await sbx.getInfo()).state, 'paused')
    assert.deepEqual((await Sandbox.list({ query: { metadata: { suite: 'lifecycle' }, state: ['paused'] } }).nextItems()).map((s) => s.sandboxId), [sbx.sandboxId])
    await Sandbox.connect(sbx.sandboxId)
    assert.equal(await sbx.isRunning(), true)
    assert.equal((await sbx.commands.run('echo resumed')).stdout, 'resumed\n')
    assert.equal(await sbx.files.read('/workspace/kept.txt'), 'kept across pause')
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === before.pid), 'a hibernated sandbox keeps no processes')
    // keepMemory: frozen instead, its processes kept.
    const bg = await sbx.commands.run('sleep 600', { background: true })
    assert.equal(await sbx.pause({ keepMemory: true }), true)
    assert.equal((await sbx.getInfo()).state, 'paused')
    await sbx.connect()
    assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid), 'a frozen sandbox keeps its processes')
    assert.equal(await sbx.betaPause(), true)
    await sbx.connect()
    assert.equal(await sbx.isRunning(), true)
    // kill
    assert.equal(await sbx.kill(), true)
    assert.equal(await sbx.kill(), false)
    assert.equal(await Sandbox.kill(sbx.sandboxId), false)
    await rejects(() => Sandbox.getInfo(sbx.sandboxId), SandboxNotFoundError)
    await rejects(() => Sandbox.connect(sbx.sandboxId), SandboxNotFoundError)
    await rejects(() => sbx.setTimeout(10_000), SandboxNotFoundError)
    assert.equal(await sbx.isRunning(), false)
    return { endAt: info.endAt }
  },

  // lifecycle.onTimeout 'pause': the end of the timeout hibernates the
  // sandbox (the server's janitor, every 15 s); connect brings it back with
  // its files and a new timeout.
  async 'sandbox.autopause'() {
    const sbx = await Sandbox.create({ lifecycle: { onTimeout: 'pause' }, timeoutMs: 120_000 })
    await sbx.files.write('/workspace/auto.txt', 'kept by the pause')
    await sbx.setTimeout(1_000)
    await waitFor('the timeout to pause the sandbox', async () => (await Sandbox.getInfo(sbx.sandboxId)).state === 'paused', 120_000)
    assert.equal(await sbx.isRunning(), false)
    await sbx.connect({ timeoutMs: 60_000 })
    assert.equal(await sbx.isRunning(), true)
    assert.equal(await sbx.files.read('/workspace/auto.txt'), 'kept by the pause')
    const left = (await sbx.getInfo()).endAt - Date.now()
    assert.ok(left > 30_000 && left <= 61_000, `after connect the sandbox ends in ${left} ms`)
    await rejects(() => Sandbox.create({ lifecycle: { onTimeout: { action: 'pause', keepMemory: true } } }), SandboxError)
    await sbx.kill()
    return 'ok'
  },

  async 'sandbox.list'() {
    const a = await Sandbox.create({ metadata: { suite: 'list', which: 'a' } })
    const b = await Sandbox.create({ metadata: { suite: 'list', which: 'b' } })
    const all = await Sandbox.list({ query: { metadata: { suite: 'list' } } }).nextItems()
    assert.deepEqual(all.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())
    const onlyB = await Sandbox.list({ query: { metadata: { suite: 'list', which: 'b' } } }).nextItems()
    assert.deepEqual(onlyB.map((s) => s.metadata.which), ['b'])
    const pager = Sandbox.list({ query: { metadata: { suite: 'list' } }, limit: 1 })
    const first = await pager.nextItems()
    assert.equal(first.length, 1)
    assert.equal(pager.hasNext, true)
    const second = await pager.nextItems()
    assert.equal(second.length, 1)
    assert.notEqual(first[0].sandboxId, second[0].sandboxId)
    assert.equal(pager.hasNext, false)
    await a.pause()
    const paused = await Sandbox.list({ query: { metadata: { suite: 'list' }, state: ['paused'] } }).nextItems()
    assert.deepEqual(paused.map((s) => s.sandboxId), [a.sandboxId])
    await a.kill()
    await b.kill()
    return all.length
  },

  async 'sandbox.unsupported'() {
    const sbx = await Sandbox.create()
    const out = {}
    out.volumes = (await rejects(() => Sandbox.create({ volumeMounts: { '/data': 'vol' } }), SandboxError)).message
    out.allowInternetAccess = (await rejects(() => Sandbox.create({ allowInternetAccess: true }), SandboxError)).message
    out.metadata = (await rejects(() => sbx.files.write('/workspace/m.txt', 'x', { metadata: { a: 'b' } }), TemplateError)).message
    assert.ok(sbx.getMcpUrl().endsWith('/mcp'))
    await sbx.kill()
    return out
  },

  // Snapshots are sandhold's (files, packages and settings; no processes):
  // create, list, a sandbox from one, fork, delete.
  async 'snapshots'() {
    const sbx = await Sandbox.create({ metadata: { suite: 'snapshots' } })
    await sbx.files.write('/workspace/snap.txt', 'in the snapshot')
    const snap = await sbx.createSnapshot({ name: 'e2b-snap' })
    assert.match(snap.snapshotId, /^sn[0-9a-f]{16}$/)
    assert.deepEqual(snap.names, ['e2b-snap'])
    const mine = await sbx.listSnapshots().nextItems()
    assert.deepEqual(mine.map((s) => s.snapshotId), [snap.snapshotId])
    assert.ok((await Sandbox.listSnapshots().nextItems()).some((s) => s.snapshotId === snap.snapshotId))
    await sbx.files.write('/workspace/snap.txt', 'changed after')
    const from = await Sandbox.create(snap.snapshotId)
    assert.equal(await from.files.read('/workspace/snap.txt'), 'in the snapshot')
    const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 })
    assert.equal(forks.length, 2)
    for (const f of forks) {
      assert.ok(f instanceof Sandbox, `fork: ${f?.message}`)
      assert.equal(await f.files.read('/workspace/snap.txt'), 'changed after')
      const span = (await f.getInfo()).endAt - Date.now()
      assert.ok(span > 0 && span <= 61_000, `fork's end in ${span} ms`)
    }
    await forks[0].files.write('/workspace/snap.txt', 'fork 0')
    assert.equal(await forks[1].files.read('/workspace/snap.txt'), 'changed after')
    // The fork's own snapshot is gone again.
    assert.deepEqual((await sbx.listSnapshots().nextItems()).map((s) => s.snapshotId), [snap.snapshotId])
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
    assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
    await rejects(() => Sandbox.create(snap.snapshotId), SandboxError)
    for (const s of [sbx, from, ...forks]) await s.kill()
    return { snapshot: snap.snapshotId, forks: forks.map((f) => f.sandboxId) }
  },

  async 'sandbox.network'() {
    const sbx = await Sandbox.create({ network: { allowOut: ['example.com'] } })
    await sbx.updateNetwork({ allowOut: ['example.org', 'example.com'] })
    await sbx.kill()
    return 'ok'
  },

  async 'commands.run'() {
    const sbx = await Sandbox.create()
    const r = await sbx.commands.run('echo out; echo err >&2')
    assert.deepEqual([r.exitCode, r.stdout, r.stderr], [0, 'out\n', 'err\n'])
    const e = await rejects(() => sbx.commands.run('echo partial; exit 3'), CommandExitError)
    assert.deepEqual([e.exitCode, e.stdout, e.error], [3, 'partial\n', 'exit status 3'])
    assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n')
    assert.equal((await sbx.commands.run('pwd')).stdout, '/workspace\n')
    assert.equal((await sbx.commands.run('echo $A-$B', { envs: { A: '1', B: '2' } })).stdout, '1-2\n')
    assert.equal((await sbx.commands.run('id -u', { user: 'root' })).stdout, '0\n')
    assert.equal((await sbx.commands.run('id -u', { user: 'user' })).stdout.trim() !== '0', true)
    const out = []
    const err = []
    await sbx.commands.run('for i in 1 2 3; do echo o$i; echo e$i >&2; done', { onStdout: (d) => out.push(d), onStderr: (d) => err.push(d) })
    assert.equal(out.join(''), 'o1\no2\no3\n')
    assert.equal(err.join(''), 'e1\ne2\ne3\n')
    // A timeout kills it (envd's Connect-Timeout-Ms).
    await rejects(() => sbx.commands.run('sleep 60', { timeoutMs: 1000 }), TimeoutError)
    await waitFor('the timed-out command to end', async () => !(await sbx.commands.list()).some((p) => p.args.includes('sleep 60')))
    await sbx.kill()
    return 'ok'
  },

  async 'commands.background'() {
    const sbx = await Sandbox.create()
    const h = await sbx.commands.run('sleep 120', { background: true })
    assert.ok(h.pid > 1)
    const listed = await sbx.commands.list()
    const mine = listed.find((p) => p.pid === h.pid)
    assert.deepEqual([mine.cmd, mine.args], ['/bin/bash', ['-l', '-c', 'sleep 120']])
    assert.equal(await sbx.commands.kill(h.pid), true)
    const e = await rejects(() => h.wait(), CommandExitError)
    assert.equal(e.exitCode, -1)
    assert.equal(await sbx.commands.kill(h.pid), false)
    // handle.kill and disconnect
    const h2 = await sbx.commands.run('sleep 120', { background: true })
    await h2.disconnect()
    assert.ok((await sbx.commands.list()).some((p) => p.pid === h2.pid), 'disconnecting leaves it running')
    assert.equal(await h2.kill(), true)
    await waitFor('the killed command to leave the list', async () => !(await sbx.commands.list()).some((p) => p.pid === h2.pid))
    // stdin
    const cat = await sbx.commands.run('cat', { background: true, stdin: true })
    await sbx.commands.sendStdin(cat.pid, 'line one\n')
    await cat.sendStdin(enc('line two\n'))
    await cat.closeStdin()
    assert.equal((await cat.wait()).stdout, 'line one\nline two\n')
    // without stdin: true, stdin is closed
    const noin = await sbx.commands.run('cat', { background: true })
    await rejects(() => sbx.commands.sendStdin(noin.pid, 'x\n'), SandboxError)
    await noin.kill()
    // connect to a running command: output from then on
    const loop = await sbx.commands.run(
      'echo before; touch /workspace/ready; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo after',
      { background: true }
    )
    await waitFor('the command to have written before', () => sbx.files.exists('/workspace/ready'))
    const seen = []
    const joined = await sbx.commands.connect(loop.pid, { onStdout: (d) => seen.push(d) })
    await sbx.files.write('/workspace/go', '1')
    const res = await joined.wait()
    assert.equal(res.stdout, 'after\n')
    assert.deepEqual(seen, ['after\n'])
    await rejects(() => sbx.commands.connect(999999), SandboxError)
    await sbx.kill()
    return 'ok'
  },

  async 'pty'() {
    const sbx = await Sandbox.create()
    let out = ''
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (out += dec(d)) })
    await sbx.pty.sendInput(term.pid, enc('echo TERM=$TERM; echo $((6*7))\n'))
    await waitFor('the terminal to answer', () => out.includes('42') && out.includes('TERM=xterm-256color'))
    await sbx.pty.resize(term.pid, { cols: 120, rows: 40 })
    let more = ''
    const again = await sbx.pty.connect(term.pid, { onData: (d) => (more += dec(d)) })
    await sbx.pty.sendInput(term.pid, enc('stty size\n'))
    await waitFor('the new size', () => more.includes('40 120'))
    assert.equal(await sbx.pty.kill(term.pid), true)
    await rejects(() => again.wait())
    await sbx.kill()
    return 'ok'
  },

  async 'files'() {
    const sbx = await Sandbox.create()
    const w = await sbx.files.write('/workspace/a/b/c.txt', 'hello') // parents are made
    assert.deepEqual([w.name, w.type, w.path], ['c.txt', 'file', '/workspace/a/b/c.txt'])
    assert.equal(await sbx.files.read('/workspace/a/b/c.txt'), 'hello')
    await sbx.files.write('rel.txt', 'relative') // relative: the home
    assert.equal(await sbx.files.read('/workspace/rel.txt'), 'relative')
    await sbx.files.write('/workspace/bin', new Uint8Array([0, 1, 2, 255]).buffer)
    assert.deepEqual(Array.from(await sbx.files.read('/workspace/bin', { format: 'bytes' })), [0, 1, 2, 255])
    assert.equal(await (await sbx.files.read('/workspace/a/b/c.txt', { format: 'blob' })).text(), 'hello')
    const stream = await sbx.files.read('/workspace/a/b/c.txt', { format: 'stream' })
    assert.equal(await new Response(stream).text(), 'hello')
    await sbx.files.write('/workspace/streamed.txt', new Blob(['streamed']).stream())
    assert.equal(await sbx.files.read('/workspace/streamed.txt'), 'streamed')
    await sbx.files.write('/workspace/gz.txt', 'zipped', { gzip: true })
    assert.equal(await sbx.files.read('/workspace/gz.txt'), 'zipped')
    assert.equal(await sbx.files.read('/workspace/empty.txt').catch((e) => e.name), 'FileNotFoundError')
    await sbx.files.write('/workspace/empty.txt', '')
    assert.equal(await sbx.files.read('/workspace/empty.txt'), '')
    const multi = await sbx.files.write([
      { path: '/workspace/m/1.txt', data: 'one' },
      { path: '/workspace/m/2.txt', data: new Blob(['two']) },
    ])
    assert.deepEqual(multi.map((f) => f.path), ['/workspace/m/1.txt', '/workspace/m/2.txt'])
    assert.equal(await sbx.files.read('/workspace/m/2.txt'), 'two')
    assert.deepEqual((await sbx.files.writeFiles([{ path: '/workspace/m/3.txt', data: 'three' }])).map((f) => f.name), ['3.txt'])
    // directories
    assert.equal(await sbx.files.makeDir('/workspace/d/e'), true)
    assert.equal(await sbx.files.makeDir('/workspace/d/e'), false)
    assert.equal(await sbx.files.exists('/workspace/d/e'), true)
    assert.equal(await sbx.files.exists('/workspace/nope'), false)
    const info = await sbx.files.getInfo('/workspace/a/b/c.txt')
    assert.deepEqual([info.name, info.type, info.size, info.permissions, info.path], ['c.txt', FileType.FILE, 5, '-rw-r--r--', '/workspace/a/b/c.txt'])
    assert.ok(info.modifiedTime instanceof Date)
    assert.equal((await sbx.files.getInfo('/workspace/d')).type, FileType.DIR)
    await rejects(() => sbx.files.getInfo('/workspace/nope'), FileNotFoundError)
    const one = await sbx.files.list('/workspace/a')
    assert.deepEqual(one.map((e) => [e.name, e.type]), [['b', FileType.DIR]])
    const two = await sbx.files.list('/workspace/a', { depth: 3 })
    assert.deepEqual(two.map((e) => e.path), ['/workspace/a/b', '/workspace/a/b/c.txt'])
    await sbx.commands.run('ln -s /workspace/a/b/c.txt /workspace/link')
    const link = (await sbx.files.list('/workspace')).find((e) => e.name === 'link')
    assert.deepEqual([link.type, link.symlinkTarget], [FileType.SYMLINK, '/workspace/a/b/c.txt'])
    const moved = await sbx.files.rename('/workspace/a/b/c.txt', '/workspace/d/c2.txt')
    assert.deepEqual([moved.name, moved.path], ['c2.txt', '/workspace/d/c2.txt'])
    assert.equal(await sbx.files.exists('/workspace/a/b/c.txt'), false)
    await sbx.files.remove('/workspace/d')
    assert.equal(await sbx.files.exists('/workspace/d'), false)
    await rejects(() => sbx.files.remove('/workspace/d'), FileNotFoundError)
    await rejects(() => sbx.files.list('/workspace/nope'), FileNotFoundError)
    // The sensitive-path policy applies to E2B's calls as to every file call.
    const denied = await rejects(() => sbx.files.write('/workspace/.env', 'SECRET=1'), SandboxError)
    await sbx.kill()
    return { sensitive: denied.message }
  },

  async 'files.watch'() {
    const sbx = await Sandbox.create()
    await sbx.files.makeDir('/workspace/w')
    const events = []
    let exited = false
    const handle = await sbx.files.watchDir('/workspace/w', (e) => events.push(`${e.type}:${e.name}`), { onExit: () => (exited = true) })
    await sbx.files.write('/workspace/w/new.txt', 'x')
    await waitFor('a create event', () => events.includes('create:new.txt'))
    await sbx.files.remove('/workspace/w/new.txt')
    await waitFor('a remove event', () => events.includes('remove:new.txt'))
    await handle.stop()
    const rec = []
    const deep = await sbx.files.watchDir('/workspace', (e) => rec.push(`${e.type}:${e.name}`), { recursive: true })
    await sbx.files.write('/workspace/w/inner.txt', 'y')
    await waitFor('a recursive create event', () => rec.includes('create:w/inner.txt'))
    await deep.stop()
    await sbx.kill()
    return { events, exited }
  },

  async 'files.urls'() {
    const sbx = await Sandbox.create()
    await sbx.files.write('/workspace/dl.txt', 'download me')
    const hdr = { 'E2b-Sandbox-Id': sbx.sandboxId }
    const dl = await sbx.downloadUrl('/workspace/dl.txt', { useSignatureExpiration: 600 })
    let r = await fetch(dl, { headers: hdr })
    assert.deepEqual([r.status, await r.text()], [200, 'download me'])
    const ul = await sbx.uploadUrl('/workspace/ul.txt', { useSignatureExpiration: 600 })
    const form = new FormData()
    form.append('file', new Blob(['uploaded']), 'ul.txt')
    r = await fetch(ul, { method: 'POST', body: form, headers: hdr })
    assert.equal(r.status, 200, await r.clone().text())
    assert.equal(await sbx.files.read('/workspace/ul.txt'), 'uploaded')
    // Scoped: the signature is for one path and one operation.
    const other = new URL(dl)
    other.searchParams.set('path', '/workspace/ul.txt')
    assert.equal((await fetch(other, { headers: hdr })).status, 401)
    assert.equal((await fetch(dl, { method: 'POST', body: form, headers: hdr })).status, 401)
    // Short-lived: a URL must expire, within 6 hours.
    assert.equal((await fetch(await sbx.downloadUrl('/workspace/dl.txt'), { headers: hdr })).status, 401)
    assert.equal((await fetch(await sbx.downloadUrl('/workspace/dl.txt', { useSignatureExpiration: 7 * 3600 }), { headers: hdr })).status, 401)
    // Another sandbox: the signature names this one's token.
    const sbx2 = await Sandbox.create()
    assert.equal((await fetch(dl, { headers: { 'E2b-Sandbox-Id': sbx2.sandboxId } })).status, 401)
    await sbx2.kill()
    await sbx.kill()
    assert.equal((await fetch(dl, { headers: hdr })).status, 401, 'the URL dies with its sandbox')
    return new URL(dl).pathname
  },

  // getHost(port) names the content origin's host for the sandbox's port;
  // a request there reaches the sandbox's server through the preview.
  async 'gethost'() {
    const sbx = await Sandbox.create()
    await sbx.files.write('/workspace/site/index.html', 'served from the sandbox')
    await sbx.commands.run('python3 -m http.server 8005 --bind 127.0.0.1', { background: true, cwd: '/workspace/site', timeoutMs: 0 })
    const host = sbx.getHost(8005)
    assert.equal(host, `8005-${sbx.sandboxId}.${env.E2B_TEST_CONTENT_DOMAIN}`)
    const get = () =>
      new Promise((resolve) => {
        const u = new URL(env.E2B_API_URL)
        const req = http.request({ host: u.hostname, port: u.port, path: '/index.html', headers: { Host: host, 'X-API-Key': env.E2B_API_KEY } }, (res) => {
          let body = ''
          res.on('data', (c) => (body += c))
          res.on('end', () => resolve([res.statusCode, body]))
        })
        req.on('error', () => resolve([0, '']))
        req.end()
      })
    const [status, body] = await waitFor('the sandbox server through getHost', async () => {
      const r = await get()
      return r[0] === 200 ? r : null
    })
    await sbx.kill()
    return [status, body]
  },

  async 'git'() {
    const sbx = await Sandbox.create()
    await sbx.git.init('/workspace/repo', { initialBranch: 'main' })
    await sbx.git.configureUser('E2B Test', 'e2b@example.com')
    await sbx.files.write('/workspace/repo/a.txt', 'a')
    await sbx.git.add('/workspace/repo', { all: true })
    await sbx.git.commit('/workspace/repo', 'first')
    const status = await sbx.git.status('/workspace/repo')
    await sbx.git.createBranch('/workspace/repo', 'feature')
    const branches = await sbx.git.branches('/workspace/repo')
    await sbx.kill()
    assert.ok(branches.branches.includes('feature'))
    return { clean: status.isClean, current: branches.currentBranch }
  },

  // Another key's sandbox is not found: through the control plane, and
  // through the in-sandbox API with this key's token.
  async 'tenant'() {
    const mine = await Sandbox.create()
    const other = new E2B({ apiKey: env.E2B_OTHER_KEY })
    const theirs = await other.Sandbox.create()
    await rejects(() => Sandbox.connect(theirs.sandboxId), SandboxNotFoundError)
    await rejects(() => Sandbox.getInfo(theirs.sandboxId), SandboxNotFoundError)
    assert.equal(await Sandbox.kill(theirs.sandboxId), false)
    assert.ok(!(await Sandbox.list().nextItems()).some((s) => s.sandboxId === theirs.sandboxId))
    // My token, their sandbox id: refused before anything is looked up.
    const forged = new Sandbox({ sandboxId: theirs.sandboxId, envdAccessToken: mine.envdAccessToken, envdVersion: '0.6.1' })
    await rejects(() => forged.commands.run('id'), AuthenticationError)
    await rejects(() => forged.files.read('/workspace/x'), AuthenticationError)
    // No token at all.
    const bare = new Sandbox({ sandboxId: mine.sandboxId, envdVersion: '0.6.1' })
    await rejects(() => bare.commands.run('id'), AuthenticationError)
    assert.equal((await theirs.commands.run('echo still mine')).stdout, 'still mine\n')
    await theirs.kill()
    await mine.kill()
    return 'ok'
  },

  // A flagged command waits for an operator: the SDK reports the refusal.
  async 'approval.wait'() {
    const sbx = await Sandbox.create()
    const e = await rejects(() => sbx.commands.run('X="echo ran after approval"; eval "$X"'), SandboxError)
    const m = /approval (apr_[A-Za-z0-9_]+)/.exec(e.message)
    assert.ok(m, e.message)
    // A flagged line written to a process's stdin waits the same way, and
    // nothing of that write reaches the process.
    const sh = await sbx.commands.run('bash', { background: true, stdin: true })
    await sbx.commands.sendStdin(sh.pid, 'echo plain line\n')
    const e2 = await rejects(() => sbx.commands.sendStdin(sh.pid, 'eval "$Q"\n'), SandboxError)
    assert.match(e2.message, /approval apr_/)
    await sbx.commands.closeStdin(sh.pid)
    assert.equal((await sh.wait()).stdout, 'plain line\n')
    return { sandbox: sbx.sandboxId, approval: m[1], message: e.message, stdinMessage: e2.message }
  },

  // Once approved, the identical call runs (once).
  async 'approval.run'() {
    const sbx = await Sandbox.connect(env.E2B_TEST_SANDBOX)
    const r = await sbx.commands.run('X="echo ran after approval"; eval "$X"')
    assert.equal(r.stdout, 'ran after approval\n')
    await rejects(() => sbx.commands.run('X="echo ran after approval"; eval "$X"'), SandboxError)
    await sbx.kill()
    return r.stdout
  },

  // While the server is halted every E2B call is refused.
  async 'halt.refused'() {
    const sbx = await Sandbox.connect(env.E2B_TEST_SANDBOX).catch((e) => e)
    assert.ok(sbx instanceof SandboxError, `connect while halted: ${sbx}`)
    const out = { connect: sbx.message }
    const s = new Sandbox({ sandboxId: env.E2B_TEST_SANDBOX, envdAccessToken: env.E2B_TEST_TOKEN, envdVersion: '0.6.1' })
    out.run = (await rejects(() => s.commands.run('echo hi'), SandboxError)).message
    out.read = (await rejects(() => s.files.read('/workspace/x'), SandboxError)).message
    out.create = (await rejects(() => Sandbox.create(), SandboxError)).message
    return out
  },

  async 'halt.prepare'() {
    const sbx = await Sandbox.create()
    return { sandbox: sbx.sandboxId, token: sbx.envdAccessToken }
  },

  // A key's own rate limit (command=2/m): the third command is refused
  // with the SDK's RateLimitError.
  async 'ratelimit'() {
    const sbx = await Sandbox.create()
    await sbx.commands.run('true')
    await sbx.commands.run('true')
    const e = await rejects(() => sbx.commands.run('true'), RateLimitError)
    await sbx.kill()
    return e.message
  },
}

for (const name of process.argv.slice(2)) {
  const fn = cases[name]
  try {
    if (!fn) throw new Error(`no case ${name}`)
    const detail = await fn()
    console.log(JSON.stringify({ case: name, ok: true, detail }))
  } catch (e) {
    console.log(JSON.stringify({ case: name, ok: false, error: `${e?.name}: ${e?.message}\n${e?.stack ?? ''}` }))
  }
}
