// Charts: tokens/s per worker (stacked), requests/s and migrations/min, TTFT p50/p99, failures
// by kind. Windows of 1, 5, 15 minutes at about 60 aggregated points; no animation; redrawn
// once a second, not per event.
import { useMemo, useState, type ReactElement } from 'react';
import { Area, AreaChart, Bar, BarChart, CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { useDash, useSecond, useStoreApi } from './context.ts';
import { fmtClock } from './format.ts';

const WINDOWS = [
  { label: '1 min', seconds: 60, step: 1 },
  { label: '5 min', seconds: 300, step: 5 },
  { label: '15 min', seconds: 900, step: 15 },
];

// Keys are worker URLs and error kinds: read through functions, since recharts treats dots in
// a string dataKey as a property path.
interface Row { tok: Record<string, number>; fail: Record<string, number> }

const KIND_COLORS = ['#d63a3a', '#e8890c', '#b07aa1', '#9c755f', '#667085'];
const axis = { stroke: 'var(--muted)', fontSize: 11 };
const tooltipStyle = { background: 'var(--panel)', border: '1px solid var(--border)' };

function Panel({ title, children }: { title: string; children: ReactElement }) {
  return (
    <section className="chart">
      <h3>{title}</h3>
      <ResponsiveContainer width="100%" height={220}>{children}</ResponsiveContainer>
    </section>
  );
}

export function ChartsView() {
  const store = useStoreApi();
  const second = useSecond();
  useDash((s) => s.model.workers.byId.size);
  const [windowIndex, setWindowIndex] = useState(0);
  const win = WINDOWS[windowIndex]!;
  const { series, workers } = store.getState().model;

  const { data, workerIds, kinds } = useMemo(() => {
    const points = series.points(second * 1000, win.seconds, win.step);
    // Series are keyed by worker URL (what attempts carry); the legend shows the worker id.
    const ids = new Set(workers.list().map((w) => w.url));
    const kindSet = new Set<string>();
    for (const p of points) {
      Object.keys(p.tokensPerSec).forEach((w) => ids.add(w));
      Object.keys(p.failures).forEach((k) => kindSet.add(k));
    }
    const rows = points.map((p) => ({
      t: p.t,
      tok: Object.fromEntries([...ids].map((w) => [w, Math.round(p.tokensPerSec[w] ?? 0)])) as Record<string, number>,
      rps: Number(p.requestsPerSec.toFixed(2)),
      mpm: Number(p.migrationsPerMin.toFixed(1)),
      p50: p.ttftP50,
      p99: p.ttftP99,
      fail: Object.fromEntries([...kindSet].map((k) => [k, p.failures[k] ?? 0])) as Record<string, number>,
    }));
    return { data: rows, workerIds: [...ids], kinds: [...kindSet] };
  }, [series, workers, second, win]);

  const xAxis = <XAxis dataKey="t" tickFormatter={(t: number) => fmtClock(t).slice(0, 8)} {...axis} minTickGap={40} />;
  const labelFormatter = (t: unknown) => fmtClock(Number(t));
  return (
    <div className="main">
      <div className="toolbar">
        Window
        {WINDOWS.map((w, i) => (
          <button key={w.label} aria-pressed={i === windowIndex} className={i === windowIndex ? 'primary' : ''} onClick={() => setWindowIndex(i)} data-testid={`chart-window-${w.seconds}`}>
            {w.label}
          </button>
        ))}
        <span className="count">points of {win.step} s</span>
      </div>
      <div className="scroll">
        <div className="charts" data-testid="charts">
          <Panel title="Tokens/s per worker">
            <AreaChart data={data}>
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis {...axis} width={48} />
              <Tooltip contentStyle={tooltipStyle} labelFormatter={labelFormatter} />
              <Legend />
              {workerIds.map((w) => (
                <Area key={w} dataKey={(row: Row) => row.tok[w] ?? 0} name={workers.idOf(w)} stackId="tok" stroke={workers.colorOf(w)} fill={workers.colorOf(w)} fillOpacity={0.55} isAnimationActive={false} dot={false} />
              ))}
            </AreaChart>
          </Panel>
          <Panel title="Requests/s and migrations/min">
            <LineChart data={data}>
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis yAxisId="rps" {...axis} width={48} />
              <YAxis yAxisId="mpm" orientation="right" {...axis} width={40} allowDecimals={false} />
              <Tooltip contentStyle={tooltipStyle} labelFormatter={labelFormatter} />
              <Legend />
              <Line yAxisId="rps" dataKey="rps" name="requests/s (left)" stroke="var(--accent)" dot={false} isAnimationActive={false} />
              <Line yAxisId="mpm" dataKey="mpm" name="migrations/min, trailing (right)" stroke="#e8890c" dot={false} isAnimationActive={false} />
            </LineChart>
          </Panel>
          <Panel title="Time to first token (ms)">
            <LineChart data={data}>
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis {...axis} width={48} />
              <Tooltip contentStyle={tooltipStyle} labelFormatter={labelFormatter} />
              <Legend />
              <Line dataKey="p50" name="p50" stroke="var(--ok)" dot={false} connectNulls isAnimationActive={false} />
              <Line dataKey="p99" name="p99" stroke="var(--bad)" dot={false} connectNulls isAnimationActive={false} />
            </LineChart>
          </Panel>
          <Panel title="Failed requests by kind">
            <BarChart data={data}>
              <CartesianGrid stroke="var(--border)" strokeDasharray="3 3" />
              {xAxis}
              <YAxis {...axis} width={48} allowDecimals={false} />
              <Tooltip contentStyle={tooltipStyle} labelFormatter={labelFormatter} />
              <Legend />
              {kinds.map((k, i) => (
                <Bar key={k} dataKey={(row: Row) => row.fail[k] ?? 0} name={k} stackId="f" fill={KIND_COLORS[i % KIND_COLORS.length]} isAnimationActive={false} />
              ))}
            </BarChart>
          </Panel>
        </div>
      </div>
    </div>
  );
}
