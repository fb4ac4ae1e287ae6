// How the CLI prints an admin operation's answer for people: tables, `key: value` lines, ISO times.

/** A millisecond timestamp as ISO 8601 without milliseconds; anything else as nothing. */
export function time(value: unknown): string {
  return typeof value === 'number' ? new Date(value).toISOString().replace(/\.\d{3}Z$/, 'Z') : '';
}

/** Columns padded to their widest cell; `(none)` for no rows. */
export function table(header: string[], rows: unknown[][]): string {
  if (rows.length === 0) return '(none)\n';
  const text = rows.map((r) => r.map((c) => (c === undefined || c === null ? '' : String(c))));
  const widths = header.map((h, i) => Math.max(h.length, ...text.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...text.map(line)].join('\n')}\n`;
}

/** `key: value` lines; timestamps also as ISO, secrets flagged as shown once. */
export function keyValues(body: Record<string, unknown>): string {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    let text = Array.isArray(value)
      ? value.join(', ')
      : typeof value === 'object' && value !== null
        ? JSON.stringify(value)
        : String(value);
    if (key.endsWith('At') && typeof value === 'number') text += `  (${time(value)})`;
    if (key === 'clientSecret' || key === 'accessToken') text += '  (shown once: store it now)';
    lines.push(`${key}: ${text}`);
  }
  return `${lines.join('\n')}\n`;
}
