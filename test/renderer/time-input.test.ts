// The Traces view's since/until inputs: the placeholder fits the input (it was cut: 26
// characters in a 150 px box), and the width follows the placeholder.
import { describe, expect, it } from 'vitest';
import { timeInputLook } from '../../renderer/src/views/TracesView.tsx';

describe('Traces time inputs', () => {
  for (const label of ['from', 'to']) {
    it(`"${label}": the placeholder names the clock form and fits with room for padding`, () => {
      const { placeholder, widthCh } = timeInputLook(label);
      expect(placeholder).toContain(label);
      expect(placeholder).toContain('HH:MM:SS');
      expect(widthCh).toBeGreaterThanOrEqual(placeholder.length + 3);
      // Two of them sit in the Traces toolbar beside the other filters.
      expect(widthCh).toBeLessThanOrEqual(18);
    });
  }
});
