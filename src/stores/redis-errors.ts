import { StorePermissionError, toStoreError, type StoreError } from '../core/errors.js';
import { aclKeyPattern } from '../core/keys.js';

/** Redis's answer to an EVALSHA of a script it has not cached. */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

// How a script's call of a command the server does not know fails: "Unknown Redis command called
// from Lua script" (Redis 6.2), "... from script" (7.0 and later), "Unknown command ..." (Valkey 8).
const UNKNOWN_COMMAND = /Unknown (?:Redis )?command called from (?:Lua )?script/;

/** Whether a script failed calling a command the server does not know. */
export function isUnknownCommand(error: unknown): boolean {
  return error instanceof Error && UNKNOWN_COMMAND.test(error.message);
}

// How Redis words an ACL refusal: NOPERM at the top level, and inside a script "ERR The user
// executing the script can't ..." (7.0) or "ERR ACL failure in script: ..." (7.2 and later).
export const ACL_REFUSAL = /^(?:NOPERM |ERR ACL failure in script: |ERR The user executing the script can't )/;

/** The ACL rules for the commands a piece of Lua calls, in order, each once. */
function calledCommands(lua: string): string[] {
  return [...new Set(Array.from(lua.matchAll(/redis\.p?call\('(\w+)'/g), ([, name = '']) => `+${name.toLowerCase()}`))];
}

/**
 * The ACL rule a refusal says the user lacks: the command Redis names. Redis 7.0 names no command
 * it refuses inside a script, only the script's line (none for a request of a batch, which catches
 * its error): then the commands that line calls, or the script calls. Else the key pattern of
 * the keys sent (Redis names no key, or one holding a client's key).
 */
function missingRule(message: string, keys: readonly string[], lua: string | undefined): string {
  const command = /the '([^']+)' command/.exec(message)?.[1];
  if (command !== undefined) return `+${command}`;
  if (lua !== undefined && message.includes("can't run this command")) {
    const line = /@user_script:(\d+)/.exec(message)?.[1];
    return calledCommands(line === undefined ? lua : (lua.split('\n')[Number(line) - 1] ?? '')).join(' or ');
  }
  return [...new Set(keys.map(aclKeyPattern))].join(' or ');
}

/** An ACL refusal of `keys` or of a command in `lua`, naming the rule to grant. */
export function permissionError(
  message: string,
  keys: readonly string[],
  lua: string | undefined,
  cause?: unknown,
): StorePermissionError {
  return new StorePermissionError(missingRule(message, keys, lua), message, { cause });
}

/** A client's error as a StoreError: an ACL refusal as a StorePermissionError naming the rule to grant. */
export function storeErrorOf(error: unknown, keys: readonly string[], lua: string): StoreError {
  if (error instanceof Error && ACL_REFUSAL.test(error.message))
    return permissionError(error.message, keys, lua, error);
  return toStoreError(error);
}
