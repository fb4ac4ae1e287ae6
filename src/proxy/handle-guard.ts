// Keeps an upstream's MCP session ids and task ids to the principal that received them, on /mcp and
// /authz: a request presenting one recorded for another principal gets the upstream's own answer to
// an unknown session (404) or task (JSON-RPC -32602) and is never forwarded (docs/sessions.md).
// Session ids are recorded from the upstream's answers, task ids from the CreateTaskResult of a
// task-augmented request, so POST bodies that may name a task are read (task-mentions.ts). A
// `tasks/list` answer keeps only the tasks recorded for the caller. A session's record also keeps
// whether its client declared URL elicitation in the `initialize` it was minted for: every replica
// answers a user without their upstream credential in the form that client reads.

import type { IncomingMessage } from 'node:http';
import type { Audit } from '../observability/audit.ts';
import { readBody } from '../http/body.ts';
import type { Clock } from '../model/clock.ts';
import type { Principal } from '../model/credentials.ts';
import { HttpError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { checkBodyHeaders, parseClientMessages, type ClientBody, type ClientMessage, type JsonRpcLimits } from '../policy/jsonrpc.ts';
import { SseMessageRewriter } from '../policy/list-filter.ts';
import { handleRenewalDue } from '../store/records.ts';
import type { HandleKind, HandleOwner, HandleStorage, HandleUse, StoredHandle } from '../store/types.ts';
import { arrived, type BodyRewriter, type DecidedOptions, type ForwardOptions } from './forwarder.ts';
import { handleDigest, handleOwner, unknownSession, UNKNOWN_TASK } from './handles.ts';
import { mayNameTasks, TaskMentionScanner } from './task-mentions.ts';

/** Most live handles one owner holds per index (its client, its subject); past it, its least recently used is forgotten. */
export const MAX_HANDLES_PER_OWNER = 1000;

/**
 * Without a policy, a POST body up to this size is read whole and parsed when it may name a task; a
 * larger (or chunked) one streams, and is cut if it turns out to name one.
 */
export const TASK_SCAN_BYTES = 1024 * 1024;

/** Bound on a JSON answer to a task-augmented request or a `tasks/list`, held while its task ids are recorded or checked. */
const MAX_TASK_ANSWER_BYTES = 8 * 1024 * 1024;

/**
 * Task records read for one `tasks/list` answer (an upstream pages its list; a page of this many is
 * far beyond any it sends): the tasks past them are removed unchecked, as an unrecorded task is.
 */
export const MAX_LISTED_TASKS_CHECKED = 1000;

export interface HandleGuardOptions {
  store: HandleStorage;
  clock: Clock;
  metrics: Metrics;
  audit: Audit;
  logger: Logger;
  /** How long a handle stays bound after its last use (proxy.handleIdleMs). */
  idleMs: number;
  limits: JsonRpcLimits;
  /** The IDP_* provider's issuer: its people's handles are named by subject alone (model/person.ts). */
  defaultIssuer?: string | undefined;
}

/**
 * The session id a request presents, whether it was recorded (for its owner) when checked, and whether
 * its client declared URL elicitation when it initialized.
 */
export interface PresentedSession {
  id: string;
  known: boolean;
  urlElicitation: boolean;
}

/** A presented session id and its record being read; or the refusal of how it was presented. */
export type SessionRead = { refused?: undefined; id: string; stored: Promise<StoredHandle | null> | undefined } | { refused: HttpError };

/** What a POST may go on with: its forwarding options (and its messages, when parsed), or the JSON-RPC answer refusing it. */
export type TaskCheck = { refusal?: undefined; options: DecidedOptions | undefined } | { refusal: string };

/** Whether a body read without a policy is parsed for what it says beside task ids (parse failures then forward it as sent). */
export type BodyInterest = (body: Buffer) => boolean;

export class HandleGuard {
  readonly #options: HandleGuardOptions;

  constructor(options: HandleGuardOptions) {
    this.#options = options;
  }

  /**
   * Proxy mode, first step, before the token is looked up: the presented session id's record starts
   * being read now, on the token lookups' connection, so that the read leaves in the same write as
   * the token lookup (one round trip).
   * Only for a request that carries a credential at all: one without is refused before any store read.
   */
  readSession(req: IncomingMessage): SessionRead | undefined {
    let id: string | undefined;
    try {
      id = presentedSession(req);
    } catch (err) {
      // Answered after authentication, like every other refusal of what the request asks.
      return { refused: err as HttpError };
    }
    if (id === undefined) return undefined;
    if (req.headers.authorization === undefined) return { id, stored: undefined };
    const stored = this.#options.store.readHandle('session', handleDigest(id));
    // Awaited only once the caller is authenticated: a request refused before that leaves it unread.
    stored.catch(() => undefined);
    return { id, stored };
  }

  /**
   * Proxy mode, second step: a session id recorded for another principal is refused as unknown (404,
   * returned: counted as a foreign handle), its life left alone; the owner's use renews the record
   * when due (useHandle).
   */
  async checkSession(read: SessionRead | undefined, principal: Principal): Promise<PresentedSession | HttpError | undefined> {
    if (read === undefined) return undefined;
    if (read.refused !== undefined) throw read.refused;
    const { id } = read;
    const owner = handleOwner(principal, this.#options.defaultIssuer);
    const stored = await (read.stored ?? this.#options.store.readHandle('session', handleDigest(id)));
    let use: HandleUse;
    if (stored === null) use = 'unknown';
    else if (stored.owner !== owner.id) use = 'foreign';
    else if (handleRenewalDue(stored.renewedAt, this.#options.clock.now(), this.#options.idleMs))
      use = await this.#use('session', id, owner);
    else use = 'owned';
    if (use === 'foreign') {
      this.#refuse('session', id, principal);
      return unknownSession();
    }
    return { id, known: use === 'owned', urlElicitation: stored?.owner === owner.id && stored.urlElicitation === true };
  }

  /**
   * Forward-auth: the upstream's answers are never seen here, so a session id is bound to the first
   * principal that presents it; another principal presenting it later is refused as unknown (404,
   * resolved: counted as a foreign handle). Undefined (nothing to wait for) when the request presents none.
   */
  bindPresentedSession(req: IncomingMessage, principal: Principal): Promise<HttpError | undefined> | undefined {
    const id = presentedSession(req);
    if (id === undefined) return undefined;
    return this.#bindSession(id, principal);
  }

  async #bindSession(id: string, principal: Principal): Promise<HttpError | undefined> {
    const binding = await this.#bind('session', id, handleOwner(principal, this.#options.defaultIssuer));
    if (binding !== 'foreign') return undefined;
    this.#refuse('session', id, principal);
    return unknownSession();
  }

  /**
   * A POST: its body is read when it may name a task (already read, with a policy); a `tasks/get`,
   * `tasks/result` or `tasks/cancel` naming a task recorded for another principal refuses the body
   * (the upstream's answer to an unknown task), the answers to its task-augmented requests are
   * watched for the task ids to record, and the answers to its `tasks/list` requests keep only the
   * caller's tasks. Without a policy, a body read whole is parsed too when `interest` asks (and
   * `options.parsed` then holds its messages).
   */
  async checkTasks(
    req: IncomingMessage,
    principal: Principal,
    decided: DecidedOptions | undefined,
    interest?: BodyInterest,
  ): Promise<TaskCheck> {
    let options = decided;
    let parsed: ClientBody | undefined;
    if (decided?.body !== undefined) {
      // With a policy (or for a user without their credential) the body was read, decided and
      // re-serialised: the bytes to forward are these, and their messages are known.
      if (mayNameTasks(decided.body)) parsed = decided.parsed ?? parseClientMessages(decided.body, this.#options.limits);
    } else {
      options = await this.#readUndecided(req, interest);
      if (options?.body !== undefined) parsed = options.parsed;
    }
    if (parsed === undefined) return { options };
    const owner = handleOwner(principal, this.#options.defaultIssuer);
    const named = parsed.messages.filter((m) => m.taskId !== undefined);
    if (named.length > 0) {
      const uses = await Promise.all(named.map((m) => this.#use('task', m.taskId!, owner)));
      const foreign = uses.indexOf('foreign');
      if (foreign !== -1) {
        this.#refuse('task', named[foreign]!.taskId!, principal);
        return { refusal: unknownTaskAnswer(parsed.messages, parsed.batch) };
      }
    }
    const answered = (m: ClientMessage) => m.id !== undefined && m.id !== null;
    const creating = new Set(parsed.messages.filter((m) => m.createsTask && answered(m)).map((m) => m.id!));
    const listing = new Set(parsed.messages.filter((m) => m.call?.method === 'tasks/list' && answered(m)).map((m) => m.id!));
    if (creating.size === 0 && listing.size === 0) return { options };
    let rewriteResponse = options?.rewriteResponse;
    if (listing.size > 0) rewriteResponse = this.#taskListFilter(rewriteResponse, listing, owner);
    if (creating.size > 0) rewriteResponse = this.#taskRecorder(rewriteResponse, creating, owner);
    return { options: { ...options, rewriteResponse } };
  }

  /**
   * Proxy mode, on the upstream's 2xx answer (before the client gets it): a session id it hands out is
   * recorded for the principal; a presented id that was not recorded (minted before the sidecar kept
   * them, or its record expired) is bound to this principal, the first the upstream accepted it from;
   * a DELETE that ended the session forgets it.
   */
  watchResponse(
    req: IncomingMessage,
    principal: Principal,
    session: PresentedSession | undefined,
    options: DecidedOptions | undefined,
  ): DecidedOptions {
    // A session minted in answer to an `initialize` that declared URL elicitation is recorded so.
    const urlElicitation = options?.parsed?.messages.some((m) => m.urlElicitation === true) === true;
    const beforeResponse = (status: number, headers: readonly Buffer[]): Promise<void> | undefined => {
      if (status < 200 || status > 299) return undefined;
      if (req.method === 'DELETE' && session !== undefined)
        return this.#options.store.forgetHandle('session', handleDigest(session.id)).then(() => undefined);
      const answered = headerValue(headers, 'mcp-session-id');
      const toBind =
        answered !== undefined && answered !== session?.id ? answered : session !== undefined && !session.known ? session.id : undefined;
      if (toBind === undefined) return undefined;
      return this.#bind('session', toBind, handleOwner(principal, this.#options.defaultIssuer), toBind === answered && urlElicitation).then(
        (binding) => {
          if (binding === 'foreign') throw new Error('the upstream answered with a session id bound to another caller');
        },
      );
    };
    return { ...options, beforeResponse };
  }

  /**
   * The body of a POST without a policy: read whole within TASK_SCAN_BYTES and parsed only when it may
   * name a task (else forwarded as it came); a larger or chunked body streams through a scanner that
   * cuts it if it names one. A coded body (Content-Encoding) cannot be read, so it is refused.
   * A body `interest` asks about (and naming no task) is parsed once for its messages and still
   * forwarded as it came: what is read from it (trace context, declared capabilities) decides nothing
   * the upstream could read differently, so a body that does not parse is forwarded as before.
   */
  async #readUndecided(req: IncomingMessage, interest: BodyInterest | undefined): Promise<DecidedOptions | undefined> {
    const encoding = req.headers['content-encoding'];
    if (encoding !== undefined && (typeof encoding !== 'string' || encoding.trim().toLowerCase() !== 'identity')) {
      throw new HttpError('invalid_request', 'a POST /mcp body is read for the task ids it names: send it without a Content-Encoding');
    }
    const chunked = req.headers['transfer-encoding'] !== undefined;
    const length = req.headers['content-length'];
    if (!chunked && (length === undefined || length === '0')) return undefined;
    if (!chunked && Number(length) <= TASK_SCAN_BYTES) {
      // Usually already arrived with the headers: taken as it lies in the request's buffer.
      const body = arrived(req) ?? (await readBody(req, TASK_SCAN_BYTES));
      if (!mayNameTasks(body)) {
        if (interest === undefined || !interest(body)) return { bodyAsSent: body };
        return { bodyAsSent: body, parsed: this.#parsedOrNot(body) };
      }
      checkBodyHeaders(req.headers['content-type'], undefined);
      const parsed = parseClientMessages(body, this.#options.limits);
      return { body: parsed.canonical, parsed };
    }
    const scanner = new TaskMentionScanner();
    return {
      inspectBody(chunk) {
        if (scanner.feed(chunk))
          throw new HttpError(
            'payload_too_large',
            `a POST /mcp body that names a task is read whole, so it must be at most ${TASK_SCAN_BYTES} bytes`,
          );
      },
    };
  }

  #parsedOrNot(body: Buffer): ClientBody | undefined {
    try {
      return parseClientMessages(body, this.#options.limits);
    } catch {
      return undefined;
    }
  }

  /**
   * Wraps the response rewriter (the policy's list filter, or none): the answers to `creating` are
   * read for their CreateTaskResult, and each task id found is recorded for `owner` before the answer
   * carrying it goes on to the client.
   */
  #taskRecorder(
    inner: ForwardOptions['rewriteResponse'],
    creating: ReadonlySet<string | number>,
    owner: HandleOwner,
  ): (contentType: string) => BodyRewriter | undefined {
    const record = (taskIds: string[]): Promise<void> =>
      Promise.all(taskIds.map((taskId) => this.#bind('task', taskId, owner))).then((bindings) => {
        if (bindings.includes('foreign')) throw new Error('the upstream answered with a task id bound to another caller');
      });
    return (contentType) => {
      const base = inner?.(contentType);
      if (contentType.startsWith('application/json')) {
        return {
          kind: 'whole',
          maxBytes: base?.kind === 'whole' ? Math.max(base.maxBytes, MAX_TASK_ANSWER_BYTES) : MAX_TASK_ANSWER_BYTES,
          rewrite(body) {
            let found: string[] = [];
            try {
              found = createdTasks(JSON.parse(body.toString('utf8')), creating);
            } catch {
              // Not JSON: nothing in it is a task id the client could read either.
            }
            const out = base?.kind === 'whole' ? base.rewrite(body) : body;
            return found.length === 0 ? out : record(found).then(() => out);
          },
        };
      }
      if (contentType.startsWith('text/event-stream')) {
        const found: string[] = [];
        const observer = new SseMessageRewriter((parsed) => {
          found.push(...createdTasks(parsed, creating));
          return undefined;
        });
        const stream = base?.kind === 'stream' ? base : undefined;
        return {
          kind: 'stream',
          feed(chunk) {
            const seen = observer.feed(chunk);
            const out = stream !== undefined ? stream.feed(chunk) : seen;
            if (found.length === 0) return out;
            return record(found.splice(0)).then(() => out);
          },
          end: () => {
            const rest = observer.end();
            return stream !== undefined ? stream.end() : rest;
          },
        };
      }
      return base;
    };
  }

  /**
   * Wraps the response rewriter (the policy's list filter, or none): in the answers to `listing` (the
   * request's `tasks/list` ids), a task not recorded for `owner` (another caller's, or one nobody
   * recorded) is removed before the answer goes on to the client. The records are read once the
   * answer (JSON) or the event carrying it (SSE) is complete; a task of an event the stream ends
   * without finishing is removed unread.
   */
  #taskListFilter(
    inner: ForwardOptions['rewriteResponse'],
    listing: ReadonlySet<string | number>,
    owner: HandleOwner,
  ): (contentType: string) => BodyRewriter | undefined {
    return (contentType) => {
      const base = inner?.(contentType);
      if (contentType.startsWith('application/json')) {
        return {
          kind: 'whole',
          maxBytes: base?.kind === 'whole' ? Math.max(base.maxBytes, MAX_TASK_ANSWER_BYTES) : MAX_TASK_ANSWER_BYTES,
          rewrite: async (body) => {
            const out = base?.kind === 'whole' ? await base.rewrite(body) : body;
            let parsed: unknown;
            try {
              parsed = JSON.parse(out.toString('utf8'));
            } catch {
              // Not JSON: the client cannot read a task id out of it either.
              return out;
            }
            const listed = listedTasks(parsed, listing);
            if (listed === undefined) return out;
            keepTasks(parsed, listing, await this.#ownedTasks(listed, owner));
            return JSON.stringify(parsed);
          },
        };
      }
      if (contentType.startsWith('text/event-stream')) {
        // Two readers of the same text cut it into the same events: the first finds the task ids an
        // event lists, which are looked up before the second removes those not the caller's.
        const toCheck: string[] = [];
        const mine = new Set<string>();
        const finder = new SseMessageRewriter((parsed) => {
          toCheck.push(...(listedTasks(parsed, listing) ?? []));
          return undefined;
        });
        const filter = new SseMessageRewriter((parsed) => (keepTasks(parsed, listing, mine) ? JSON.stringify(parsed) : undefined));
        const stream = base?.kind === 'stream' ? base : undefined;
        const through = async (chunk: Buffer): Promise<string> => {
          finder.feed(chunk);
          if (toCheck.length > 0) for (const taskId of await this.#ownedTasks(toCheck.splice(0), owner)) mine.add(taskId);
          return filter.feed(chunk);
        };
        return {
          kind: 'stream',
          feed(chunk) {
            if (stream === undefined) return through(chunk);
            const out = stream.feed(chunk);
            return typeof out === 'string' ? through(Buffer.from(out, 'utf8')) : out.then((text) => through(Buffer.from(text, 'utf8')));
          },
          end: () => {
            const rest = Buffer.from(stream !== undefined ? stream.end() : '', 'utf8');
            // No store read can be waited for here: what is still unchecked is removed.
            return filter.feed(rest) + filter.end();
          },
        };
      }
      return base;
    };
  }

  /** Of `taskIds`, those recorded for `owner` (at most MAX_LISTED_TASKS_CHECKED are read). */
  async #ownedTasks(taskIds: readonly string[], owner: HandleOwner): Promise<Set<string>> {
    const unique = [...new Set(taskIds)].slice(0, MAX_LISTED_TASKS_CHECKED);
    const stored = await Promise.all(unique.map((taskId) => this.#options.store.readHandle('task', handleDigest(taskId))));
    return new Set(unique.filter((_, i) => stored[i]?.owner === owner.id));
  }

  #use(kind: HandleKind, handle: string, owner: HandleOwner) {
    const { store, clock, idleMs } = this.#options;
    return store.useHandle(kind, handleDigest(handle), owner, clock.now(), idleMs, MAX_HANDLES_PER_OWNER);
  }

  #bind(kind: HandleKind, handle: string, owner: HandleOwner, urlElicitation = false) {
    const { store, clock, idleMs } = this.#options;
    return store.bindHandle(kind, handleDigest(handle), owner, clock.now(), idleMs, MAX_HANDLES_PER_OWNER, { urlElicitation });
  }

  /** A handle of another principal: counted, audited (by its hash's first 8 characters), refused as unknown. */
  #refuse(kind: HandleKind, handle: string, principal: Principal): void {
    this.#options.metrics.foreignHandles.labels(kind).inc();
    void this.#options.audit.recordRepeated(
      {
        who: principal.kind === 'master' ? 'master' : principal.clientId !== undefined ? `client:${principal.clientId}` : 'user',
        action: `handle.${kind}.foreign`,
        result: 'not_found',
        ...(principal.clientId !== undefined ? { clientId: principal.clientId } : {}),
        subject: principal.subject,
        detail: { handle: kind, handleHashPrefix: handleDigest(handle).slice(0, 8) },
      },
      'warn',
    );
  }
}

/** The Mcp-Session-Id a request presents; sent twice it is refused (two readers, two sessions). */
export function presentedSession(req: IncomingMessage): string | undefined {
  let value: string | undefined;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 14 || name.toLowerCase() !== 'mcp-session-id') continue;
    if (value !== undefined) throw new HttpError('invalid_request', 'the Mcp-Session-Id header was sent more than once');
    value = raw[i + 1]!;
  }
  return value === '' ? undefined : value;
}

/** A response header's first value, from the raw name/value pairs (names compared without case). */
function headerValue(headers: readonly Buffer[], lowerName: string): string | undefined {
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i]!;
    if (name.length === lowerName.length && name.toString('latin1').toLowerCase() === lowerName) return headers[i + 1]!.toString('latin1');
  }
  return undefined;
}

/** The task ids in the CreateTaskResult answers (`result.task.taskId`) to the requests `creating` names. */
function createdTasks(parsed: unknown, creating: ReadonlySet<string | number>): string[] {
  const found: string[] = [];
  for (const item of Array.isArray(parsed) ? parsed : [parsed]) {
    if (typeof item !== 'object' || item === null) continue;
    const { id, result } = item as { id?: unknown; result?: unknown };
    if ((typeof id !== 'string' && typeof id !== 'number') || !creating.has(id)) continue;
    const task = typeof result === 'object' && result !== null ? (result as { task?: unknown }).task : undefined;
    const taskId = typeof task === 'object' && task !== null ? (task as { taskId?: unknown }).taskId : undefined;
    if (typeof taskId === 'string') found.push(taskId);
  }
  return found;
}

/** The `tasks` arrays of the answers (`result.tasks`) to the `tasks/list` requests `listing` names, or undefined when there is none. */
function taskLists(parsed: unknown, listing: ReadonlySet<string | number>): unknown[][] | undefined {
  let lists: unknown[][] | undefined;
  for (const item of Array.isArray(parsed) ? parsed : [parsed]) {
    if (typeof item !== 'object' || item === null) continue;
    const { id, result } = item as { id?: unknown; result?: unknown };
    if ((typeof id !== 'string' && typeof id !== 'number') || !listing.has(id)) continue;
    const tasks = typeof result === 'object' && result !== null ? (result as { tasks?: unknown }).tasks : undefined;
    if (Array.isArray(tasks)) (lists ??= []).push(tasks);
  }
  return lists;
}

/** The task ids the `tasks/list` answers among `parsed` list; undefined when it holds no such answer. */
function listedTasks(parsed: unknown, listing: ReadonlySet<string | number>): string[] | undefined {
  const lists = taskLists(parsed, listing);
  if (lists === undefined) return undefined;
  return lists.flatMap((tasks) => tasks.map(taskIdOf).filter((taskId): taskId is string => taskId !== undefined));
}

/** Removes from the `tasks/list` answers among `parsed` every task whose id is not in `mine`; false when there was no such answer. */
function keepTasks(parsed: unknown, listing: ReadonlySet<string | number>, mine: ReadonlySet<string>): boolean {
  const lists = taskLists(parsed, listing);
  if (lists === undefined) return false;
  for (const tasks of lists) {
    const kept = tasks.filter((task) => {
      const taskId = taskIdOf(task);
      return taskId !== undefined && mine.has(taskId);
    });
    tasks.length = 0;
    for (const task of kept) tasks.push(task);
  }
  return true;
}

function taskIdOf(task: unknown): string | undefined {
  const taskId = typeof task === 'object' && task !== null ? (task as { taskId?: unknown }).taskId : undefined;
  return typeof taskId === 'string' ? taskId : undefined;
}

/** The upstream's answer to an unknown task, for each request of the body (a batch as a batch). */
function unknownTaskAnswer(messages: readonly ClientMessage[], batch: boolean): string {
  const answers = messages
    .filter((m) => m.call !== undefined && m.id !== undefined)
    .map((m) => ({ jsonrpc: '2.0', id: m.id, error: UNKNOWN_TASK }));
  if (answers.length === 0) return JSON.stringify({ jsonrpc: '2.0', id: null, error: UNKNOWN_TASK });
  return JSON.stringify(batch ? answers : answers[0]);
}
