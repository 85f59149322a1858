// The body guards' shortcuts never change an answer: the walk of a parsed body flags every body
// whose text hasLossyNumber would flag (numbers written any way JSON allows).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { hasLossyNumber, jsonDepthExceeds, mayHoldLossyNumber } from '../../router/http/guards.ts';

const digits = (min: number, max: number) => fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
/** A JSON number as text: sign, integer part, fraction, exponent, long or short. */
const numberText = fc
  .tuple(fc.boolean(), fc.oneof(fc.constant('0'), fc.tuple(fc.constantFrom(...'123456789'), digits(0, 25)).map(([a, b]) => a + b)), fc.option(digits(1, 20)), fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), digits(1, 4))))
  .map(([neg, int, frac, exp]) => `${neg ? '-' : ''}${int}${frac !== null ? `.${frac}` : ''}${exp !== null ? exp.join('') : ''}`);

describe('mayHoldLossyNumber', () => {
  it('is true for every body whose text holds a lossy number', () => {
    fc.assert(
      fc.property(fc.array(numberText, { minLength: 1, maxLength: 6 }), fc.boolean(), (nums, nest) => {
        const text = nest ? `{"a":[${nums.join(',')}],"b":{"c":${nums[0]}}}` : `[${nums.join(',')}]`;
        const json: unknown = JSON.parse(text);
        if (hasLossyNumber(text)) expect(mayHoldLossyNumber(json)).toBe(true);
        // and false only where no number needs a second look
        if (!mayHoldLossyNumber(json)) expect(hasLossyNumber(text)).toBe(false);
      }),
      { numRuns: 2000 },
    );
    expect(mayHoldLossyNumber(JSON.parse('{"input_ids":[1,2,3],"sampling_params":{"temperature":0.7}}'))).toBe(false);
    expect(mayHoldLossyNumber(JSON.parse('{"bootstrap_room":18446744073709551615}'))).toBe(true);
    expect(hasLossyNumber('{"bootstrap_room":18446744073709551615}')).toBe(true);
    expect(mayHoldLossyNumber(JSON.parse('[1e20]'))).toBe(true);
    expect(hasLossyNumber('[1e20]')).toBe(false);
  });
});

describe('jsonDepthExceeds', () => {
  it('a text no longer than the limit never exceeds it', () => {
    expect(jsonDepthExceeds('['.repeat(512), 512)).toBe(false);
    expect(jsonDepthExceeds('['.repeat(513), 512)).toBe(true);
    expect(jsonDepthExceeds(`${'['.repeat(300)}"${'['.repeat(300)}"${']'.repeat(300)}`, 512)).toBe(false);
  });
});
