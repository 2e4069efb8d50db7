import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidOptionError } from '../core/errors.js';
import { nestedOptions } from '../core/validate.js';
import { dashboard } from '../adapters/node.js';
import type { KeyDisplay, KeyState } from '../index.js';
// The one import of the library's internals (eslint.config.js): the service feeds the recorder by
// rule and descriptor, which the public Dashboard (fed by observed limiters) does not offer.
import { keyStateOf, Recorder } from '../dashboard/recorder.js';
import { describeConfig } from './config.js';
import type { Rules } from './rules.js';

/** What the service's decisions tell the dashboard: outcomes by rule and key, latency, the store's outages. */
export type ServiceRecorder = Pick<Recorder, 'seriesOf' | 'timed' | 'watcher'>;

/** `sluice serve --dashboard`: the live dashboard at /dashboard on the HTTP port (docs/dashboard.md). */
export interface ServeDashboardOptions {
  /** Require `Authorization: Bearer <token>` for its data; without one it answers loopback clients only. */
  token?: string;
  /** How keys are shown: 'plain' (default), 'truncate' or 'hash'. */
  keys?: KeyDisplay;
}

/** The service's dashboard: a recorder its decisions feed, and the HTTP route that shows it. */
export interface ServeDashboard {
  readonly recorder: ServiceRecorder;
  readonly answer: (req: IncomingMessage, res: ServerResponse) => Promise<void>;
}

const LOOKUP_FORM =
  'a key as the dashboard shows it: a JSON array of the domain and each entry\'s key and value, such as ["api","user","42"]';

/** The domain and entries of a key as the service builds it (see matchDescriptor), or undefined. */
function entriesOf(key: string): { domain: string; entries: { key: string; value: string }[] } | undefined {
  let parts: unknown;
  try {
    parts = JSON.parse(key);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parts) || parts.length < 3 || parts.length % 2 === 0 || !parts.every((p) => typeof p === 'string'))
    return undefined;
  const [domain, ...rest] = parts;
  const entries = [];
  for (let i = 0; i < rest.length; i += 2) entries.push({ key: rest[i] as string, value: rest[i + 1] as string });
  return { domain: domain as string, entries };
}

/** The dashboard for createServer's `dashboard` option, reading the rules that serve now. */
export function serveDashboard(option: unknown, currentRules: () => Rules): ServeDashboard | undefined {
  if (option === undefined || option === false) return undefined;
  if (option !== true && (typeof option !== 'object' || option === null))
    throw new InvalidOptionError('dashboard', option, 'true, or an object such as { token, keys }');
  const o = option === true ? {} : nestedOptions('dashboard', option, ['token', 'keys']);
  const recorder = new Recorder(o.keys === undefined ? {} : { keys: o.keys as KeyDisplay });
  recorder.describeRules = () => describeConfig(currentRules().config);
  recorder.lookupStates = async (key): Promise<KeyState[]> => {
    const descriptor = entriesOf(key);
    const found = descriptor && currentRules().find(descriptor.domain, descriptor.entries);
    if (found === undefined) return [{ name: '(no rule)', error: `no rule limits ${key}; give ${LOOKUP_FORM}` }];
    const name = `${descriptor?.domain}.${found.path}`;
    return found.rule.limiter.peek(found.key).then(
      (decision) => [{ name, decision: keyStateOf(decision) }],
      (error: unknown) => [{ name, error: String(error) }],
    );
  };
  return { recorder, answer: dashboard(recorder, o.token === undefined ? {} : { token: o.token as string }) };
}
