package browserops

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	cdproto "github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"

	"github.com/sandhold/sandhold/internal/browser/cdp"
	"github.com/sandhold/sandhold/internal/fault"
)

// helpersJS are the functions the operations run in the page. Arguments
// travel as JSON (never spliced into code), so a selector or a text
// cannot turn into script.
const helpersJS = `
const H = (() => {
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    const st = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none';
  };
  const SEL = 'a[href],button,input:not([type=hidden]),select,textarea,summary,[role=button],[role=link],' +
    '[role=checkbox],[role=radio],[role=tab],[role=menuitem],[role=option],[role=switch],[role=textbox],' +
    '[role=combobox],[onclick],[contenteditable=""],[contenteditable=true]';
  const interactive = () => Array.from(document.querySelectorAll(SEL)).filter(visible);
  const find = (a) => {
    if (a.selector) {
      const el = document.querySelector(a.selector);
      if (!el) throw new Error('no element matches the selector');
      return el;
    }
    if (a.index !== null && a.index !== undefined) {
      const el = interactive()[a.index];
      if (!el) throw new Error('no interactive element has index ' + a.index);
      return el;
    }
    throw new Error('give a selector or an index');
  };
  const center = (el) => {
    el.scrollIntoView({block: 'center', inline: 'center'});
    const r = el.getBoundingClientRect();
    return {x: r.left + r.width / 2, y: r.top + r.height / 2};
  };
  const label = (el) => (el.innerText || el.value || el.getAttribute('aria-label') ||
    el.getAttribute('placeholder') || el.getAttribute('title') || el.getAttribute('alt') || '')
    .toString().trim().replace(/\s+/g, ' ').slice(0, 200);
  const describe = (el, i) => {
    const r = el.getBoundingClientRect();
    const o = {index: i, tag: el.tagName.toLowerCase(), text: label(el),
      rect: {x: Math.round(r.left), y: Math.round(r.top), width: Math.round(r.width), height: Math.round(r.height)}};
    for (const k of ['type', 'role', 'name', 'id', 'href', 'placeholder']) {
      const v = el.getAttribute(k);
      if (v) o[k] = v.slice(0, 500);
    }
    if ('checked' in el && (el.type === 'checkbox' || el.type === 'radio')) o.checked = el.checked;
    if (el.disabled) o.disabled = true;
    return o;
  };
  const setValue = (el, v) => {
    const proto = Object.getPrototypeOf(el);
    const d = Object.getOwnPropertyDescriptor(proto, 'value');
    if (d && d.set) d.set.call(el, v); else el.value = v;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
  };
  return {visible, interactive, find, center, label, describe, setValue};
})();
`

// maxEvalResult caps the JSON an evaluation may hand back.
const maxEvalResult = 4 << 20

// callJS runs body as an async function of a (the JSON of args) with the
// helpers in scope, and decodes what it returns into out (nil: ignored).
// An exception is an Invalid fault with the page's first line of it.
func callJS(ctx context.Context, s *cdp.Session, body string, args, out any) error {
	a, err := json.Marshal(args)
	if err != nil {
		return err
	}
	expr := "(async (a) => {" + helpersJS + body + "\n})(" + string(a) + ")"
	raw, err := evaluate(ctx, s, expr)
	if err != nil {
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode page answer: %w", err)
	}
	return nil
}

// evaluate runs expr in the page (promises awaited) and returns its
// value as JSON ("" for undefined).
func evaluate(ctx context.Context, s *cdp.Session, expr string) (json.RawMessage, error) {
	res, err := cdproto.Call(ctx, s, runtime.Evaluate, runtime.EvaluateParams{
		Expression: expr, ReturnByValue: &yes, AwaitPromise: &yes, UserGesture: &yes})
	if err != nil {
		return nil, err
	}
	if d := res.ExceptionDetails; d != nil {
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg = d.Exception.Description
		}
		return nil, pageError(msg)
	}
	if res.Result == nil {
		return nil, nil
	}
	if len(res.Result.Value) > maxEvalResult {
		return nil, fault.New(fault.TooLarge, fmt.Sprintf("the page's answer is larger than %d bytes", maxEvalResult))
	}
	if len(res.Result.Value) > 0 {
		// Through []byte: on go1.27 jsonv2.Value is json.RawMessage, on
		// go1.26 a distinct type; the return type takes []byte on both.
		return []byte(res.Result.Value), nil
	}
	if res.Result.UnserializableValue != "" {
		b, _ := json.Marshal(string(res.Result.UnserializableValue))
		return b, nil
	}
	return nil, nil
}

// pageError is an exception thrown in the page: the page's state, not
// the request, is what failed (so AIO answers it as a tool-level failure,
// not a 422). The helpers' "no element …", "no such option" are NotFound.
func pageError(desc string) error {
	msg, _, _ := strings.Cut(desc, "\n")
	msg = strings.TrimPrefix(strings.TrimPrefix(msg, "Uncaught "), "Error: ")
	if strings.HasPrefix(msg, "no ") {
		return fault.New(fault.NotFound, "page: "+clipMsg(msg))
	}
	return fault.New(fault.Conflict, "page: "+clipMsg(msg))
}

func clipMsg(s string) string {
	if len(s) > 500 {
		return s[:500] + "…"
	}
	return s
}

// markdownJS turns the page's main content into Markdown: headings,
// paragraphs, links, lists, emphasis, code, quotes, images and tables;
// scripts, styles and navigation chrome are left out.
const markdownJS = `
const skip = new Set(['SCRIPT','STYLE','NOSCRIPT','TEMPLATE','SVG','CANVAS','IFRAME','HEAD','NAV','FOOTER','FORM']);
const root = document.querySelector('main, article, [role=main]') || document.body;
if (!root) return {title: document.title, url: location.href, markdown: ''};
const esc = (t) => t.replace(/\s+/g, ' ');
const inline = (n) => {
  let out = '';
  for (const c of n.childNodes) {
    if (c.nodeType === 3) { out += esc(c.textContent); continue; }
    if (c.nodeType !== 1 || skip.has(c.tagName)) continue;
    const t = c.tagName;
    const inner = inline(c);
    if (t === 'A') { const h = c.getAttribute('href'); out += h ? '[' + inner.trim() + '](' + c.href + ')' : inner; }
    else if (t === 'STRONG' || t === 'B') out += inner.trim() ? '**' + inner.trim() + '**' : '';
    else if (t === 'EM' || t === 'I') out += inner.trim() ? '_' + inner.trim() + '_' : '';
    else if (t === 'CODE') out += '` + "`" + `' + c.textContent + '` + "`" + `';
    else if (t === 'BR') out += '\n';
    else if (t === 'IMG') { const alt = c.getAttribute('alt') || ''; out += '![' + alt + '](' + c.src + ')'; }
    else out += block(c) ? '\n' + block(c) + '\n' : inner;
  }
  return out;
};
const isBlock = (t) => /^(H[1-6]|P|DIV|SECTION|ARTICLE|MAIN|HEADER|ASIDE|UL|OL|LI|PRE|BLOCKQUOTE|TABLE|HR|DL|DT|DD|FIGURE|FIGCAPTION)$/.test(t);
const block = (n) => {
  const t = n.tagName;
  if (!isBlock(t)) return '';
  if (/^H[1-6]$/.test(t)) return '#'.repeat(+t[1]) + ' ' + inline(n).trim();
  if (t === 'P') return inline(n).trim();
  if (t === 'PRE') return '` + "```" + `\n' + n.textContent.replace(/\n$/, '') + '\n` + "```" + `';
  if (t === 'HR') return '---';
  if (t === 'BLOCKQUOTE') return children(n).split('\n').map(l => '> ' + l).join('\n');
  if (t === 'UL' || t === 'OL') {
    let i = 1;
    return Array.from(n.children).filter(li => li.tagName === 'LI').map(li =>
      (t === 'OL' ? (i++) + '. ' : '- ') + children(li).trim().replace(/\n/g, '\n  ')).join('\n');
  }
  if (t === 'TABLE') {
    const rows = Array.from(n.querySelectorAll('tr')).map(r => Array.from(r.children).map(c => inline(c).trim().replace(/\|/g, '\\|')));
    if (!rows.length) return '';
    const w = Math.max(...rows.map(r => r.length));
    const line = (r) => '| ' + Array.from({length: w}, (_, i) => r[i] || '').join(' | ') + ' |';
    return [line(rows[0]), '|' + ' --- |'.repeat(w), ...rows.slice(1).map(line)].join('\n');
  }
  return children(n);
};
const children = (n) => {
  const parts = [];
  let buf = '';
  for (const c of n.childNodes) {
    if (c.nodeType === 1 && skip.has(c.tagName)) continue;
    if (c.nodeType === 1 && isBlock(c.tagName)) {
      if (buf.trim()) parts.push(buf.trim());
      buf = '';
      const b = block(c);
      if (b.trim()) parts.push(b);
    } else if (c.nodeType === 3) buf += esc(c.textContent);
    else if (c.nodeType === 1) buf += inline({childNodes: [c]});
  }
  if (buf.trim()) parts.push(buf.trim());
  return parts.join('\n\n');
};
return {title: document.title, url: location.href, markdown: children(root).replace(/\n{3,}/g, '\n\n').trim()};
`

// findTextJS lists the text nodes that contain a keyword (case-blind),
// with their element and some context, at most a.max of them.
const findTextJS = `
const kw = a.keyword.toLowerCase();
const out = [];
if (!document.body) return out;
const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
let n;
while ((n = w.nextNode()) && out.length < a.max) {
  const p = n.parentElement;
  if (!p || ['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE'].includes(p.tagName)) continue;
  const text = n.textContent;
  const i = text.toLowerCase().indexOf(kw);
  if (i < 0) continue;
  const r = p.getBoundingClientRect();
  out.push({index: out.length, text: text.slice(Math.max(0, i - 80), i + kw.length + 80).trim().replace(/\s+/g, ' '),
    tag: p.tagName.toLowerCase(), visible: H.visible(p),
    rect: {x: Math.round(r.left), y: Math.round(r.top), width: Math.round(r.width), height: Math.round(r.height)}});
}
return out;
`

// captchaJS looks for the widgets of the common CAPTCHA services. It only
// detects: sandhold solves no CAPTCHA.
const captchaJS = `
const sigs = [
  ['recaptcha', 'iframe[src*="recaptcha"], .g-recaptcha, #recaptcha'],
  ['hcaptcha', 'iframe[src*="hcaptcha"], .h-captcha'],
  ['turnstile', 'iframe[src*="challenges.cloudflare.com"], .cf-turnstile'],
  ['cloudflare_challenge', '#challenge-form, #cf-challenge-running, #challenge-stage'],
  ['arkose', 'iframe[src*="arkoselabs"], iframe[src*="funcaptcha"]'],
  ['geetest', '.geetest_holder, .geetest_panel'],
  ['generic', 'img[src*="captcha" i], input[name*="captcha" i]'],
];
const found = [];
for (const [kind, sel] of sigs) {
  const el = document.querySelector(sel);
  if (el) found.push({type: kind, selector: sel.split(',')[0].trim(), visible: H.visible(el)});
}
return {detected: found.length > 0, captchas: found, url: location.href};
`
