// What each chart says when its window holds nothing to draw: an empty plot (flat axes, no
// line) reads as broken or still loading; words say the window is simply empty.
import type { SeriesPoint } from './series.ts';

export type ChartName = 'tokens' | 'requests' | 'ttft' | 'failures';

/** The sentence an empty chart shows over its axes, or null when it has something to draw. */
export function emptyChartWords(chart: ChartName, points: readonly SeriesPoint[]): string | null {
  const none = (has: (p: SeriesPoint) => boolean) => !points.some(has);
  switch (chart) {
    case 'tokens':
      return none((p) => Object.values(p.tokensPerSec).some((v) => v > 0)) ? 'no tokens generated in this window' : null;
    case 'requests':
      return none((p) => p.requestsPerSec > 0 || p.migrations > 0) ? 'no requests in this window' : null;
    case 'ttft':
      return none((p) => p.ttftP50 !== null || p.ttftP99 !== null) ? 'no first token in this window' : null;
    case 'failures':
      return none((p) => Object.values(p.failures).some((v) => v > 0)) ? 'no failed requests in this window' : null;
  }
}
