// Charts: tokens/s per worker (stacked), requests/s with migrations per point, TTFT p50/p99,
// failures by kind. Windows of 1, 5, 15 minutes at about 60 aggregated points; no animation;
// redrawn once a second, not per event. The charts share one time axis and one crosshair
// (recharts' syncId), and every fault marker (kill, hang, drain, a worker going down, ...)
// crosses each of them.
import { useEffect, useMemo, useState, type ReactElement } from 'react';
import {
  Area, AreaChart, Bar, BarChart, CartesianGrid, ComposedChart, Legend, Line, LineChart, ReferenceLine, ResponsiveContainer, Tooltip, XAxis, YAxis,
} from 'recharts';
import type { FaultMark } from '../../../host/contract.ts';
import { faultLabel, marksIn, markTone } from '../store/faults.ts';
import { clockTicks } from './axis.ts';
import { chartLabels, chartMarkStyle, type ChartLabel } from './chart-marks.ts';
import { useDash, useSecond, useStoreApi } from './context.ts';
import { fmtClock } from './format.ts';
import type { FileInfo } from '../store/store.ts';
import { emptyChartWords } from '../store/chart-words.ts';

/** Point sizes for a whole file: the first that keeps it under 120 points. */
const FILE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400];

/**
 * A trace file's charts: its whole span, in points of a size that keeps them under 120. (The
 * requests still running at the export travel in its context record, so its last seconds keep
 * their traffic.)
 */
export function fileSpan(file: FileInfo): { seconds: number; step: number; endMs: number } {
  const endMs = file.to;
  const span = Math.max(1, Math.floor(endMs / 1000) - Math.floor(file.from / 1000));
  const step = FILE_STEPS.find((s) => span / s <= 120) ?? FILE_STEPS[FILE_STEPS.length - 1]!;
  return { seconds: Math.ceil(span / step) * step, step, endMs };
}

/**
 * Where the time axis ends. Points are whole seconds up to the end's second; a file's axis runs on
 * to its last moment, so a marker in its last partial second (a kill just before the export) is
 * drawn, not dropped. Live, the end is a whole second and the two agree.
 */
export function chartEnd(startMs: number, seconds: number, endMs: number): number {
  return Math.max(startMs + seconds * 1000, endMs);
}

export const CHART_WINDOWS = [
  { label: '1 min', seconds: 60, step: 1 },
  { label: '5 min', seconds: 300, step: 5 },
  { label: '15 min', seconds: 900, step: 15 },
];

// Keys are worker URLs and error kinds: read through functions, since recharts treats dots in
// a string dataKey as a property path.
interface Row { tok: Record<string, number>; fail: Record<string, number> }

const KIND_COLORS = ['#d63a3a', '#e8890c', '#b07aa1', '#9c755f', '#667085'];
const axis = { stroke: 'var(--muted)', fontSize: 11 };
const tooltipStyle = { background: 'var(--panel)', border: '1px solid var(--border)', borderRadius: 6, color: 'var(--text)', fontSize: 12 };
const SYNC = 'baton-charts';

function Panel({ title, testId, empty, children }: { title: string; testId: string; empty: string | null; children: ReactElement }) {
  return (
    <section className="chart" data-testid={testId}>
      <h3>{title}</h3>
      <div className="chart-plot">
        <ResponsiveContainer width="100%" height={220}>{children}</ResponsiveContainer>
        {/* Over the axes, which stay drawn (and with them any fault marker in the window). */}
        {empty && <div className="chart-empty" data-testid="chart-empty">{empty}</div>}
      </div>
    </section>
  );
}

/**
 * A marker line per fault, coloured by what it is; the first chart carries the labels
 * (chart-marks.ts lays them out on rows so they do not cover each other), the others line up under it.
 */
function faultLines(marks: readonly FaultMark[], yAxisId?: string, labels: readonly ChartLabel[] = []) {
  const byMark = new Map(labels.map((l) => [l.mark, l]));
  return marks.map((m, i) => {
    const l = byMark.get(m);
    return (
      <ReferenceLine
        key={`f${i}`}
        x={m.t}
        {...(yAxisId ? { yAxisId } : {})}
        {...chartMarkStyle(m)}
        strokeWidth={1.5}
        ifOverflow="discard"
        className="fault-ref"
        {...(l ? { label: { value: l.text, position: l.right ? 'insideTopRight' : 'insideTopLeft', fill: 'var(--text)', fontSize: 11, dy: l.lane * 13 } } : {})}
      />
    );
  });
}

/** The width of an element, followed as it resizes. */
function useWidth(): [(el: HTMLElement | null) => void, number] {
  const [width, setWidth] = useState(800);
  const [el, setEl] = useState<HTMLElement | null>(null);
  useEffect(() => {
    if (!el) return undefined;
    setWidth(el.clientWidth);
    const ro = new ResizeObserver(() => setWidth(el.clientWidth));
    ro.observe(el);
    return () => ro.disconnect();
  }, [el]);
  return [setEl, width];
}

export function ChartsView() {
  const store = useStoreApi();
  const second = useSecond();
  useDash((s) => s.model.workers.byId.size);
  const windowIndex = useDash((s) => s.chartWindow);
  const faults = useDash((s) => s.faults);
  const file = useDash((s) => s.file);
  // A file opens on all of it; its 1/5/15 min windows end where it ends.
  const [whole, setWhole] = useState(true);
  const span = file && whole ? fileSpan(file) : null;
  const win = span ? { label: 'whole file', seconds: span.seconds, step: span.step } : (CHART_WINDOWS[windowIndex] ?? CHART_WINDOWS[0]!);
  const endMs = file ? fileSpan(file).endMs : second * 1000;
  const { series, workers } = store.getState().model;

  const { data, workerIds, kinds, from, to, empty } = useMemo(() => {
    const points = series.points(endMs, win.seconds, win.step);
    // Series are keyed by worker URL (what attempts carry); the legend shows the worker id.
    const ids = new Set(workers.list().map((w) => w.url));
    const kindSet = new Set<string>();
    for (const p of points) {
      Object.keys(p.tokensPerSec).forEach((w) => ids.add(w));
      Object.keys(p.failures).forEach((k) => kindSet.add(k));
    }
    // Each point stands for [t, t + step): drawn at its middle, so a bar sits over its own seconds.
    const rows = points.map((p) => ({
      t: p.t + (win.step * 1000) / 2,
      tok: Object.fromEntries([...ids].map((w) => [w, Math.round(p.tokensPerSec[w] ?? 0)])) as Record<string, number>,
      rps: Number(p.requestsPerSec.toFixed(2)),
      mig: p.migrations,
      p50: p.ttftP50,
      p99: p.ttftP99,
      fail: Object.fromEntries([...kindSet].map((k) => [k, p.failures[k] ?? 0])) as Record<string, number>,
    }));
    const start = points[0]?.t ?? endMs - win.seconds * 1000;
    const empty = {
      tokens: emptyChartWords('tokens', points), requests: emptyChartWords('requests', points),
      ttft: emptyChartWords('ttft', points), failures: emptyChartWords('failures', points),
    };
    return { data: rows, workerIds: [...ids], kinds: [...kindSet], from: start, to: chartEnd(start, win.seconds, endMs), empty };
  }, [series, workers, endMs, win.seconds, win.step]);

  const marks = marksIn(faults, from, to);
  const [chartsRef, chartsWidth] = useWidth();
  // The first chart's plot: the grid (styles.css .charts: 14 px padding, 12 px gaps, columns of at
  // least 460 px) gives a panel, less its padding (24 px) and its left (48) and right (40) axes.
  const cols = chartsWidth - 28 >= 2 * 460 + 12 ? 2 : 1;
  const labels = chartLabels(marks, win.seconds * 25, from, to, Math.max(100, (chartsWidth - 28 - 12 * (cols - 1)) / cols - 112));
  const xAxis = (
    <XAxis dataKey="t" type="number" scale="time" domain={[from, to]} ticks={clockTicks(from, to, 6)} tickFormatter={(t: number) => fmtClock(t).slice(0, 8)} {...axis} minTickGap={40} allowDataOverflow />
  );
  const labelFormatter = (t: unknown) => fmtClock(Number(t) - (win.step * 1000) / 2);
  // An empty right axis as wide as the requests chart's, so every plot spans the same pixels and
  // the crosshair and the markers line up from chart to chart.
  const pad = <YAxis yAxisId="pad" orientation="right" width={40} tick={false} axisLine={false} />;
  const tooltip = <Tooltip contentStyle={tooltipStyle} labelFormatter={labelFormatter} cursor={{ stroke: 'var(--muted)', strokeWidth: 1 }} />;
  return (
    <div className="main">
      <div className="toolbar">
        Window
        {file && (
          <button aria-pressed={whole} className={whole ? 'primary' : ''} onClick={() => setWhole(true)} data-testid="chart-window-file" title="From the file's first row to where its rows are complete">
            Whole file
          </button>
        )}
        {CHART_WINDOWS.map((w, i) => (
          <button key={w.label} aria-pressed={!span && i === windowIndex} className={!span && i === windowIndex ? 'primary' : ''} onClick={() => { setWhole(false); store.getState().setChartWindow(i); }} data-testid={`chart-window-${w.seconds}`}>
            {w.label}
          </button>
        ))}
        {marks.length > 0 && (
          <span className="chart-marks" data-testid="chart-marks">
            markers: {marks.map((m, i) => <span key={i} className={`flag-inline ${m.source} tone-${markTone(m.kind)}`} data-testid="chart-fault">{faultLabel(m)} {fmtClock(m.t).slice(0, 8)}</span>)}
          </span>
        )}
        <span className="count">
          points of {win.step} s · one crosshair for all charts
        </span>
      </div>
      <div className="scroll">
        <div className="charts" ref={chartsRef} data-testid="charts" data-from={from} data-to={to} data-step={win.step} data-rps={data.map((d) => d.rps).join(',')}>
          <Panel title="Tokens/s per worker" testId="chart-tokens" empty={empty.tokens}>
            <AreaChart data={data} syncId={SYNC} syncMethod="value">
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis {...axis} width={48} />
              {pad}
              {tooltip}
              <Legend />
              {workerIds.map((w) => (
                <Area key={w} dataKey={(row: Row) => row.tok[w] ?? 0} name={workers.label(w)} stackId="tok" stroke={workers.colorOf(w)} fill={workers.colorOf(w)} fillOpacity={0.55} isAnimationActive={false} dot={false} />
              ))}
              {faultLines(marks, undefined, labels)}
            </AreaChart>
          </Panel>
          <Panel title={`Requests/s and migrations per ${win.step} s`} testId="chart-requests" empty={empty.requests}>
            <ComposedChart data={data} syncId={SYNC} syncMethod="value">
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis yAxisId="rps" {...axis} width={48} />
              <YAxis yAxisId="mig" orientation="right" {...axis} width={40} allowDecimals={false} />
              {tooltip}
              <Legend />
              <Bar yAxisId="mig" dataKey="mig" name={`migrations per ${win.step} s (right)`} fill="#e8890c" isAnimationActive={false} />
              <Line yAxisId="rps" dataKey="rps" name="requests/s (left)" stroke="var(--accent)" dot={false} isAnimationActive={false} />
              {faultLines(marks, 'rps')}
            </ComposedChart>
          </Panel>
          <Panel title="Time to first token (ms)" testId="chart-ttft" empty={empty.ttft}>
            <LineChart data={data} syncId={SYNC} syncMethod="value">
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis {...axis} width={48} />
              {pad}
              {tooltip}
              <Legend />
              <Line dataKey="p50" name="p50" stroke="var(--ok)" dot={false} connectNulls isAnimationActive={false} />
              <Line dataKey="p99" name="p99" stroke="var(--bad)" dot={false} connectNulls isAnimationActive={false} />
              {faultLines(marks)}
            </LineChart>
          </Panel>
          <Panel title="Failed requests by kind" testId="chart-failures" empty={empty.failures}>
            <BarChart data={data} syncId={SYNC} syncMethod="value">
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis {...axis} width={48} allowDecimals={false} />
              {pad}
              {tooltip}
              <Legend />
              {kinds.map((k, i) => (
                <Bar key={k} dataKey={(row: Row) => row.fail[k] ?? 0} name={k} stackId="f" fill={KIND_COLORS[i % KIND_COLORS.length]} isAnimationActive={false} />
              ))}
              {/* No failure in the window (a kill whose every request migrated): a series of zeros
                  keeps the axes, and with them the kill's marker, drawn. */}
              {kinds.length === 0 && <Bar dataKey={() => 0} name="none" legendType="none" isAnimationActive={false} />}
              {faultLines(marks)}
            </BarChart>
          </Panel>
        </div>
      </div>
    </div>
  );
}
