#!/usr/bin/env python3
"""Reads a `cuzk bench day` trace (--trace-file): each WinningPoSt's wait between its arrival
and its partition's admission, its synthesis and device stage, and how long before its
arrival the PoRep device stage then running had begun (a finished partition's assignment is
freed as the next one's device stage begins); then the PoRep device stages' spread.

Arrivals are not in the trace: the day's WinningPoSts are the longest run of admissions about
one period apart (`--winning-post-every`; the warm-up and idle runs before the day are not),
and each one's arrival is the schedule's tick before its admission, the schedule's phase
being that of the earliest-admitted of them. Usage: day-trace.py day.json [period seconds,
default 10]."""
import json
import statistics
import sys


def events(path):
    for line in open(path):
        line = line.strip().rstrip(',')
        if line.startswith('{'):
            try:
                yield json.loads(line)
            except ValueError:
                pass


def main():
    path = sys.argv[1]
    period = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    parts = {}
    for e in events(path):
        if e.get('cat') != 'partition':
            continue
        key = (e['pid'], e.get('tid'), e['args'].get('class'))
        parts.setdefault(key, {})[e['name']] = (e['ts'] / 1e6, e.get('dur', 0) / 1e6)
    critical = [p for (job, k, c), p in parts.items() if c == 3 and 'admission' in p]
    critical.sort(key=lambda p: p['admission'][0])
    winning, run = [], []
    for p in critical:
        if run and abs(p['admission'][0] - run[-1]['admission'][0] - period) > 0.5:
            run = []
        run.append(p)
        if len(run) > len(winning):
            winning = list(run)
    porep = sorted(p['device'] for (job, k, c), p in parts.items() if c == 1 and 'device' in p)
    if winning:
        # The phase of the schedule: the least offset of an admission within its period.
        phase = min(p['admission'][0] % period for p in winning)
        for p in winning:
            admitted = p['admission'][0]
            arrived = admitted - ((admitted - phase) % period)
            running = [s for s, d in porep if s <= arrived]
            since = '%.3f s' % (arrived - running[-1]) if running else '-'
            syn = p.get('synthesis', (0, 0))[1]
            dev = p.get('device', (0, 0))[1]
            print('WinningPoSt at %.1f s: admitted %.3f s after arriving, synthesis %.3f s, '
                  'device %.3f s; the PoRep device stage before it began %s earlier'
                  % (arrived, admitted - arrived, syn, dev, since))
    durations = [d for s, d in porep]
    if durations:
        q = sorted(durations)
        print('PoRep device stages: %d, median %.3f s, p90 %.3f s, least %.3f s, most %.3f s'
              % (len(q), statistics.median(q), q[int(0.9 * (len(q) - 1))], q[0], q[-1]))


main()
