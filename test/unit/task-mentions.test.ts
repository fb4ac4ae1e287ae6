// Whether a JSON-RPC body may name an MCP task, from its bytes: the whole-body check and the streaming
// scanner, against every way a JSON parser (JavaScript's, or Go's case-folding one) would read "task".

import { describe, expect, it } from 'vitest';
import { mayNameTasks, TaskMentionScanner } from '../../src/proxy/task-mentions.ts';

/** The scanner fed `text` cut into pieces of `size` bytes (so escapes and UTF-8 split across chunks). */
function scanned(text: string, size: number): boolean {
  const bytes = Buffer.from(text, 'utf8');
  const scanner = new TaskMentionScanner();
  let seen = false;
  for (let i = 0; i < bytes.length; i += size) seen = scanner.feed(bytes.subarray(i, i + size));
  return seen;
}

const NAMING = [
  '{"method":"tasks/get","params":{"taskId":"x"}}',
  '{"method":"tools/call","params":{"name":"a","task":{"ttl":1}}}',
  '{"method":"\\u0074asks/get"}',
  '{"params":{"t\\u0061skId":"x"}}',
  '{"params":{"\\u0054\\u0041\\u0053\\u004B":{}}}',
  '{"params":{"TaskId":"x"}}',
  '{"params":{"TASK":{}}}',
  '{"params":{"taſk":{}}}',
  '{"params":{"tasK":{}}}',
  '{"params":{"ta\\u017fk":{}}}',
  '{"params":{"tas\\u212aId":"x"}}',
];

const NOT_NAMING = [
  '{"method":"tools/call","params":{"name":"multitask","arguments":{"text":"a task"}}}',
  '{"method":"ping"}',
  '{"note":"caf\\u00e9"}',
  '{"note":"\\\\task"}',
];

describe('task mentions', () => {
  it.each(NAMING)('%s names a task, whole and in pieces of any size', (text) => {
    expect(mayNameTasks(Buffer.from(text))).toBe(true);
    for (const size of [1, 2, 3, 5, 7, 64]) expect(scanned(text, size), `pieces of ${size}`).toBe(true);
  });

  it.each(NOT_NAMING)('%s names none for the scanner', (text) => {
    for (const size of [1, 3, 64]) expect(scanned(text, size), `pieces of ${size}`).toBe(false);
  });

  it('the whole-body check errs only towards parsing: a plain body names none, any \\u escape may', () => {
    expect(mayNameTasks(Buffer.from('{"method":"tools/call","params":{"name":"multitask"}}'))).toBe(false);
    expect(mayNameTasks(Buffer.from('{"note":"caf\\u00e9"}'))).toBe(true);
  });

  it('once seen, the scanner keeps saying so', () => {
    const scanner = new TaskMentionScanner();
    expect(scanner.feed(Buffer.from('{"task'))).toBe(true);
    expect(scanner.feed(Buffer.from('"ping"'))).toBe(true);
  });
});
