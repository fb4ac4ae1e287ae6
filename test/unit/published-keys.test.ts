// Publishing an assertion key in the shared hash (src/model/published-keys.ts): a pure step.

import { describe, expect, it } from 'vitest';
import { publishKey } from '../../src/model/published-keys.ts';

describe('publishKey', () => {
  it('writes a new key and lasts as long as the longest listing', () => {
    expect(publishKey([{ kid: 'a', expiresAt: 50 }], 'b', 40, 10)).toEqual({ write: true, forget: [], until: 50 });
    expect(publishKey([], 'b', 40, 10)).toEqual({ write: true, forget: [], until: 40 });
  });

  it('extends a listing and never shortens it', () => {
    expect(publishKey([{ kid: 'k', expiresAt: 50 }], 'k', 40, 10)).toEqual({ write: false, forget: [], until: 50 });
    expect(publishKey([{ kid: 'k', expiresAt: 50 }], 'k', 60, 10)).toEqual({ write: true, forget: [], until: 60 });
    expect(publishKey([{ kid: 'k', expiresAt: undefined }], 'k', 40, 10)).toEqual({ write: true, forget: [], until: 40 });
  });

  it('forgets entries expired by now or unreadable; with nothing live left, the hash ends', () => {
    const listed = [
      { kid: 'old', expiresAt: 10 },
      { kid: 'junk', expiresAt: undefined },
      { kid: 'live', expiresAt: 30 },
    ];
    expect(publishKey(listed, 'new', 20, 10)).toEqual({ write: true, forget: ['old', 'junk'], until: 30 });
    expect(publishKey(listed, 'new', 20, 30)).toEqual({ write: true, forget: ['old', 'junk', 'live', 'new'], until: undefined });
  });
});
