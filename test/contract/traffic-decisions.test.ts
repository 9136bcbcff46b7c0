// The traffic decisions every dataplane spells, case by case against kube-proxy's syncProxyRules
// (pkg/proxy/iptables/proxier.go: hasInternalEndpoints, hasExternalEndpoints,
// usesExternalTrafficChain, the REJECT/DROP filter targets, the EXT chain's masquerade and
// short-circuit). Service ports are built from real objects, as the daemon builds them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { trafficDecisions } from '../../contract/traffic-decisions.ts';
import type { LoadBalancerIngress, ServiceSpec } from '../../src/kube/objects.ts';
import {
  addresses,
  build,
  type EndpointExtra,
  endpoint,
  portOf,
  service,
  slice,
  THIS_NODE,
} from '../model/fixtures.ts';

const WEB = 'default/web:80/TCP';
const LOCAL = { nodeName: THIS_NODE };
const REMOTE = {};
const TERMINATING = { ready: false, serving: true, terminating: true };

const NODE_PORT: ServiceSpec = { type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }] };
const ETP_LOCAL: ServiceSpec = { ...NODE_PORT, externalTrafficPolicy: 'Local' };
const ITP_LOCAL: ServiceSpec = { internalTrafficPolicy: 'Local' };
const LOAD_BALANCER: ServiceSpec = {
  type: 'LoadBalancer',
  ports: [{ name: 'http', port: 80, nodePort: 30080 }],
  loadBalancerSourceRanges: ['203.0.113.0/24'],
};

function decide(spec: ServiceSpec, endpoints: [string, EndpointExtra][], ingress?: LoadBalancerIngress[]) {
  const objects = [
    service('web', spec, ingress ? { ingress } : {}),
    slice(
      'web',
      endpoints.map(([ip, extra]) => endpoint(ip, extra)),
    ),
  ];
  const d = trafficDecisions(portOf(build(objects), WEB));
  return {
    ...d,
    internalEndpoints: addresses(d.internalEndpoints),
    externalEndpoints: addresses(d.externalEndpoints),
  };
}

describe('internal (ClusterIP) traffic', () => {
  it('uses the Cluster endpoints under policy Cluster, wherever they run', () => {
    const d = decide({}, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', REMOTE],
    ]);
    assert.equal(d.internalPolicy, 'cluster');
    assert.deepEqual(d.internalEndpoints, ['10.244.1.1:8080', '10.244.2.1:8080']);
    assert.equal(d.internalVerdict, undefined);
  });

  it('is REJECTed when the service has no endpoint anywhere', () => {
    const d = decide({}, []);
    assert.deepEqual(d.internalEndpoints, []);
    assert.equal(d.internalVerdict, 'reject');
  });

  it('is REJECTed when its only endpoints neither are ready nor serve while terminating', () => {
    const d = decide({}, [['10.244.2.1', { ready: false, serving: false, terminating: true }]]);
    assert.equal(d.internalVerdict, 'reject');
  });

  it('uses only this node’s endpoints under policy Local', () => {
    const d = decide(ITP_LOCAL, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', REMOTE],
    ]);
    assert.equal(d.internalPolicy, 'local');
    assert.deepEqual(d.internalEndpoints, ['10.244.1.1:8080']);
    assert.equal(d.internalVerdict, undefined);
  });

  it('is DROPped, not REJECTed, under policy Local when the endpoints all run elsewhere', () => {
    const d = decide(ITP_LOCAL, [['10.244.2.1', REMOTE]]);
    assert.deepEqual(d.internalEndpoints, []);
    assert.equal(d.internalVerdict, 'drop');
  });

  it('falls back to a local serving terminating endpoint under policy Local', () => {
    const d = decide(ITP_LOCAL, [
      ['10.244.1.1', { ...LOCAL, ...TERMINATING }],
      ['10.244.2.1', REMOTE],
    ]);
    assert.deepEqual(d.internalEndpoints, ['10.244.1.1:8080']);
    assert.equal(d.internalVerdict, undefined);
  });

  it('keeps the Cluster endpoints when only external traffic has policy Local', () => {
    const d = decide(ETP_LOCAL, [['10.244.2.1', REMOTE]]);
    assert.deepEqual(d.internalEndpoints, ['10.244.2.1:8080']);
    assert.equal(d.internalVerdict, undefined);
  });
});

describe('external traffic (external IPs, load balancer IPs, node ports)', () => {
  it('is captured, masqueraded and sent to the Cluster endpoints under policy Cluster', () => {
    const d = decide(NODE_PORT, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', REMOTE],
    ]);
    assert.equal(d.externalPolicy, 'cluster');
    assert.deepEqual(d.externalEndpoints, ['10.244.1.1:8080', '10.244.2.1:8080']);
    assert.equal(d.externalVerdict, undefined);
    assert.equal(d.capturesExternal, true);
    assert.equal(d.masqueradesExternal, true);
    assert.equal(d.shortCircuitsLocalTraffic, false);
  });

  it('keeps its source and uses this node’s endpoints under policy Local', () => {
    const d = decide(ETP_LOCAL, [
      ['10.244.1.1', LOCAL],
      ['10.244.2.1', REMOTE],
    ]);
    assert.equal(d.externalPolicy, 'local');
    assert.deepEqual(d.externalEndpoints, ['10.244.1.1:8080']);
    assert.equal(d.masqueradesExternal, false);
    assert.equal(d.shortCircuitsLocalTraffic, true);
  });

  it('under policy Local without local endpoints: DROPped from outside, captured for pods and host', () => {
    const d = decide(ETP_LOCAL, [['10.244.2.1', REMOTE]]);
    assert.deepEqual(d.externalEndpoints, []);
    assert.equal(d.externalVerdict, 'drop');
    assert.equal(d.capturesExternal, true);
    assert.equal(d.shortCircuitsLocalTraffic, true);
  });

  it('is REJECTed and not captured when the service has no endpoint anywhere', () => {
    for (const spec of [NODE_PORT, ETP_LOCAL]) {
      const d = decide(spec, []);
      assert.equal(d.externalVerdict, 'reject');
      assert.equal(d.capturesExternal, false);
      assert.equal(d.shortCircuitsLocalTraffic, false);
    }
  });

  it('does not exist on a ClusterIP service, whose externalTrafficPolicy means nothing', () => {
    const d = decide({ externalTrafficPolicy: 'Local' }, [['10.244.2.1', REMOTE]]);
    assert.equal(d.externalPolicy, 'cluster');
    assert.equal(d.capturesExternal, false);
    assert.equal(d.shortCircuitsLocalTraffic, false);
    assert.deepEqual(d.externalEndpoints, []);
    assert.equal(d.externalVerdict, undefined);
  });

  it('has no verdict on a ClusterIP service with iTP Local and no local endpoint', () => {
    const d = decide(ITP_LOCAL, [['10.244.2.1', REMOTE]]);
    assert.equal(d.internalVerdict, 'drop');
    assert.equal(d.externalVerdict, undefined);
  });

  it('is captured on a ClusterIP service with an external IP', () => {
    const d = decide({ externalIPs: ['192.0.2.10'], externalTrafficPolicy: 'Local' }, [
      ['10.244.1.1', LOCAL],
    ]);
    assert.equal(d.capturesExternal, true);
    assert.deepEqual(d.externalEndpoints, ['10.244.1.1:8080']);
  });

  it('decides each policy on its own: iTP Local without local endpoints, eTP Cluster', () => {
    const d = decide({ ...NODE_PORT, internalTrafficPolicy: 'Local' }, [['10.244.2.1', REMOTE]]);
    assert.equal(d.internalVerdict, 'drop');
    assert.deepEqual(d.externalEndpoints, ['10.244.2.1:8080']);
    assert.equal(d.externalVerdict, undefined);
  });
});

describe('load balancer source ranges', () => {
  it('apply to a load balancer with an ingress IP', () => {
    const d = decide(LOAD_BALANCER, [['10.244.2.1', REMOTE]], [{ ip: '198.51.100.1' }]);
    assert.equal(d.sourceRangesApply, true);
  });

  it('apply whether or not there are endpoints', () => {
    const d = decide(LOAD_BALANCER, [], [{ ip: '198.51.100.1' }]);
    assert.equal(d.sourceRangesApply, true);
  });

  it('have nothing to filter before the load balancer has an IP', () => {
    assert.equal(decide(LOAD_BALANCER, [['10.244.2.1', REMOTE]]).sourceRangesApply, false);
  });

  it('do not exist without ranges', () => {
    const { loadBalancerSourceRanges: _, ...open } = LOAD_BALANCER;
    assert.equal(decide(open, [['10.244.2.1', REMOTE]], [{ ip: '198.51.100.1' }]).sourceRangesApply, false);
  });
});

describe('session affinity', () => {
  it('is off without ClientIP affinity', () => {
    assert.equal(decide({}, [['10.244.2.1', REMOTE]]).affinitySeconds, 0);
  });

  it('lasts kube-proxy’s default of three hours, or the configured timeout', () => {
    assert.equal(decide({ sessionAffinity: 'ClientIP' }, []).affinitySeconds, 10800);
    const configured: ServiceSpec = {
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
    };
    assert.equal(decide(configured, []).affinitySeconds, 60);
  });
});
