// Operator pages: the policy in force, HALT, keys.
import { visible } from './visible';
import { call, guarded, h, page, reroute, say, session, visibleJSON } from './ui';

export async function policyPage() {
  const pre = h('pre', { tabindex: '0', class: 'fileview', text: 'loading…' });
  page('Policy in force', h('p', { class: 'hint' }, 'Change it with PUT /v1/policy (see ', h('a', { href: '/docs', text: 'the API reference' }), ').'), pre);
  await guarded('Policy', async () => {
    pre.textContent = visibleJSON(await call('GET', '/v1/policy'));
  });
}

export async function controlPage() {
  const st = await call<{ halted: boolean; reason?: string; by?: string; since?: string }>('GET', '/v1/control').catch((e) => {
    say(e.message, true);
    return null;
  });
  const reason = h('input', { id: 'halt-reason', name: 'reason', required: true, maxlength: '512' });
  const confirmBox = h('input', { id: 'halt-confirm', name: 'confirm', type: 'checkbox', required: true });
  const haltForm = h('form', { class: 'card danger-zone', 'aria-label': 'HALT the server' },
    h('p', { text: 'HALT refuses every non-safe call, kills running commands and freezes every sandbox until unhalted.' }),
    h('div', { class: 'field' }, h('label', { for: 'halt-reason', text: 'Reason (shown in every refusal)' }), reason),
    h('div', { class: 'check' }, confirmBox, h('label', { for: 'halt-confirm', text: 'Yes, halt every sandbox now' })),
    h('button', { type: 'submit', class: 'danger', text: 'HALT' }));
  haltForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!confirmBox.checked || !reason.value.trim()) {
      say('Give a reason and tick the confirmation', true);
      return;
    }
    void guarded('HALT', async () => {
      await call('POST', '/v1/control/halt', { reason: reason.value.trim() });
      say('Halted');
      await reroute();
    });
  });
  const unhalt = h('button', { type: 'button', text: 'Unhalt', onclick: () => void guarded('Unhalt', async () => {
    await call('POST', '/v1/control/unhalt');
    say('Unhalted');
    await reroute();
  }) });
  page('HALT',
    st?.halted
      ? h('div', { class: 'card' }, h('p', { class: 'bad', text: `Halted since ${visible(st.since ?? '')} by ${visible(st.by ?? '')}: ${visible(st.reason ?? '')}` }), unhalt)
      : haltForm);
}

export async function keysPage() {
  const tbody = h('tbody');
  const shown = h('div', { 'aria-live': 'polite' });
  const name = h('input', { id: 'k-name', name: 'name', required: true, maxlength: '64' });
  const role = h('select', { id: 'k-role', name: 'role' }, h('option', { value: 'agent', text: 'agent' }), h('option', { value: 'viewer', text: 'viewer' }), h('option', { value: 'admin', text: 'admin' }));
  const form = h('form', { class: 'card grid', 'aria-label': 'Create a key' },
    h('div', { class: 'field' }, h('label', { for: 'k-name', text: 'Name' }), name),
    h('div', { class: 'field' }, h('label', { for: 'k-role', text: 'Role' }), role),
    h('button', { type: 'submit', text: 'Create key' }));
  const load = async () => {
    const keys = await call<any[]>('GET', '/v1/keys');
    tbody.replaceChildren(...keys.map((k) => h('tr', {},
      h('td', {}, h('code', { text: visible(k.id) })), h('td', { text: visible(k.name) }), h('td', { text: visible(k.role) }),
      h('td', { text: visible(k.created_at) }), h('td', { text: k.revoked_at ? `revoked ${visible(k.revoked_at)}` : 'active' }),
      h('td', {}, k.revoked_at || k.id === session.me?.key_id ? '' : h('button', { type: 'button', class: 'danger', text: 'Revoke', onclick: () => void guarded('Revoke', async () => {
        if (!confirm(`Revoke ${visible(k.name)}? Its sessions and terminals end at once.`)) return;
        await call('DELETE', `/v1/keys/${encodeURIComponent(k.id)}`);
        say(`Revoked ${visible(k.name)}`);
        await load();
      }) })))));
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void guarded('Create key', async () => {
      const k = await call<any>('POST', '/v1/keys', { name: name.value.trim(), role: role.value });
      const out = h('input', { id: 'new-key', readonly: true, value: k.key, 'aria-label': 'The new key', size: '50' });
      shown.replaceChildren(h('div', { class: 'card ok' },
        h('p', { text: `Key for ${visible(k.name)} — shown only this once; copy it now.` }), out,
        h('button', { type: 'button', text: 'Copy', onclick: () => void navigator.clipboard?.writeText(k.key).then(() => say('Copied')) }),
        h('button', { type: 'button', text: 'Done', onclick: () => shown.replaceChildren() })));
      out.focus();
      out.select();
      form.reset();
      await load();
    });
  });
  page('Keys', form, shown, h('div', { class: 'scroll' }, h('table', {}, h('caption', { text: 'API keys (secrets are never shown again)' }),
    h('thead', {}, h('tr', {}, ...['Id', 'Name', 'Role', 'Created', 'State', ''].map((c) => h('th', { scope: 'col', text: c })))), tbody)));
  await guarded('Keys', load);
}
