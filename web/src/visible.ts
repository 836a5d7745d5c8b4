// The one rendering rule for server text in the console.
//
// visible escapes what could change how surrounding text is shown, by the
// rules of internal/audit.Visible: C0/C1 controls and DEL, format
// characters (bidi overrides, zero-width, tags), line/paragraph
// separators. \n \r \t are shown as such; a backslash is left alone.
const hidden = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
export function visible(s: unknown): string {
  const str = typeof s === 'string' ? s : s === undefined || s === null ? '' : String(s);
  if (!hidden.test(str)) return str;
  let out = '';
  for (const ch of str) {
    const cp = ch.codePointAt(0)!;
    if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (!hidden.test(ch)) out += ch;
    else if (cp < 0x80) out += '\\x' + cp.toString(16).padStart(2, '0');
    else if (cp <= 0xffff) out += '\\u' + cp.toString(16).padStart(4, '0');
    else out += '\\U' + cp.toString(16).padStart(8, '0');
  }
  return out;
}

// escaped is the unambiguous rendering of an audit record's string, by the
// rules of internal/audit.Escape: every backslash doubled, then visible(),
// so a tab (shown \t) and a typed backslash-t (shown \\t) never look alike.
export function escaped(s: unknown): string {
  const str = typeof s === 'string' ? s : s === undefined || s === null ? '' : String(s);
  return visible(str.replace(/\\/g, '\\\\'));
}

// escapedJSON renders a value as indented JSON with its strings exact
// (JSON's escaping is lossless), by the rules of internal/audit.JSONLine:
// the characters JSON.stringify leaves raw (DEL, C1 controls, bidi and
// other format characters, U+2028/U+2029) written as \u escapes. The only
// raw newlines are the indentation's: inside strings JSON escapes them.
const hiddenAll = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
export function escapedJSON(v: unknown): string {
  const json = JSON.stringify(v, null, 2) ?? '';
  return json.replace(hiddenAll, (ch) => {
    if (ch === '\n') return ch;
    let out = '';
    for (let i = 0; i < ch.length; i++) out += '\\u' + ch.charCodeAt(i).toString(16).padStart(4, '0');
    return out;
  });
}
