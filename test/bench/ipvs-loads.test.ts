import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ipvsLoads, loadParts } from '../../bench/ipvs-loads.ts';

const lines = (options: Parameters<typeof ipvsLoads>[0]) =>
  ipvsLoads(options).map(
    (l) =>
      `${l.kind} ${l.shape.services}x${l.shape.endpointsPerService}${l.shape.wide ? ' wide' : ''}` +
      `${l.detailed ? ' detailed' : ''}${l.affinity ? ' ClientIP' : ''}`,
  );

describe('ipvs bench loads', () => {
  it('runs each size and the wide Service, each with its change and connect figures, then the ClientIP rounds alternating, each a load of its own', () => {
    assert.deepEqual(
      lines({
        services: [1000, 30000, 10000],
        endpointsPerService: 10,
        wideEndpoints: 100000,
        affinityServices: 3000,
        rounds: 2,
      }),
      [
        'point 1000x10 detailed',
        'point 30000x10 detailed',
        'point 10000x10 detailed',
        'point 1x100000 wide detailed',
        'affinity-round 3000x10',
        'affinity-round 3000x10 ClientIP',
        'affinity-round 3000x10',
        'affinity-round 3000x10 ClientIP',
      ],
    );
  });

  it('has no wide point at --wide-endpoints 0 and no ClientIP round at --rounds 0', () => {
    assert.deepEqual(
      lines({
        services: [200],
        endpointsPerService: 10,
        wideEndpoints: 0,
        affinityServices: 3000,
        rounds: 0,
      }),
      ['point 200x10 detailed'],
    );
  });

  it('has no size point at --services 0: the ClientIP rounds alone', () => {
    assert.deepEqual(
      lines({ services: [0], endpointsPerService: 10, wideEndpoints: 0, affinityServices: 3000, rounds: 1 }),
      ['affinity-round 3000x10', 'affinity-round 3000x10 ClientIP'],
    );
  });

  it("measures a point's bare load and its cold sync apart (each in a fresh namespace), a round's cold sync only", () => {
    const [point, round] = ipvsLoads({
      services: [200],
      endpointsPerService: 10,
      wideEndpoints: 0,
      affinityServices: 300,
      rounds: 1,
    });
    assert.deepEqual(loadParts(point!), ['bare', 'cold']);
    assert.deepEqual(loadParts(round!), ['cold']);
  });
});
