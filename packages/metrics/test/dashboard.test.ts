import { readFileSync } from 'node:fs';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { registerStampedeMetrics } from '../src/index.js';

const dashboardUrl = new URL('../dashboards/stampede.json', import.meta.url);

interface Target {
  expr?: string;
}
interface Panel {
  type: string;
  title: string;
  targets?: Target[];
  panels?: Panel[];
}
interface Variable {
  type: string;
  query?: string | { query?: string };
}
interface Dashboard {
  title: string;
  panels: Panel[];
  templating: { list: Variable[] };
}

const PROMQL_FUNCTIONS = new Set(['sum', 'rate', 'histogram_quantile']);
const PROMQL_KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
]);

/** The metric names an expression selects (label matchers, ranges, grouping and numbers removed). */
function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/(?<![\w:])\d+(?:\.\d+)?(?:e[+-]?\d+)?/gi, ' ');
  const names: string[] = [];
  for (const match of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = match[0];
    const next = stripped.slice((match.index ?? 0) + word.length).trimStart()[0];
    if (next === '(') {
      expect(PROMQL_FUNCTIONS, `unknown PromQL function ${word} in ${expr}`).toContain(word);
    } else if (!PROMQL_KEYWORDS.has(word)) {
      names.push(word);
    }
  }
  return names;
}

function registeredSeriesNames(): Set<string> {
  const registry = new Registry();
  const handle = registerStampedeMetrics({ registry });
  const names = new Set<string>();
  for (const name of handle.metricNames) {
    names.add(name);
    if (registry.getSingleMetric(name) instanceof Histogram)
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
  }
  handle.unregister();
  return names;
}

function expressions(dashboard: Dashboard): string[] {
  const exprs: string[] = [];
  const visit = (panels: Panel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) if (target.expr !== undefined) exprs.push(target.expr);
      visit(panel.panels ?? []);
    }
  };
  visit(dashboard.panels);
  for (const variable of dashboard.templating.list) {
    if (variable.type !== 'query') continue;
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
    // Grafana's label_values(metric, label) is not PromQL: check its metric.
    const labelValues = query?.match(/^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,/);
    if (labelValues?.[1] !== undefined) exprs.push(labelValues[1]);
    else if (query !== undefined) exprs.push(query);
  }
  return exprs;
}

describe('dashboards/stampede.json', () => {
  const dashboard = JSON.parse(readFileSync(dashboardUrl, 'utf8')) as Dashboard;
  const exprs = expressions(dashboard);

  it('parses as a Grafana dashboard with queries', () => {
    expect(dashboard.title).toBe('Stampede');
    expect(exprs.length).toBeGreaterThan(10);
  });

  it('a share of calls counts every call: hits, stale hits, misses and aborted reads (identity 1)', () => {
    const shares = exprs.filter((expr) => expr.includes('/') && expr.includes('stampede_misses_total'));
    expect(shares.length).toBeGreaterThanOrEqual(3);
    for (const expr of shares) {
      const denominator = expr.slice(expr.lastIndexOf('/'));
      for (const name of [
        'stampede_hits_total',
        'stampede_stale_hits_total',
        'stampede_misses_total',
        'stampede_aborted_reads_total',
      ])
        expect(denominator, expr).toContain(name);
    }
  });

  it('references only metric names this package registers', () => {
    const registered = registeredSeriesNames();
    for (const expr of exprs) {
      const names = metricNamesIn(expr);
      expect(names.length, `no metric in ${expr}`).toBeGreaterThan(0);
      for (const name of names) expect(registered, `${name} in ${expr}`).toContain(name);
    }
  });

  it('shows fills vs coalesced waits, hit ratio, stale served, lock contention, fill duration quantiles, fail-safe answers, tiered caches, tags and value checks', () => {
    const used = new Set(exprs.flatMap(metricNamesIn));
    for (const name of [
      'stampede_fills_total',
      'stampede_coalesced_waits_total',
      'stampede_hits_total',
      'stampede_misses_total',
      'stampede_stale_hits_total',
      'stampede_lock_contended_total',
      'stampede_lock_wait_timeouts_total',
      'stampede_lock_wait_errors_total',
      'stampede_fill_duration_seconds_bucket',
      'stampede_lock_wait_duration_seconds_bucket',
      'stampede_fail_safe_activations_total',
      'stampede_soft_timeouts_total',
      'stampede_l1_hits_total',
      'stampede_l2_hits_total',
      'stampede_bus_evictions_total',
      'stampede_bus_recoveries_total',
      'stampede_tag_invalidations_total',
      'stampede_check_value_failures_total',
    ])
      expect(used).toContain(name);
    expect(
      exprs.some((expr) =>
        expr.startsWith(
          'histogram_quantile(0.99, sum by (cache, le) (rate(stampede_fill_duration_seconds_bucket',
        ),
      ),
    ).toBe(true);
  });

  it('has a checker that catches names this package does not register', () => {
    expect(
      metricNamesIn('sum by (cache) (rate(stampede_bogus_total{cache=~"$cache"}[$__rate_interval])) / 2'),
    ).toEqual(['stampede_bogus_total']);
    expect(() => metricNamesIn('increase(stampede_hits_total[5m])')).toThrow(
      /unknown PromQL function increase/,
    );
  });

  it('never groups or filters by key', () => {
    expect(exprs.join('\n')).not.toMatch(/\bkey\b/);
  });

  it('ships in the package', () => {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      files: string[];
    };
    expect(manifest.files).toContain('dashboards');
  });
});
