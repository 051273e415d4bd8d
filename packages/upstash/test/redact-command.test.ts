import { expect, it } from 'vitest';
import { redactCommand } from '../src/errors.js';

const value = 'v'.repeat(100);

it("keeps the reply and the command's name, in the message and the stack; a second pass changes nothing", () => {
  const error = new Error(`ERR max request size exceeded, command was: [["evalsha","abc",1,"k","${value}"]]`);
  expect(redactCommand(error)).toBe(error);
  expect(error.message).toBe('ERR max request size exceeded, command was: evalsha [redacted]');
  expect(error.stack).toContain('command was: evalsha [redacted]');
  expect(error.stack).not.toContain(value);
  // A pipeline's commands share one error: it may be mapped once per command.
  redactCommand(error);
  expect(error.message).toBe('ERR max request size exceeded, command was: evalsha [redacted]');
});

it('leaves other errors and values alone', () => {
  const plain = new Error('fetch failed');
  expect(redactCommand(plain)).toBe(plain);
  expect(plain.message).toBe('fetch failed');
  expect(redactCommand('text')).toBe('text');
  const frozen = Object.freeze(new Error(`ERR x, command was: ["set","k","${value}"]`));
  expect(redactCommand(frozen)).toBe(frozen);
});
