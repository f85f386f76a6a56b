#!/usr/bin/python3
# tests/fakegce/test_fake_compute.py: the fake Compute Engine API (fake_compute.py) driven
# through ComputeAPI.handle and through a small HTTP server; its instances answer real ssh.
# Needs root and sshd; exits non-zero on failure.
"""Run: python3 tests/fakegce/test_fake_compute.py [-v]

FAKE_GCE_TEST_NET (default 127.0.13) is the /24 the fake's test hosts use here.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_compute  # noqa: E402

TESTHOSTS = os.path.join(HERE, '..', 'sshd', 'testhosts.bash')
NET = os.environ.get('FAKE_GCE_TEST_NET', '127.0.13')
PROJECT = 'cclfs-test'
ZA, ZB, ZC = 'us-central1-a', 'us-central1-b', 'us-central1-c'
DEBIAN = 'projects/debian-cloud/global/images/family/debian-12'
DEBIAN_ARM = 'projects/debian-cloud/global/images/family/debian-12-arm64'
LABELS = {'cclfs-cluster': 'abc', 'cclfs-token': 'xyz'}

API = None      # the ComputeAPI under test
TMP = None      # its directory and the test's keys
KEY = None      # the private key given in the ssh-keys metadata
OTHER_KEY = None  # a key no instance accepts


def poll(fetch, accept, what, seconds=20):
    """FETCH() again and again until ACCEPT(its value); returns that value."""
    limit = time.monotonic() + seconds
    value = fetch()
    while not accept(value):
        if time.monotonic() > limit:
            raise AssertionError('%s: still not so after %d s: %r' % (what, seconds, value))
        time.sleep(0.05)
        value = fetch()
    return value


def call(method, path, query=None, body=None):
    """ComputeAPI.handle with a path under /projects/PROJECT (unless it starts with
    /projects/) and a query of single values."""
    if not path.startswith('/projects/'):
        path = '/projects/%s%s' % (PROJECT, path)
    q = {k: [v] for k, v in (query or {}).items()}
    data = json.dumps(body).encode() if body is not None else b''
    return API.handle(method, path, q, data)


def ok(method, path, query=None, body=None):
    status, obj = call(method, path, query, body)
    if status != 200:
        raise AssertionError('%s %s: %d %s' % (method, path, status, json.dumps(obj)))
    return obj


def control(method, path, body=None):
    return API.control(method, path, json.dumps(body).encode() if body is not None else b'')


def wait_op(op):
    """Wait (operations.wait) until the operation is DONE; returns it."""
    link = op['selfLink'].split('/compute/v1', 1)[-1]
    deadline = time.monotonic() + 20
    while op['status'] != 'DONE':
        if time.monotonic() > deadline:
            raise AssertionError('operation %s not DONE' % op['name'])
        op = ok('POST', link + '/wait')
    return op


def properties(machine='e2-small', image=DEBIAN, labels=None, spot=False, policies=None,
               action=None):
    p = {'machineType': machine,
         'disks': [{'boot': True, 'autoDelete': True,
                    'initializeParams': {'sourceImage': image}}],
         'networkInterfaces': [{'network': 'global/networks/default',
                                'accessConfigs': [{'type': 'ONE_TO_ONE_NAT'}]}],
         'labels': dict(LABELS if labels is None else labels),
         'tags': {'items': ['cclfs']},
         'metadata': {'items': [{'key': 'ssh-keys', 'value': 'alice:%s\nbob:%s' % (
             read(KEY + '.pub').strip(), read(KEY + '.pub').strip())}]}}
    if spot:
        p['scheduling'] = {'provisioningModel': 'SPOT', 'onHostMaintenance': 'TERMINATE'}
        if action:
            p['scheduling']['instanceTerminationAction'] = action
    if policies:
        p['resourcePolicies'] = policies
    return p


def read(path):
    with open(path) as f:
        return f.read()


def instance(zone, name):
    return ok('GET', '/zones/%s/instances/%s' % (zone, name))


def nat_ip(inst):
    return inst['networkInterfaces'][0]['accessConfigs'][0].get('natIP')


def wait_status(zone, name, status):
    return poll(lambda: instance(zone, name), lambda i: i['status'] == status,
                '%s %s' % (name, status))


def ssh(addr, key):
    """0 when root@ADDR accepts KEY (only that key) and runs `true`."""
    hosts = os.path.join(TMP, 'fake', 'testhosts')
    return subprocess.run(
        ['ssh', '-F', '/dev/null', '-i', key, '-o', 'IdentitiesOnly=yes',
         '-o', 'UserKnownHostsFile=' + os.path.join(hosts, 'known_hosts'),
         '-o', 'GlobalKnownHostsFile=/dev/null', '-o', 'StrictHostKeyChecking=yes',
         '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=5', '-o', 'LogLevel=ERROR',
         'root@' + addr, 'true'],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=30).returncode


def listening(addr):
    try:
        with socket.create_connection((addr, 22), timeout=2):
            return True
    except OSError:
        return False


def sshd_pids():
    out = subprocess.run(['bash', '-c', 'source "$1" && testhosts_pids "$2"', 'x', TESTHOSTS,
                          os.path.join(TMP, 'fake', 'testhosts')],
                         stdout=subprocess.PIPE, text=True).stdout
    return [int(p) for p in out.split()]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format, *args):
        pass

    def any(self):
        url = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n) if n else b''
        if url.path.startswith('/_fake/'):
            status, obj = API.control(self.command, url.path[len('/_fake'):], body)
        elif url.path.startswith('/compute/v1/'):
            status, obj = API.handle(self.command, url.path[len('/compute/v1'):],
                                     urllib.parse.parse_qs(url.query), body)
        else:
            status, obj = 404, {'error': 'no such path'}
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = any


class ComputeTest(unittest.TestCase):
    """The tests run in order (their names sort) and share the fake."""

    def test_00_regions_zones_projects(self):
        r = ok('GET', '/regions/us-central1')
        self.assertEqual(r['status'], 'UP')
        self.assertEqual([z.rsplit('/', 1)[1] for z in r['zones']],
                         [ZA, ZB, ZC, 'us-central1-f'])
        self.assertTrue(r['zones'][0].startswith(API.base_url + '/projects/%s/zones/'
                                                 % PROJECT))
        zones = ok('GET', '/zones', {'maxResults': '100'})
        self.assertEqual(len(zones['items']), 7)
        status, err = call('GET', '/regions/mars-north1')
        self.assertEqual(status, 404)
        self.assertEqual(err['error']['errors'][0]['reason'], 'notFound')
        status, err = call('GET', '/projects/someone-else/zones/%s/instances' % ZA)
        self.assertEqual(status, 403)
        self.assertEqual(err['error']['errors'][0]['reason'], 'forbidden')
        self.assertEqual(call('GET', '/projects/%s/nothing' % PROJECT)[0], 404)

    def test_01_images(self):
        img = ok('GET', '/projects/debian-cloud/global/images/family/debian-12-arm64')
        self.assertEqual(img['architecture'], 'ARM64')
        self.assertEqual(img['status'], 'READY')
        self.assertEqual(img['family'], 'debian-12-arm64')
        self.assertEqual(ok('GET', '/projects/debian-cloud/global/images/' + img['name'])
                         ['selfLink'], img['selfLink'])
        img = ok('GET', '/projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64')
        self.assertEqual(img['architecture'], 'X86_64')
        status, err = call('GET', '/projects/debian-cloud/global/images/family/debian-99')
        self.assertEqual(status, 404)
        self.assertEqual(err['error']['message'], "The resource 'projects/debian-cloud/"
                         "global/images/family/debian-99' was not found")

    def test_02_bulk_insert_bad_requests(self):
        def bad(props, pattern='cclfs-abc-w-####', want=400):
            status, err = call('POST', '/zones/%s/instances/bulkInsert' % ZA, None,
                               {'count': 1, 'namePattern': pattern,
                                'instanceProperties': props})
            self.assertEqual(status, want, err)
            return err['error']
        self.assertIn('Label value', bad(properties(labels={'k': 'Upper'}))['message'])
        self.assertIn('Label key', bad(properties(labels={'9k': 'v'}))['message'])
        bad(properties(labels={'k': 'x' * 64}))
        self.assertIn('Machine type', bad(properties(machine='z9-huge'))['message'])
        self.assertIn('architecture', bad(properties(machine='t2a-standard-2'))['message'])
        bad(properties(image='projects/debian-cloud/global/images/family/debian-99'), want=404)
        bad(properties(), pattern='Cclfs-####')
        bad(properties(), pattern='cclfs-w')
        self.assertEqual(control('GET', '/state')[1]['instances'], [])

    def test_03_bulk_insert_idempotent(self):
        body = {'count': 3, 'namePattern': 'cclfs-abc-w-####',
                'instanceProperties': properties()}
        path = '/zones/%s/instances/bulkInsert' % ZA
        control('POST', '/reset-calls')
        op = ok('POST', path, {'requestId': 'req-1'}, body)
        self.assertEqual(op['kind'], 'compute#operation')
        self.assertEqual(op['operationType'], 'bulkInsert')
        self.assertIn(op['status'], ('PENDING', 'RUNNING'))
        self.assertTrue(op['zone'].endswith('/zones/' + ZA))
        again = ok('POST', path, {'requestId': 'req-1'}, body)
        self.assertEqual(again['name'], op['name'])
        op = wait_op(op)
        self.assertNotIn('error', op)
        state = control('GET', '/state')[1]
        self.assertEqual(state['launches'], {'req-1': 3})
        self.assertEqual(state['calls']['POST bulkInsert'], 2)
        self.assertEqual(sorted(i['name'] for i in state['instances']),
                         ['cclfs-abc-w-0001', 'cclfs-abc-w-0002', 'cclfs-abc-w-0003'])
        self.assertEqual(state['instances'][0]['users'], ['alice', 'bob'])
        for n in (1, 2, 3):
            inst = wait_status(ZA, 'cclfs-abc-w-%04d' % n, 'RUNNING')
            self.assertEqual(inst['labels'], LABELS)
            self.assertEqual(inst['tags']['items'], ['cclfs'])
            self.assertTrue(inst['machineType'].endswith('/machineTypes/e2-small'))
            self.assertTrue(inst['id'].isdigit())
            self.assertTrue(nat_ip(inst).startswith(NET + '.'))
            self.assertEqual(inst['networkInterfaces'][0]['networkIP'],
                             inst['networkInterfaces'][0]['accessConfigs'][0].get('natIP'))
            self.assertEqual(inst['scheduling']['provisioningModel'], 'STANDARD')

    def test_04_ssh_with_metadata_key(self):
        addr = nat_ip(instance(ZA, 'cclfs-abc-w-0001'))
        self.assertEqual(ssh(addr, KEY), 0)
        self.assertNotEqual(ssh(addr, OTHER_KEY), 0)
        hosts = os.path.join(TMP, 'fake', 'testhosts')
        self.assertEqual(subprocess.run(
            ['ssh', '-F', os.path.join(hosts, 'ssh_config'), 'root@' + addr, 'true'],
            stdin=subprocess.DEVNULL, timeout=30).returncode, 0)

    def test_05_guest_attributes(self):
        path = '/zones/%s/instances/cclfs-abc-w-0001/getGuestAttributes' % ZA
        attrs = ok('GET', path, {'queryPath': 'hostkeys/'})
        items = attrs['queryValue']['items']
        host = [i for i in control('GET', '/state')[1]['instances']
                if i['name'] == 'cclfs-abc-w-0001'][0]['host_dir']
        key_type, key = read(os.path.join(host, 'ssh_host_ed25519_key.pub')).split()[:2]
        self.assertEqual(items, [{'namespace': 'hostkeys', 'key': key_type, 'value': key}])
        control('POST', '/settings', {'guest_hostkeys': False})
        self.assertEqual(call('GET', path, {'queryPath': 'hostkeys/'})[0], 404)
        control('POST', '/settings', {'guest_hostkeys': True})

    def test_06_list_filter_pages(self):
        # Another cluster's instance in the same zone.
        op = ok('POST', '/zones/%s/instances/bulkInsert' % ZA, None,
                {'count': 1, 'namePattern': 'cclfs-def-m-#',
                 'instanceProperties': properties(labels={'cclfs-cluster': 'def'})})
        wait_op(op)
        for flt in ('labels.cclfs-cluster=abc AND labels.cclfs-token=xyz',
                    'labels.cclfs-cluster = "abc"',
                    '(labels.cclfs-cluster = "abc") AND (labels.cclfs-token = "xyz")',
                    '(labels.cclfs-cluster = "abc") (labels.cclfs-token:*)'):
            names, token, pages = [], None, 0
            while True:
                q = {'filter': flt}
                if token:
                    q['pageToken'] = token
                page = ok('GET', '/zones/%s/instances' % ZA, q)
                pages += 1
                self.assertLessEqual(len(page.get('items', [])), 2)
                names += [i['name'] for i in page.get('items', [])]
                token = page.get('nextPageToken')
                if not token:
                    break
            self.assertEqual(names, ['cclfs-abc-w-0001', 'cclfs-abc-w-0002',
                                     'cclfs-abc-w-0003'], flt)
            self.assertEqual(pages, 2, flt)
        page = ok('GET', '/zones/%s/instances' % ZA, {'filter': 'labels.cclfs-cluster=def'})
        self.assertEqual([i['name'] for i in page['items']], ['cclfs-def-m-1'])
        self.assertEqual(call('GET', '/zones/%s/instances' % ZA,
                              {'filter': 'labels.a=b OR labels.c=d'})[0], 400)
        agg = ok('GET', '/aggregated/instances',
                 {'filter': 'labels.cclfs-cluster=abc', 'maxResults': '10'})
        self.assertEqual(len(agg['items']['zones/' + ZA]['instances']), 3)
        self.assertIn('warning', agg['items']['zones/' + ZB])
        op = ok('DELETE', '/zones/%s/instances/cclfs-def-m-1' % ZA)
        wait_op(op)

    def test_07_stop_start(self):
        name = 'cclfs-abc-w-0003'
        before = instance(ZA, name)
        old = nat_ip(before)
        guest = '/zones/%s/instances/%s/getGuestAttributes' % (ZA, name)
        hostkey = ok('GET', guest, {'queryPath': 'hostkeys/'})['queryValue']
        op = ok('POST', '/zones/%s/instances/%s/stop' % (ZA, name))
        self.assertEqual(op['operationType'], 'stop')
        self.assertEqual(op['targetLink'], before['selfLink'])
        wait_op(op)
        self.assertEqual(instance(ZA, name)['status'], 'TERMINATED')
        self.assertFalse(listening(old))
        op = ok('POST', '/zones/%s/instances/%s/start' % (ZA, name))
        wait_op(op)
        after = wait_status(ZA, name, 'RUNNING')
        new = nat_ip(after)
        self.assertNotEqual(new, old)
        self.assertEqual(after['id'], before['id'])
        self.assertEqual(ssh(new, KEY), 0)
        self.assertEqual(ok('GET', guest, {'queryPath': 'hostkeys/'})['queryValue'], hostkey)

    def test_08_delete(self):
        name = 'cclfs-abc-w-0002'
        addr = nat_ip(instance(ZA, name))
        op = ok('DELETE', '/zones/%s/instances/%s' % (ZA, name))
        self.assertEqual(op['operationType'], 'delete')
        wait_op(op)
        status, err = call('GET', '/zones/%s/instances/%s' % (ZA, name))
        self.assertEqual(status, 404)
        self.assertEqual(err['error']['message'], "The resource 'projects/%s/zones/%s/"
                         "instances/%s' was not found" % (PROJECT, ZA, name))
        self.assertEqual(err['error']['errors'][0], {
            'message': err['error']['message'], 'domain': 'global', 'reason': 'notFound'})
        self.assertFalse(listening(addr))
        names = [i['name'] for i in ok('GET', '/zones/%s/instances' % ZA,
                                       {'maxResults': '10'})['items']]
        self.assertEqual(names, ['cclfs-abc-w-0001', 'cclfs-abc-w-0003'])
        self.assertEqual(call('DELETE', '/zones/%s/instances/%s' % (ZA, name))[0], 404)

    def test_09_capacity_and_preempt(self):
        control('POST', '/settings', {'capacity': [{'zone': ZA, 'provisioning': 'SPOT'}]})
        body = {'count': 1, 'namePattern': 'cclfs-abc-s-##',
                'instanceProperties': properties(spot=True)}
        before = len(control('GET', '/state')[1]['instances'])
        op = wait_op(ok('POST', '/zones/%s/instances/bulkInsert' % ZA, {'requestId': 'r-a'},
                        body))
        self.assertEqual(op['error']['errors'][0]['code'], 'ZONE_RESOURCE_POOL_EXHAUSTED')
        self.assertEqual(op['error']['errors'][0]['message'], (
            "The zone 'projects/%s/zones/%s' does not have enough resources available to "
            "fulfill the request.  Try a different zone, or try again later.")
            % (PROJECT, ZA))
        self.assertEqual(len(control('GET', '/state')[1]['instances']), before)
        op = wait_op(ok('POST', '/zones/%s/instances/bulkInsert' % ZB, {'requestId': 'r-b'},
                        body))
        self.assertNotIn('error', op)
        state = control('GET', '/state')[1]
        self.assertEqual(state['launches']['r-a'], 0)
        self.assertEqual(state['launches']['r-b'], 1)
        inst = wait_status(ZB, 'cclfs-abc-s-01', 'RUNNING')
        self.assertEqual(inst['scheduling']['provisioningModel'], 'SPOT')
        addr = nat_ip(inst)
        status, obj = control('POST', '/preempt', {'name': 'cclfs-abc-s-01', 'zone': ZB})
        self.assertEqual(status, 200, obj)
        self.assertEqual(instance(ZB, 'cclfs-abc-s-01')['status'], 'STOPPING')
        inst = wait_status(ZB, 'cclfs-abc-s-01', 'TERMINATED')
        self.assertIn('lastStopTimestamp', inst)
        self.assertFalse(listening(addr))
        ops = ok('GET', '/zones/%s/operations' % ZB,
                 {'filter': 'operationType="compute.instances.preempted"'})
        self.assertEqual([o['targetLink'] for o in ops['items']], [inst['selfLink']])
        self.assertEqual(ops['items'][0]['status'], 'DONE')
        ops = ok('GET', '/zones/%s/operations' % ZB, {
            'filter': 'operationType="compute.instances.preempted" AND targetLink="%s"'
                      % inst['selfLink']})
        self.assertEqual(len(ops['items']), 1)
        # instanceTerminationAction DELETE: the instance goes.
        op = wait_op(ok('POST', '/zones/%s/instances/bulkInsert' % ZB, None, {
            'count': 1, 'namePattern': 'cclfs-abc-d-#',
            'instanceProperties': properties(spot=True, action='DELETE')}))
        self.assertNotIn('error', op)
        wait_status(ZB, 'cclfs-abc-d-1', 'RUNNING')
        self.assertEqual(control('POST', '/preempt', {'names': ['cclfs-abc-d-1']})[0], 200)
        poll(lambda: call('GET', '/zones/%s/instances/cclfs-abc-d-1' % ZB)[0],
             lambda status: status == 404, 'cclfs-abc-d-1 deleted')
        ops = ok('GET', '/zones/%s/operations' % ZB, {
            'filter': 'operationType="compute.instances.preempted"', 'maxResults': '10'})
        self.assertEqual(len(ops['items']), 2)
        # Not spot: refused.
        self.assertEqual(control('POST', '/preempt', {'name': 'cclfs-abc-w-0001'})[0], 400)
        control('POST', '/settings', {'capacity': []})

    def test_10_firewalls(self):
        rule = {'name': 'cclfs-abc-ssh', 'network': 'global/networks/default',
                'direction': 'INGRESS', 'sourceRanges': ['0.0.0.0/0'],
                'targetTags': ['cclfs'], 'allowed': [{'IPProtocol': 'tcp', 'ports': ['22']}]}
        op = ok('POST', '/global/firewalls', None, rule)
        self.assertTrue(op['selfLink'].startswith(API.base_url + '/projects/%s/global/'
                                                  'operations/' % PROJECT))
        wait_op(op)
        status, err = call('POST', '/global/firewalls', None, rule)
        self.assertEqual(status, 409)
        self.assertEqual(err['error']['errors'][0]['reason'], 'alreadyExists')
        fw = ok('GET', '/global/firewalls/cclfs-abc-ssh')
        self.assertEqual(fw['allowed'], rule['allowed'])
        self.assertEqual(fw['targetTags'], ['cclfs'])
        ok('POST', '/global/firewalls', None, dict(rule, name='cclfs-other'))
        listed = ok('GET', '/global/firewalls', {'filter': 'name=cclfs-abc-ssh'})
        self.assertEqual([f['name'] for f in listed['items']], ['cclfs-abc-ssh'])
        wait_op(ok('DELETE', '/global/firewalls/cclfs-abc-ssh'))
        self.assertEqual(call('GET', '/global/firewalls/cclfs-abc-ssh')[0], 404)
        self.assertEqual(call('DELETE', '/global/firewalls/cclfs-abc-ssh')[0], 404)
        self.assertEqual(len(control('GET', '/state')[1]['firewalls']), 1)

    def test_11_resource_policies_arm64(self):
        op = ok('POST', '/regions/us-central1/resourcePolicies', None,
                {'name': 'cclfs-abc-place', 'groupPlacementPolicy': {
                    'collocation': 'COLLOCATED', 'vmCount': 2}})
        self.assertTrue(op['region'].endswith('/regions/us-central1'))
        wait_op(op)
        pol = ok('GET', '/regions/us-central1/resourcePolicies/cclfs-abc-place')
        self.assertEqual(pol['groupPlacementPolicy']['collocation'], 'COLLOCATED')
        listed = ok('GET', '/aggregated/resourcePolicies', {'filter': 'name:cclfs-*',
                                                            'maxResults': '500'})
        self.assertEqual(listed['items']['regions/us-central1']['resourcePolicies'], [pol])
        self.assertIn('warning', listed['items']['regions/europe-west4'])
        listed = ok('GET', '/aggregated/resourcePolicies', {'filter': 'name:other-*'})
        self.assertNotIn('resourcePolicies', listed['items']['regions/us-central1'])
        op = ok('POST', '/zones/%s/instances/bulkInsert' % ZC, None,
                {'count': 2, 'namePattern': 'cclfs-abc-a-#',
                 'instanceProperties': properties(machine='t2a-standard-2', image=DEBIAN_ARM,
                                                  policies=['cclfs-abc-place'])})
        wait_op(op)
        inst = instance(ZC, 'cclfs-abc-a-2')
        self.assertEqual(inst['resourcePolicies'], [pol['selfLink']])
        status, err = call('DELETE', '/regions/us-central1/resourcePolicies/cclfs-abc-place')
        self.assertEqual(status, 400)
        self.assertEqual(err['error']['errors'][0]['reason'], 'resourceInUseByAnotherResource')
        for n in (1, 2):
            wait_op(ok('DELETE', '/zones/%s/instances/cclfs-abc-a-%d' % (ZC, n)))
        wait_op(ok('DELETE', '/regions/us-central1/resourcePolicies/cclfs-abc-place'))
        self.assertEqual(call('GET', '/regions/us-central1/resourcePolicies/'
                              'cclfs-abc-place')[0], 404)

    def test_12_faults(self):
        status, obj = control('POST', '/faults', [{'method': 'GET',
                                                   'path_re': '/zones/[^/]+/instances$',
                                                   'reason': 'rateLimitExceeded'}])
        self.assertEqual(status, 200, obj)
        control('POST', '/reset-calls')
        status, err = call('GET', '/zones/%s/instances' % ZA)
        self.assertEqual(status, 429)
        self.assertEqual(err['error']['errors'][0]['reason'], 'rateLimitExceeded')
        self.assertEqual(err['error']['status'], 'RESOURCE_EXHAUSTED')
        self.assertEqual(call('GET', '/zones/%s/instances' % ZA)[0], 200)
        self.assertEqual(control('GET', '/state')[1]['calls'], {'GET instances': 2})
        control('POST', '/faults', {'reason': 'backendError', 'count': -1})
        self.assertEqual(call('GET', '/regions/us-central1')[0], 503)
        control('DELETE', '/faults')
        self.assertEqual(call('GET', '/regions/us-central1')[0], 200)

    def test_13_http(self):
        server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        server.daemon_threads = True
        t = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.1},
                             daemon=True)
        t.start()
        try:
            base = 'http://127.0.0.1:%d' % server.server_address[1]
            url = base + '/compute/v1/projects/%s/zones/%s/instances?%s' % (
                PROJECT, ZA, urllib.parse.urlencode(
                    {'filter': 'labels.cclfs-cluster = "abc"', 'maxResults': 5}))
            results = []

            def get():
                with urllib.request.urlopen(url, timeout=10) as r:
                    results.append(json.loads(r.read()))
            threads = [threading.Thread(target=get) for _ in range(6)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            self.assertEqual(len(results), 6)
            for r in results:
                self.assertEqual([i['name'] for i in r['items']],
                                 ['cclfs-abc-w-0001', 'cclfs-abc-w-0003'])
            req = urllib.request.Request(
                base + '/compute/v1/projects/%s/global/firewalls' % PROJECT, method='POST',
                data=json.dumps({'name': 'cclfs-other', 'allowed': [
                    {'IPProtocol': 'tcp'}]}).encode())
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=10)
            self.assertEqual(e.exception.code, 409)
            with urllib.request.urlopen(base + '/_fake/state', timeout=10) as r:
                self.assertIn('instances', json.loads(r.read()))
        finally:
            server.shutdown()
            server.server_close()

    def test_14_close(self):
        self.assertTrue(sshd_pids())
        API.close()
        self.assertEqual(sshd_pids(), [])


def main():
    global API, TMP, KEY, OTHER_KEY
    if os.geteuid() != 0:
        print('test_fake_compute: needs root (sshd test hosts)', file=sys.stderr)
        return 1
    TMP = tempfile.mkdtemp(prefix='fakegce.')
    # A SIGTERM ends the run through the finally below (sshds stopped, TMP removed).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        KEY = os.path.join(TMP, 'user_key')
        OTHER_KEY = os.path.join(TMP, 'other_key')
        for k in (KEY, OTHER_KEY):
            subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'user',
                            '-f', k], check=True, stdin=subprocess.DEVNULL)
        API = fake_compute.ComputeAPI(os.path.join(TMP, 'fake'), PROJECT, net=NET, first=10,
                                      base_url='http://127.0.0.1:1/compute/v1')
        API.settings['op_ms'] = 200
        verbosity = 2 if '-v' in sys.argv[1:] else 1
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(ComputeTest)
        result = unittest.TextTestRunner(verbosity=verbosity, failfast=True).run(suite)
        return 0 if result.wasSuccessful() else 1
    finally:
        if API is not None:
            API.close()
        if sshd_pids():
            print('test_fake_compute: sshd left running', file=sys.stderr)
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
