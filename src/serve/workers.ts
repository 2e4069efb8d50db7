import cluster, { type Worker } from 'node:cluster';
import { messageOf } from '../core/errors.js';
import { mergeFamilies, renderFamilies, type FamilyData } from './metrics.js';

// `sluice serve --workers n`: the primary process forks n workers (node:cluster), which serve the
// same ports, and asks them, over IPC, for the whole service's health and metrics. Every message
// carries `sluice`, so that other IPC passes by.

type Question = 'unhealthy' | 'families';
type ToPrimary =
  | { sluice: 'ready'; description: string }
  /** A worker asks for the whole service's answer. */
  | { sluice: 'ask'; id: number; question: Question }
  /** A worker answers for its own part. */
  | { sluice: 'own'; id: number; answer: unknown };
type ToWorker =
  /** The primary asks a worker for its own part. */
  | { sluice: 'ask'; id: number; question: Question }
  /** The whole service's answer to a worker's question. */
  | { sluice: 'whole'; id: number; answer: unknown }
  | { sluice: 'reload' }
  | { sluice: 'stop' };

/** Marks a worker's environment: `sluice serve` run with it serves as a worker. */
export const WORKER_ENV = 'SLUICE_SERVE_WORKER';
/** How long the primary waits for every worker's part of an answer; a worker that is later is left out. */
const GATHER_MS = 5000;
/** How long before replacing a worker that ended before it served (a crash loop waits between tries). */
const RESTART_AFTER_FAILED_START_MS = 1000;

const ignoreSendError = () => undefined;

const ours = (message: unknown): message is { sluice: string } =>
  typeof message === 'object' && message !== null && typeof (message as { sluice?: unknown }).sluice === 'string';

/** What one worker's server asks of the whole service, and answers for its own part. */
export interface ServicePeers {
  /** Why some worker does not serve (store failing and denying, or stopping), or undefined. */
  unhealthy(): Promise<string | undefined>;
  /** Every worker's metrics, summed, as Prometheus text. */
  metrics(): Promise<string>;
  /** How this worker answers for its own part. */
  answer(own: { unhealthy(): Promise<string | undefined>; families(): FamilyData[] }): void;
}

/** This process as a worker: its peers, and what the primary asks of it. */
export interface ServiceWorker {
  readonly peers: ServicePeers;
  /** Resolves, saying why, once the primary asks this worker to stop, or is gone. */
  readonly stopAsked: Promise<string>;
  /** Tells the primary this worker serves, counting in `description`. */
  ready(description: string): void;
  /** Ends the IPC channel, so that the process can exit. */
  leave(): void;
}

/** Joins the primary's service; `reload` is called when the primary relays a SIGHUP. */
export function serviceWorker(reload: () => void): ServiceWorker {
  let own: Parameters<ServicePeers['answer']>[0] | undefined;
  let next = 0;
  const waiting = new Map<number, { resolve(answer: unknown): void; reject(error: Error): void }>();
  // With a callback, a send that fails as the primary goes is not an unhandled 'error' event.
  const send = (message: ToPrimary) => {
    if (process.connected) process.send?.(message, undefined, undefined, ignoreSendError);
  };
  let askedToStop = (_why: string) => undefined as void;
  const stopAsked = new Promise<string>((resolve) => (askedToStop = resolve));

  async function answerOwn(id: number, question: Question): Promise<void> {
    const answer =
      question === 'families'
        ? (own?.families() ?? [])
        : await (own?.unhealthy() ?? Promise.resolve('this worker is starting')).catch(messageOf);
    // JSON carries no undefined.
    send({ sluice: 'own', id, answer: answer ?? null });
  }
  process.on('message', (message: ToWorker) => {
    if (!ours(message)) return;
    if (message.sluice === 'ask') void answerOwn(message.id, message.question);
    else if (message.sluice === 'whole') {
      waiting.get(message.id)?.resolve(message.answer);
      waiting.delete(message.id);
    } else if (message.sluice === 'reload') reload();
    else askedToStop('the primary process asked');
  });
  process.on('disconnect', () => {
    for (const asked of waiting.values()) asked.reject(new Error('the primary process is gone'));
    waiting.clear();
    askedToStop('the primary process is gone');
  });
  const ask = (question: Question) =>
    new Promise<unknown>((resolve, reject) => {
      if (!process.connected) return reject(new Error('the primary process is gone'));
      const id = next++;
      waiting.set(id, { resolve, reject });
      send({ sluice: 'ask', id, question });
    });

  return {
    peers: {
      unhealthy: async () => {
        try {
          return ((await ask('unhealthy')) as string | null) ?? undefined;
        } catch (error) {
          return messageOf(error);
        }
      },
      metrics: async () => renderFamilies((await ask('families')) as FamilyData[]),
      answer: (part) => void (own = part),
    },
    stopAsked,
    ready: (description) => send({ sluice: 'ready', description }),
    leave: () => cluster.worker?.disconnect(),
  };
}

interface Member {
  readonly worker: Worker;
  readonly name: string;
  ready: boolean;
}

/** The primary's questions to every serving worker, each answered for them all once their parts are in. */
class Gatherings {
  private next = 0;
  private readonly open = new Map<number, { waitingFor: Set<number>; parts: unknown[]; done(): void }>();

  constructor(
    private readonly members: Map<number, Member>,
    private readonly stopping: () => boolean,
  ) {}

  /** Asks every serving worker its part, and answers `asker` for them all. */
  gather(asker: Member, id: number, question: Question): void {
    const answer = (parts: unknown[]) => {
      const whole =
        question === 'families'
          ? mergeFamilies(parts as FamilyData[][])
          : this.stopping()
            ? 'the service is stopping'
            : ((parts as (string | null)[]).find((reason) => reason !== null) ?? null);
      send(asker, { sluice: 'whole', id, answer: whole });
    };
    const asked = [...this.members.values()].filter((m) => m.ready && m.worker.isConnected());
    const g = this.next++;
    const entry = { waitingFor: new Set(asked.map((m) => m.worker.id)), parts: [] as unknown[], done: () => {} };
    const timer = setTimeout(() => {
      if (question === 'unhealthy')
        entry.parts.push(`worker ${[...entry.waitingFor].join(', ')} did not answer in ${GATHER_MS} ms`);
      entry.done();
    }, GATHER_MS);
    entry.done = () => {
      clearTimeout(timer);
      this.open.delete(g);
      answer(entry.parts);
    };
    this.open.set(g, entry);
    for (const member of asked) send(member, { sluice: 'ask', id: g, question });
    if (asked.length === 0) entry.done();
  }

  /** A worker's part is in (or, without `id`, it has ended): a gathering it completes is answered. */
  told(workerId: number, id?: number, part?: unknown): void {
    for (const [g, entry] of this.open) {
      if (id !== undefined && g !== id) continue;
      if (!entry.waitingFor.delete(workerId)) continue;
      if (part !== undefined) entry.parts.push(part);
      if (entry.waitingFor.size === 0) entry.done();
    }
  }
}

/** A send to a worker that is ending fails (EPIPE); its exit, handled by onExit, is what counts. */
function send(member: Member, message: ToWorker): void {
  if (member.worker.isConnected()) member.worker.send(message, undefined, ignoreSendError);
}

/**
 * The primary: forks `count` workers (this command again, with WORKER_ENV set), answers their
 * questions for the whole service, relays SIGHUP, and on SIGTERM or SIGINT stops them all; replaces
 * a worker that ends unasked. Resolves with the exit code once every worker has ended (1 if one
 * failed to start, or ended with an error while stopping).
 */
export function runWorkers(count: number, log: (line: string) => void): Promise<number> {
  const members = new Map<number, Member>();
  let stopping = false;
  let serving = false;
  let failed = false;
  const gatherings = new Gatherings(members, () => stopping);
  let ended = (_code: number) => undefined as void;
  const finished = new Promise<number>((resolve) => (ended = resolve));

  function onMessage(member: Member, message: ToPrimary): void {
    if (!ours(message)) return;
    if (message.sluice === 'ask') return gatherings.gather(member, message.id, message.question);
    if (message.sluice === 'own') return gatherings.told(member.worker.id, message.id, message.answer);
    member.ready = true;
    // Asked to stop before it listened to the primary: it is asked again.
    if (stopping) return send(member, { sluice: 'stop' });
    if (serving) return log(`sluice serve: ${member.name} serves in its place`);
    if ([...members.values()].every((m) => m.ready)) {
      serving = true;
      log(`sluice serve: counting in ${message.description}; ${count} workers`);
    }
  }

  function onExit(member: Member, code: number | null, signal: string | null): void {
    members.delete(member.worker.id);
    gatherings.told(member.worker.id);
    const how = signal === null ? `with code ${code}` : `by ${signal}`;
    if (stopping || !serving) {
      if (code !== 0) failed = true;
      if (!stopping) {
        // A worker that cannot start (a port taken, Redis unreachable) stops the rest: it says why.
        log(`sluice serve: ${member.name} ended ${how} before it served; stopping`);
        stop();
      }
      if (members.size === 0) ended(failed ? 1 : 0);
      return;
    }
    log(`sluice serve: ${member.name} ended ${how}; starting another`);
    setTimeout(fork, member.ready ? 0 : RESTART_AFTER_FAILED_START_MS);
  }

  function fork(): void {
    if (stopping) return;
    const worker = cluster.fork({ [WORKER_ENV]: '1' });
    const member: Member = { worker, name: `worker ${worker.id} (pid ${worker.process.pid})`, ready: false };
    members.set(worker.id, member);
    worker.on('message', (message: ToPrimary) => onMessage(member, message));
    worker.on('exit', (code: number | null, signal: string | null) => onExit(member, code, signal));
  }

  const relayReload = () => members.forEach((member) => send(member, { sluice: 'reload' }));
  function stop(): void {
    if (stopping) return;
    stopping = true;
    members.forEach((member) => send(member, { sluice: 'stop' }));
  }
  const onSignal = (signal: NodeJS.Signals) => {
    log(`sluice serve: ${signal}: stopping the workers`);
    stop();
  };
  process.on('SIGHUP', relayReload);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  for (let i = 0; i < count; i++) fork();
  return finished.then((code) => {
    process.off('SIGHUP', relayReload);
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    log('sluice serve: stopped');
    return code;
  });
}
