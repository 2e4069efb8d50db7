import { memoryStore, type Store } from '../../src/index.js';

/**
 * A store in front of the memory store whose next calls can be made to fail or to hang, the way a
 * Redis client does while its server is gone. Unlike the memory store itself, it is asked through
 * the limiter's failure guard. The outage tests do the same with real redis-servers.
 */
export function switchableStore() {
  const healthy = memoryStore({ now: () => 1_000_000 });
  const control = {
    mode: 'up' as
      'up' | 'fail' | 'hang' | 'lose-reply' | 'throw' | 'garbage' | 'no-promise' | 'short-reply' | 'odd-rejection',
    pending: [] as ((error: Error) => void)[],
  };
  const store: Store = {
    run(script, keys, args) {
      if (control.mode === 'throw') throw new TypeError('thrown synchronously');
      if (control.mode === 'fail') return Promise.reject(new Error('ECONNREFUSED'));
      // A reply no decision can be read from, as a broken store might give.
      if (control.mode === 'garbage') return Promise.resolve(null as never);
      // A broken custom store: a reply that is no promise, or too short for a decision (the head
      // alone, no policy's part), or a rejection that String() throws on.
      if (control.mode === 'no-promise') return [] as never;
      if (control.mode === 'short-reply') return Promise.resolve([1_000_000, 1, 0]);
      if (control.mode === 'odd-rejection') return Promise.reject(Object.create(null) as Error);
      if (control.mode === 'hang') return new Promise((_, reject) => control.pending.push(reject));
      // The call runs, and its reply is lost with the connection.
      if (control.mode === 'lose-reply')
        return healthy.run(script, keys, args).then(() => Promise.reject(new Error('connection lost')));
      return healthy.run(script, keys, args);
    },
  };
  return { store, control };
}
