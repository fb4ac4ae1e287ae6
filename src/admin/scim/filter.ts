// The list filters directories send to find a user before they create it (RFC 7644 §3.4.2.2): only
// `userName eq "..."` and `externalId eq "..."` (attribute names and `eq` in any case, the value a
// JSON string). Every other filter is refused as invalidFilter rather than answered wrongly.

import type { DirectoryIndex } from '../../model/directory.ts';
import { scimError } from './errors.ts';

const FILTER = /^\s*(userName|externalId)\s+eq\s+("(?:[^"\\]|\\.)*")\s*$/i;

/** The index and value a filter asks for. */
export function parseUserFilter(filter: string): { index: DirectoryIndex; value: string } {
  const match = filter.length <= 1024 ? FILTER.exec(filter) : null;
  if (!match) throw scimError(400, 'only the filters userName eq "..." and externalId eq "..." are supported', 'invalidFilter');
  let value: unknown;
  try {
    value = JSON.parse(match[2]!);
  } catch {
    throw scimError(400, 'the filter value is not a valid string', 'invalidFilter');
  }
  return { index: match[1]!.toLowerCase() === 'username' ? 'userName' : 'externalId', value: value as string };
}
