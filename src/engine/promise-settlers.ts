/** What a promise made for an object hands it: the functions that settle the promise. */
export interface Settlers<T> {
  resolve: (value: T) => void;
  reject: (reason: unknown) => void;
}

// The object whose promise is being made. One executor for every such promise hands it the new
// promise's settlers, where an executor of its own would be a closure (and a context) per promise,
// on the path of every decision.
let holder: Settlers<never> | undefined;

function handOver(resolve: (value: never) => void, reject: (reason: unknown) => void): void {
  (holder as Settlers<never>).resolve = resolve;
  (holder as Settlers<never>).reject = reject;
}

/** A new promise, which hands its settlers to `settlers`: the promise of what they settle it with. */
export function promiseFor<T>(settlers: Settlers<T>): Promise<T> {
  holder = settlers;
  const promise = new Promise<T>(handOver);
  holder = undefined;
  return promise;
}
