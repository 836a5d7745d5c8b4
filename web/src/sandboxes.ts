// The Sandboxes page: a fleet table (filter, sort, select, bulk delete)
// under a capacity header, live CPU, memory and disk against each
// sandbox's own limits, and a drawer to make a new one.
import { visible } from './visible';
import { ago, bytes, call, canWrite, clearErrors, closeDrawer, duration, field, guarded, h, onLeave, openDrawer, page, say, showError, type Child } from './ui';

export interface Sandbox {
  id: string;
  name: string;
  owner: string;
  owner_name?: string;
  state: string;
  created: string;
  last_used: string;
  ttl?: string;
  template?: string;
  node?: string;
  limits: { memory?: number; cpu?: number; pids?: number; disk?: number; cpu_time?: number };
  network: { mode: string; allow?: string[] };
}

interface Stats {
  id: string;
  state: string;
  cgroup: { MemoryBytes: number; MemoryLimit: number; CPUUsage: number; Pids: number; PidsLimit: number };
  disk?: { used_bytes: number; total_bytes: number };
}

interface Sample {
  t: number;
  raw: number; // cgroup CPU time, ns
  cpu: number; // CPUs in use over the last interval
}

// Samples per sandbox, kept across page visits: CPU is a rate, so it
// needs two readings.
const samples = new Map<string, Sample[]>();
const maxSamples = 40;
// cpuWindow is how many readings back the CPU rate is taken over (~6 s).
const cpuWindow = 3;

type SortKey = 'name' | 'owner' | 'template' | 'state' | 'created' | 'expires' | 'last_used' | 'cpu' | 'memory' | 'disk';
const view: { sort: SortKey; desc: boolean; filter: string; state: string } = { sort: 'created', desc: true, filter: '', state: '' };

// expiresAt is created + ttl, or 0 without a ttl.
function expiresAt(sb: Sandbox): number {
  const d = sb.ttl ? duration(sb.ttl) : NaN;
  return Number.isFinite(d) && d > 0 ? new Date(sb.created).getTime() + d : 0;
}

// cpuShare is the CPU in use as a share of the sandbox's limit (1 = the
// whole limit); without a limit, of one CPU.
function cpuShare(sb: Sandbox, cpus: number): number {
  const limit = sb.limits?.cpu ? sb.limits.cpu / 1000 : 1;
  return cpus / limit;
}

// meter is a figure with a bar scaled to its maximum (a share of 1).
function meter(label: string, share: number | null, text: string, title: string): HTMLElement {
  const m = h('div', { class: 'meter', title });
  if (share !== null) {
    const pct = Math.max(0, Math.min(1, share));
    const bar = h('span', { class: 'meter-bar' + (pct >= 0.9 ? ' hot' : pct >= 0.7 ? ' warm' : '') });
    bar.style.width = `${(pct * 100).toFixed(1)}%`;
    m.append(h('span', { class: 'meter-track', role: 'img', 'aria-label': `${label} ${Math.round(share * 100)} %` }, bar));
  }
  m.append(h('span', { class: 'meter-text', text }));
  return m;
}

function matches(sb: Sandbox, q: string): boolean {
  if (!q) return true;
  const hay = [sb.name, sb.id, sb.owner, sb.owner_name, sb.template, sb.state, sb.node].join(' ').toLowerCase();
  return q.toLowerCase().split(/\s+/).every((w) => hay.includes(w));
}

export async function sandboxesPage(preset: { template?: string } = {}) {
  const writable = canWrite();
  const capacity = h('section', { class: 'capacity', 'aria-label': 'Capacity' });
  const filter = h('input', { id: 'sb-filter', type: 'search', placeholder: 'name, id, owner, template…', value: view.filter, 'aria-label': 'Filter sandboxes' });
  const stateSel = h('select', { id: 'sb-state', 'aria-label': 'State' },
    ...['', 'running', 'paused', 'stopped', 'lost'].map((s) => h('option', { value: s, text: s || 'any state', selected: view.state === s })));
  const bulk = h('button', { type: 'button', class: 'danger', id: 'bulk-delete', disabled: true, text: 'Delete selected' });
  const newBtn = h('button', { type: 'button', id: 'new-sandbox', text: 'New sandbox' });
  const toolbar = h('div', { class: 'toolbar fleet-bar' }, filter, stateSel, writable ? newBtn : null, writable ? bulk : null);
  const tbody = h('tbody');
  const selectAll = h('input', { type: 'checkbox', id: 'sb-all', 'aria-label': 'Select every sandbox shown' });
  const cols: [SortKey | '', string][] = [['name', 'Name'], ['', 'ID'], ['owner', 'Owner'], ['template', 'Template'], ['state', 'State'],
    ['created', 'Age'], ['expires', 'Expires'], ['last_used', 'Last use'], ['cpu', 'CPU'], ['memory', 'Memory'], ['disk', 'Disk'], ['', 'Actions']];
  const head = h('tr', {}, writable ? h('th', { scope: 'col', class: 'sel' }, selectAll) : null);
  const table = h('div', { class: 'scroll' }, h('table', { class: 'fleet' },
    h('caption', { text: 'Sandboxes; CPU is a share of each sandbox\'s CPU limit, memory and disk of its own limit and quota' }), h('thead', {}, head), tbody));
  page('Sandboxes', capacity, toolbar, table);

  let list: Sandbox[] = [];
  let stats = new Map<string, Stats>();
  const selected = new Set<string>();

  const cpusOf = (id: string) => {
    const hist = samples.get(id);
    return hist && hist.length > 1 ? hist[hist.length - 1].cpu : null;
  };
  const key = (sb: Sandbox): number | string => {
    const st = stats.get(sb.id);
    switch (view.sort) {
      case 'name': return (sb.name || '').toLowerCase();
      case 'owner': return (sb.owner_name || sb.owner || '').toLowerCase();
      case 'template': return sb.template || '';
      case 'state': return st?.state ?? sb.state;
      case 'created': return new Date(sb.created).getTime() || 0;
      case 'expires': return expiresAt(sb) || Infinity;
      case 'last_used': return new Date(sb.last_used).getTime() || 0;
      case 'cpu': return cpuShare(sb, cpusOf(sb.id) ?? 0);
      case 'memory': return st ? st.cgroup.MemoryBytes / (st.cgroup.MemoryLimit || sb.limits?.memory || 1) : 0;
      case 'disk': return st?.disk?.total_bytes ? st.disk.used_bytes / st.disk.total_bytes : 0;
    }
  };
  const shown = () => {
    const out = list.filter((sb) => matches(sb, view.filter) && (!view.state || (stats.get(sb.id)?.state ?? sb.state) === view.state));
    out.sort((a, b) => {
      const x = key(a);
      const y = key(b);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return view.desc ? -c : c;
    });
    return out;
  };

  const renderHead = () => {
    head.replaceChildren(...(writable ? [h('th', { scope: 'col', class: 'sel' }, selectAll)] : []), ...cols.map(([k, label]) => {
      if (!k) return h('th', { scope: 'col', text: label });
      const on = view.sort === k;
      return h('th', { scope: 'col', 'aria-sort': on ? (view.desc ? 'descending' : 'ascending') : 'none' },
        h('button', { type: 'button', class: 'sort', text: label + (on ? (view.desc ? ' ▼' : ' ▲') : ''), onclick: () => {
          view.desc = view.sort === k ? !view.desc : k === 'created' || k === 'cpu' || k === 'memory' || k === 'disk' || k === 'last_used';
          view.sort = k;
          render();
        } }));
    }));
  };

  const act = (label: string, fn: () => Promise<unknown>, cls = '') =>
    h('button', { type: 'button', class: cls, text: label, onclick: () => void guarded(label, async () => { await fn(); await refresh(); }) });

  const rowFor = (sb: Sandbox, now: number) => {
    const st = stats.get(sb.id);
    const state = st?.state ?? sb.state;
    const id = encodeURIComponent(sb.id);
    const actions = h('div', { class: 'actions' });
    if (state !== 'lost' && state !== 'paused') {
      actions.append(h('a', { href: `#/sandboxes/${id}/terminal`, text: 'Terminal' }), h('a', { href: `#/sandboxes/${id}/files`, text: 'Files' }));
    }
    if (state === 'running') actions.append(h('a', { href: `/sandboxes/${id}/vnc/index.html`, text: 'Desktop', target: '_blank', rel: 'noopener' }));
    if (writable) {
      if (state === 'running') actions.append(act('Pause', () => call('POST', `/v1/sandboxes/${id}/pause`)));
      if (state === 'paused') actions.append(act('Resume', () => call('POST', `/v1/sandboxes/${id}/resume`)));
      actions.append(act('Delete', async () => {
        if (!confirm(`Delete sandbox ${visible(sb.name || sb.id)} and its workspace?`)) return;
        await call('DELETE', `/v1/sandboxes/${id}`);
        selected.delete(sb.id);
        say(`Deleted ${visible(sb.name || sb.id)}`);
      }, 'danger'));
    }
    const cpus = cpusOf(sb.id);
    const limitCPU = sb.limits?.cpu ? sb.limits.cpu / 1000 : 0;
    const cpu = cpus === null || state !== 'running'
      ? meter('CPU', null, '–', 'CPU: needs two readings')
      : meter('CPU', cpuShare(sb, cpus), `${Math.round(cpuShare(sb, cpus) * 100)} %`,
        limitCPU ? `${cpus.toFixed(2)} of ${limitCPU} CPU (its limit)` : `${cpus.toFixed(2)} CPU (no CPU limit; share of one CPU)`);
    const memLimit = st?.cgroup.MemoryLimit || sb.limits?.memory || 0;
    const mem = st && state !== 'stopped'
      ? meter('Memory', memLimit ? st.cgroup.MemoryBytes / memLimit : null, bytes(st.cgroup.MemoryBytes), `${bytes(st.cgroup.MemoryBytes)} of ${memLimit ? bytes(memLimit) : 'no limit'}`)
      : meter('Memory', null, '–', 'not running');
    const disk = st?.disk?.total_bytes
      ? meter('Disk', st.disk.used_bytes / st.disk.total_bytes, bytes(st.disk.used_bytes), `${bytes(st.disk.used_bytes)} of ${bytes(st.disk.total_bytes)} (its quota)`)
      : meter('Disk', null, '–', 'workspace not mounted');
    const exp = expiresAt(sb);
    const box = writable ? h('input', { type: 'checkbox', class: 'pick', checked: selected.has(sb.id), 'aria-label': `Select ${visible(sb.name || sb.id)}`, onchange: (e: Event) => {
      if ((e.target as HTMLInputElement).checked) selected.add(sb.id);
      else selected.delete(sb.id);
      syncBulk();
    } }) : null;
    return h('tr', { 'data-id': sb.id, 'data-state': state, 'data-sampled': String(samples.get(sb.id)?.at(-1)?.t ?? 0) },
      writable ? h('td', { class: 'sel' }, box) : null,
      h('th', { scope: 'row', text: visible(sb.name || '(unnamed)') }),
      h('td', {}, h('code', { title: visible(sb.id), text: visible(sb.id.slice(0, 8)) })),
      h('td', { title: visible(sb.owner), text: visible(sb.owner_name || sb.owner.slice(0, 10)) }),
      h('td', { text: visible(sb.template || 'host') }),
      h('td', {}, h('span', { class: 'state state-' + visible(state), text: visible(state) })),
      h('td', { title: visible(sb.created), text: ago(sb.created, now) }),
      h('td', { title: exp ? new Date(exp).toISOString() : 'no time to live', text: exp ? ago(exp, now) : 'never' }),
      h('td', { title: visible(sb.last_used), text: ago(sb.last_used, now) }),
      h('td', {}, cpu), h('td', {}, mem), h('td', {}, disk),
      h('td', {}, actions));
  };

  const syncBulk = () => {
    const ids = shown().map((s) => s.id);
    for (const id of [...selected]) if (!list.some((s) => s.id === id)) selected.delete(id);
    bulk.disabled = selected.size === 0;
    bulk.textContent = selected.size ? `Delete selected (${selected.size})` : 'Delete selected';
    selectAll.checked = ids.length > 0 && ids.every((id) => selected.has(id));
    selectAll.indeterminate = !selectAll.checked && ids.some((id) => selected.has(id));
  };

  const renderCapacity = () => {
    const by = (s: string) => list.filter((sb) => (stats.get(sb.id)?.state ?? sb.state) === s).length;
    let cpus = 0;
    let cpuLimit = 0;
    let mem = 0;
    let memLimit = 0;
    let disk = 0;
    let quota = 0;
    for (const sb of list) {
      const st = stats.get(sb.id);
      cpus += cpusOf(sb.id) ?? 0;
      cpuLimit += sb.limits?.cpu ? sb.limits.cpu / 1000 : 0;
      if (st) {
        mem += st.cgroup.MemoryBytes;
        memLimit += st.cgroup.MemoryLimit || sb.limits?.memory || 0;
        disk += st.disk?.used_bytes ?? 0;
        quota += st.disk?.total_bytes ?? 0;
      }
    }
    const card = (label: string, value: string, sub: Child = null) => h('div', { class: 'cap' }, h('span', { class: 'cap-label', text: label }), h('span', { class: 'cap-value', text: value }), sub);
    capacity.replaceChildren(
      card('Sandboxes', String(list.length), h('span', { class: 'hint', text: `${by('running')} running · ${by('paused')} paused · ${by('stopped')} stopped` + (by('lost') ? ` · ${by('lost')} lost` : '') })),
      card('CPU in use', `${cpus.toFixed(2)} CPU`, h('span', { class: 'hint', text: cpuLimit ? `limits add up to ${cpuLimit} CPU` : 'no CPU limits set' })),
      card('Memory', bytes(mem), h('span', { class: 'hint', text: memLimit ? `of ${bytes(memLimit)} in limits` : '' })),
      card('Disk', bytes(disk), h('span', { class: 'hint', text: quota ? `of ${bytes(quota)} in quotas` : '' })),
    );
  };

  const render = () => {
    const now = Date.now();
    renderHead();
    const rows = shown();
    tbody.replaceChildren(...(rows.length ? rows.map((sb) => rowFor(sb, now))
      : [h('tr', {}, h('td', { colspan: String(cols.length + 1), text: list.length ? 'No sandbox matches the filter.' : 'No sandboxes yet.' }))]));
    renderCapacity();
    syncBulk();
  };

  const poll = async () => {
    try {
      const st = await call<Stats[]>('GET', '/v1/sandbox/resources');
      const now = Date.now();
      stats = new Map(st.map((s) => [s.id, s]));
      for (const s of st) {
        const hist = samples.get(s.id) ?? [];
        // CPUs in use: CPU-nanoseconds over wall-nanoseconds, over the
        // last few readings (the browser times each answer as it arrives,
        // so one interval alone jitters with the server's latency).
        const prev = hist[Math.max(0, hist.length - cpuWindow)];
        const raw = s.cgroup.CPUUsage;
        const cpu = prev && now > prev.t && raw >= prev.raw ? (raw - prev.raw) / 1e6 / (now - prev.t) : 0;
        hist.push({ t: now, raw, cpu });
        if (hist.length > maxSamples) hist.shift();
        samples.set(s.id, hist);
      }
      render();
    } catch {
      /* the list shows the error */
    }
  };
  const refresh = async () => {
    await guarded('List sandboxes', async () => {
      list = await call<Sandbox[]>('GET', '/v1/sandboxes');
      render();
    });
    await poll();
  };

  filter.addEventListener('input', () => {
    view.filter = filter.value.trim();
    render();
  });
  stateSel.addEventListener('change', () => {
    view.state = stateSel.value;
    render();
  });
  selectAll.addEventListener('change', () => {
    for (const sb of shown()) {
      if (selectAll.checked) selected.add(sb.id);
      else selected.delete(sb.id);
    }
    render();
  });
  bulk.addEventListener('click', () => void guarded('Delete', async () => {
    const ids = [...selected];
    if (!ids.length || !confirm(`Delete ${ids.length} sandbox${ids.length > 1 ? 'es' : ''} and their workspaces?`)) return;
    const failed: string[] = [];
    for (const id of ids) {
      try {
        await call('DELETE', `/v1/sandboxes/${encodeURIComponent(id)}`);
        selected.delete(id);
      } catch (e: any) {
        failed.push(`${id.slice(0, 8)}: ${e.message}`);
      }
    }
    await refresh();
    if (failed.length) say(`Deleted ${ids.length - failed.length} of ${ids.length}; ${failed.join('; ')}`, true);
    else say(`Deleted ${ids.length} sandbox${ids.length > 1 ? 'es' : ''}`);
  }));
  newBtn.addEventListener('click', () => createDrawer(() => void refresh()));

  await refresh();
  if (preset.template && writable) createDrawer(() => void refresh(), preset.template);
  const timer = window.setInterval(() => void poll(), 2000);
  onLeave(() => window.clearInterval(timer));
}

// The fields of the create form and the request fields they fill, so a
// server error naming a field lands at its input.
const fieldOfRequest: Record<string, string> = {
  name: 'c-name', template: 'c-template', 'limits.memory': 'c-memory', 'limits.cpu': 'c-cpu', 'limits.pids': 'c-pids',
  'limits.disk': 'c-disk', 'limits.cpu_time': 'c-cputime', ttl: 'c-ttl', 'network.mode': 'c-mode', 'network.allow': 'c-allow', network: 'c-allow',
};

const sizeRe = /^\d+(\.\d+)?\s*([KMGT]i?B?|B)?$/i;

export function createDrawer(onDone: () => void, template = '') {
  const inp = (id: string, attrs: Record<string, string> = {}) => h('input', { id, name: id, ...attrs });
  const mode = h('select', { id: 'c-mode', name: 'mode' },
    h('option', { value: 'none', text: 'none (no egress)' }), h('option', { value: 'proxy', text: 'proxy (allow-list)' }), h('option', { value: 'host', text: 'host (admin only)' }));
  const allow = h('textarea', { id: 'c-allow', name: 'allow', rows: '2', placeholder: 'pypi.org *.pythonhosted.org' });
  const tpl = inp('c-template', { maxlength: '300', placeholder: 'host', value: template, list: 'c-template-list' });
  const tplList = h('datalist', { id: 'c-template-list' });
  const form = h('form', { class: 'drawer-form', 'aria-label': 'New sandbox', novalidate: true },
    field('c-name', 'Name', inp('c-name', { maxlength: '128', autocomplete: 'off' }), 'unique among your sandboxes; optional'),
    field('c-template', 'Template', tpl, 'host (the server\'s /usr) or a template from the Templates page'),
    h('div', { class: 'grid2' },
      field('c-memory', 'Memory', inp('c-memory', { placeholder: '512MiB' })),
      field('c-cpu', 'CPUs', inp('c-cpu', { type: 'number', step: '0.1', min: '0', placeholder: '1' })),
      field('c-pids', 'Processes', inp('c-pids', { type: 'number', min: '0', placeholder: '50' })),
      field('c-disk', 'Disk', inp('c-disk', { placeholder: '1GiB' })),
      field('c-cputime', 'CPU time per command', inp('c-cputime', { placeholder: '30s' })),
      field('c-ttl', 'Time to live', inp('c-ttl', { placeholder: '2h' }))),
    field('c-mode', 'Egress', mode),
    field('c-allow', 'Allowed hosts (proxy mode; space or newline separated)', allow),
    h('div', { class: 'drawer-actions' }, h('button', { type: 'submit', text: 'Create' }), h('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => closeDrawer() })),
    tplList);
  openDrawer('New sandbox', form);
  void call<{ name?: string; tag?: string; digest: string }[]>('GET', '/v1/templates').then((ts) => {
    tplList.replaceChildren(...(ts ?? []).filter((t) => t.name).map((t) => h('option', { value: `${visible(t.name)}:${visible(t.tag || 'latest')}` })));
  }, () => {});

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const v = (id: string) => (form.querySelector('#' + id) as HTMLInputElement).value.trim();
    // What the browser can tell before asking: sizes, numbers, durations.
    const local: [string, boolean, string][] = [
      ['c-memory', !v('c-memory') || sizeRe.test(v('c-memory')), 'a size like 512MiB or 1GiB'],
      ['c-cpu', !v('c-cpu') || Number(v('c-cpu')) > 0, 'a number of CPUs above 0, like 0.5 or 2'],
      ['c-pids', !v('c-pids') || (Number.isInteger(Number(v('c-pids'))) && Number(v('c-pids')) > 0), 'a whole number above 0'],
      ['c-disk', !v('c-disk') || sizeRe.test(v('c-disk')), 'a size like 1GiB'],
      ['c-cputime', !v('c-cputime') || duration(v('c-cputime')) > 0, 'a duration like 30s or 2m'],
      ['c-ttl', !v('c-ttl') || duration(v('c-ttl')) > 0, 'a duration like 2h or 90m'],
      ['c-allow', mode.value === 'proxy' || !allow.value.trim(), 'allowed hosts need the proxy egress mode'],
    ];
    const bad = local.find(([, ok]) => !ok);
    if (bad) {
      showError(form, bad[0], bad[2]);
      return;
    }
    const limits: Record<string, unknown> = {};
    if (v('c-memory')) limits.memory = v('c-memory');
    if (v('c-cpu')) limits.cpu = Number(v('c-cpu'));
    if (v('c-pids')) limits.pids = Number(v('c-pids'));
    if (v('c-disk')) limits.disk = v('c-disk');
    if (v('c-cputime')) limits.cpu_time = v('c-cputime');
    const body: Record<string, unknown> = { limits, network: { mode: mode.value, allow: allow.value.split(/\s+/).filter(Boolean) } };
    if (v('c-name')) body.name = v('c-name');
    if (v('c-template')) body.template = v('c-template');
    if (v('c-ttl')) body.ttl = v('c-ttl');
    const submit = form.querySelector('button[type=submit]') as HTMLButtonElement;
    submit.disabled = true;
    void (async () => {
      try {
        const sb = await call<Sandbox>('POST', '/v1/sandboxes', body);
        say(`Created ${visible(sb.name || sb.id)}`);
        closeDrawer();
        onDone();
      } catch (e: any) {
        // The request field the server named, else a template it could not find.
        const f = fieldOfRequest[e.field] ?? (/^template\b/.test(e.message) ? 'c-template' : undefined);
        showError(form, f ?? null, e.message);
        say(`Create: ${e.message}`, true);
      } finally {
        submit.disabled = false;
      }
    })();
  });
}
