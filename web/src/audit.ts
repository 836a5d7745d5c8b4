// The audit log (filters, the console's own polling reads hidden unless
// asked for, a record's detail in a drawer) and the approvals waiting for
// an operator (what the call runs and why it waits).
import { escaped, escapedJSON, visible } from './visible';
import { ago, call, guarded, h, openDrawer, page, say, session, visibleJSON } from './ui';

interface AuditRecord {
  seq: number;
  time: string;
  actor: string;
  role: string;
  client_addr: string;
  action: string;
  target: string;
  sandbox: string;
  verdict: string;
  reason?: string;
  request_id?: string;
  detail: Record<string, unknown> | null;
  hash?: string;
  prev_hash?: string;
}

// The reads the console itself makes every few seconds: left out of the
// log's view unless "Show reads" is ticked (they are still recorded).
export const pollingReads = ['sandbox.list', 'sandbox.resources', 'control.get', 'approvals.list', 'template.list', 'audit.query', 'audit.verify', 'policy.get', 'keys.list'];

const verdicts = ['', 'allow', 'deny', 'error', 'pending'];

export async function auditPage(q: URLSearchParams) {
  const fields: [string, string, string][] = [['actor', 'Actor (key id)', ''], ['action', 'Action (prefix or category)', 'exec, auth, file…'], ['sandbox', 'Sandbox', ''], ['since', 'Since', '1h or RFC 3339']];
  const reads = h('input', { id: 'a-reads', type: 'checkbox', checked: q.get('reads') === '1' });
  const verdict = h('select', { id: 'a-verdict', name: 'verdict' }, ...verdicts.map((v) => h('option', { value: v, text: v || 'any verdict', selected: q.get('verdict') === v })));
  const form = h('form', { class: 'card grid', 'aria-label': 'Filter the audit log' },
    ...fields.map(([k, label, ph]) => h('div', { class: 'field' }, h('label', { for: 'a-' + k, text: label }), h('input', { id: 'a-' + k, name: k, placeholder: ph, value: q.get(k) ?? '' }))),
    h('div', { class: 'field' }, h('label', { for: 'a-verdict', text: 'Verdict' }), verdict),
    h('div', { class: 'check' }, reads, h('label', { for: 'a-reads', text: 'Show the console\'s polling reads' })),
    h('button', { type: 'submit', text: 'Filter' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const nq = new URLSearchParams();
    for (const [k] of fields) {
      const v = (form.querySelector('#a-' + k) as HTMLInputElement).value.trim();
      if (v) nq.set(k, v);
    }
    if (verdict.value) nq.set('verdict', verdict.value);
    if (reads.checked) nq.set('reads', '1');
    location.hash = '#/audit?' + nq.toString();
  });
  const verify = h('p', { id: 'audit-verify', role: 'status', text: 'Verifying the chain…' });
  const tbody = h('tbody');
  const count = h('p', { class: 'hint', id: 'audit-count' });
  page('Audit log', verify, form, count, h('div', { class: 'scroll' }, h('table', { class: 'audit' }, h('caption', { text: 'Audit records, newest first; control and bidi characters are shown escaped, a backslash as \\\\. Open a record for all of it.' }),
    h('thead', {}, h('tr', {}, ...['Seq', 'Time', 'Actor', 'Action', 'Target', 'Sandbox', 'Verdict', ''].map((c) => h('th', { scope: 'col', text: c })))), tbody)));
  if (session.me?.role !== 'agent') {
    void call<{ ok: boolean; records: number; first_bad?: number; problem?: string }>('GET', '/v1/audit/verify').then(
      (v) => {
        verify.textContent = v.ok ? `Chain verified: ${v.records} records intact.` : `CHAIN BROKEN at record ${v.first_bad}: ${visible(v.problem ?? '')}`;
        verify.className = v.ok ? 'ok' : 'bad';
      },
      (e) => (verify.textContent = `Verification failed: ${visible(e.message)}`));
  } else verify.textContent = 'Agents see their own records; the chain is verified by operators.';
  const aq = new URLSearchParams({ order: 'desc', limit: '500' });
  for (const [k] of fields) if (q.get(k)) aq.set(k, q.get(k)!);
  if (q.get('reads') !== '1') aq.set('except', pollingReads.join(','));
  await guarded('Audit', async () => {
    const res = await call<{ records: AuditRecord[] }>('GET', '/v1/audit?' + aq.toString());
    const want = q.get('verdict') ?? '';
    const recs = res.records.filter((r) => !want || r.verdict.startsWith(want)); // allow and allowed, deny and denied
    // The API answers the stored strings; they are shown with escaped()
    // (backslashes doubled), so a tab and a typed backslash-t differ.
    tbody.replaceChildren(...recs.map((r) => h('tr', { 'data-seq': String(r.seq) },
      h('td', { text: String(r.seq) }), h('td', { title: escaped(r.time), text: escaped(r.time.replace('T', ' ').replace(/\.\d+/, '')) }), h('td', {}, h('code', { text: escaped(r.actor) })),
      h('td', { text: escaped(r.action) }), h('td', { class: 'target', text: escaped(r.target) }), h('td', { text: escaped(r.sandbox) }),
      h('td', { class: 'verdict-' + visible(r.verdict), text: escaped(r.verdict) }),
      h('td', {}, h('button', { type: 'button', class: 'secondary small', text: 'Open', 'aria-label': `Open record ${r.seq}`, onclick: () => recordDrawer(r) })))));
    if (!recs.length) tbody.append(h('tr', {}, h('td', { colspan: '8', text: 'No records match.' })));
    count.textContent = `${recs.length} record${recs.length === 1 ? '' : 's'}` + (q.get('reads') === '1' ? '' : '; the console\'s polling reads are hidden') + (res.records.length >= 500 ? '; the newest 500 (narrow the filter for older ones)' : '');
  });
}

// recordDrawer shows every field of one record, escaped as the table is.
function recordDrawer(r: AuditRecord) {
  const rows: [string, string][] = [
    ['Sequence', String(r.seq)], ['Time', escaped(r.time)], ['Actor', escaped(r.actor)], ['Role', escaped(r.role)], ['Client address', escaped(r.client_addr)],
    ['Action', escaped(r.action)], ['Target', escaped(r.target)], ['Sandbox', escaped(r.sandbox)], ['Verdict', escaped(r.verdict)],
  ];
  for (const [k, label] of [['reason', 'Reason'], ['request_id', 'Request id'], ['hash', 'Hash'], ['prev_hash', 'Previous hash']] as const) {
    if (r[k]) rows.push([label, escaped(r[k])]);
  }
  openDrawer(`Audit record ${r.seq}`,
    h('dl', { class: 'record' }, ...rows.flatMap(([k, v]) => [h('dt', { text: k }), h('dd', { class: k === 'Target' ? 'target' : '', text: v })])),
    h('h3', { text: 'Detail' }),
    h('pre', { class: 'fileview', tabindex: '0', text: r.detail ? escapedJSON(r.detail) : '(none)' }),
    h('p', {}, h('a', { href: `#/audit?sandbox=${encodeURIComponent(r.sandbox)}`, text: 'Records of this sandbox' }), ' · ',
      h('a', { href: `#/audit?actor=${encodeURIComponent(r.actor)}`, text: 'Records of this actor' })));
}

// planOf shows what an approved call will run: each step of a custom tool
// (nested ones indented) with its rendered command or arguments, and the
// digest of the definition the approval is bound to.
function planOf(a: any): HTMLElement | null {
  const steps: any[] = Array.isArray(a.steps) ? a.steps : [];
  if (!steps.length) return null;
  const lines = steps.map((st) => {
    const what = st.late ? 'built at run time: ' + visibleJSON(st.arguments) : (st.target ? visible(st.target) : visibleJSON(st.arguments));
    return '  '.repeat(Number(st.depth) || 0) + visible(st.tool) + ': ' + what + (st.truncated ? ' …' : '');
  });
  return h('pre', { class: 'plan', text: lines.join('\n') });
}

export async function approvalsPage() {
  const list = h('div', { class: 'approvals' });
  page('Approvals', h('p', { class: 'hint', text: 'Calls waiting for an operator: what each runs and why the policy or the command guard held it. An approval covers exactly these arguments (and, for a custom tool, this definition).' }), list);
  const load = async () => {
    const all = await call<any[]>('GET', '/v1/approvals');
    // Key names for the callers (admins read keys; others see ids).
    const names = new Map<string, string>((await call<any[]>('GET', '/v1/keys').catch(() => [])).map((k) => [k.id, k.name]));
    const pending = (all ?? []).filter((a) => a.status === 'pending');
    list.replaceChildren(...pending.map((a) => {
      const rid = 'reason-' + a.id;
      const reason = h('input', { id: rid, name: 'reason', maxlength: '512' });
      const decide = (verb: 'approve' | 'deny') => void guarded(verb, async () => {
        await call('POST', `/v1/approvals/${encodeURIComponent(a.id)}/${verb}`, reason.value ? { note: reason.value } : {});
        say(`${verb === 'approve' ? 'Approved' : 'Denied'} ${visible(a.id)}`);
        await load();
      });
      const why: HTMLElement[] = [];
      for (const r of a.rules ?? []) why.push(h('li', {}, h('code', { class: 'rule', text: visible(r) })));
      for (const r of a.reasons ?? []) why.push(h('li', { text: visible(r) }));
      const facts: [string, HTMLElement | string][] = [
        ['Caller', h('span', {}, names.has(a.actor) ? `${visible(names.get(a.actor))} ` : '', h('code', { text: visible(a.actor) }), a.role ? ` (${visible(a.role)})` : '')],
        ['Tool', visible(a.tool)],
        ['Risk', h('span', { class: 'risk risk-' + visible(a.risk), text: visible(a.risk) })],
        ['Sandbox', visible(a.sandbox || '–')],
        ['Asked', `${ago(a.created_at)} ago`],
        ['Expires', ago(a.expires_at)],
      ];
      if (a.digest) facts.push(['Definition', h('code', { title: visible(a.digest), text: visible(String(a.digest).slice(0, 23)) })]);
      facts.push(['Arguments', h('code', { title: visible(a.args_hash), text: visible(String(a.args_hash ?? '').slice(0, 23)) })]);
      return h('article', { class: 'card approval', 'data-id': a.id, 'aria-labelledby': 'ap-' + a.id },
        h('h2', { id: 'ap-' + a.id }, h('span', { text: `${visible(a.tool)} ` }), h('code', { class: 'small', text: visible(a.id) })),
        h('dl', { class: 'facts' }, ...facts.flatMap(([k, v]) => [h('dt', { text: k }), h('dd', {}, v)])),
        a.target ? h('div', {}, h('h3', { text: 'Command' }), h('pre', { class: 'command', tabindex: '0', text: visible(a.target) })) : null,
        planOf(a) ? h('div', {}, h('h3', { text: 'What it runs' }), planOf(a)) : null,
        h('div', {}, h('h3', { text: 'Why it waits' }), why.length ? h('ul', { class: 'why' }, ...why) : h('p', { class: 'hint', text: 'The policy asks an operator for this tool.' })),
        h('div', { class: 'decide' }, h('label', { for: rid, text: 'Note (shown to the caller)' }), reason,
          h('button', { type: 'button', text: 'Approve', onclick: () => decide('approve') }),
          h('button', { type: 'button', class: 'danger', text: 'Deny', onclick: () => decide('deny') })));
    }));
    if (!pending.length) list.append(h('p', { class: 'card', text: 'Nothing is waiting.' }));
  };
  await guarded('Approvals', load);
}
