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
