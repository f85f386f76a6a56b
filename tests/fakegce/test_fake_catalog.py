#!/usr/bin/python3
# tests/fakegce/test_fake_catalog.py: the catalog part of the fake Google Cloud endpoint
# (fake_catalog.py behind fake_gce.py): the machine and accelerator types' aggregatedLists,
# the Billing Catalog's SKUs, their pages, the key and bearer checks, the faults.
"""Run: python3 tests/fakegce/test_fake_catalog.py [-v]"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, 'fake_gce.py')
KEY = 'AIzaFakeBillingKey0123456789'
USER = {'type': 'authorized_user', 'client_id': '764086051850-fake.apps.googleusercontent.com',
        'client_secret': 'd-FL95Q19q7MQmFpd7hHD0Ty', 'refresh_token': '1//fake-refresh-token'}
SKUS = '/v1/services/6F81-5844-456A/skus'


class FakeCatalogTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='fakecat-test.')
        cls.dir = os.path.join(cls.tmp, 'fake')
        user = os.path.join(cls.tmp, 'user.json')
        with open(user, 'w') as f:
            json.dump(USER, f)
        cls.log = open(os.path.join(cls.tmp, 'fake.log'), 'w')
        cls.proc = subprocess.Popen(
            [sys.executable, FAKE, '--dir', cls.dir, '--project', 'cclfs-test',
             '--authorized-user', user, '--billing-key', KEY],
            stdout=cls.log, stderr=cls.log)
        port_file = os.path.join(cls.dir, 'port')
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or cls.proc.poll() is not None:
                cls.tearDownClass()
                raise RuntimeError('the fake did not start')
            time.sleep(0.05)
        with open(port_file) as f:
            cls.url = 'http://127.0.0.1:%d' % int(f.read())
        form = dict(USER, grant_type='refresh_token')
        del form['type']
        status, tok = cls.call('POST', '/token', urllib.parse.urlencode(form).encode(),
                               {'Content-Type': 'application/x-www-form-urlencoded'})
        assert status == 200, tok
        cls.bearer = {'Authorization': 'Bearer ' + tok['access_token']}

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            try:
                cls.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def call(cls, method, path, body=None, headers=None):
        req = urllib.request.Request(cls.url + path, data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def settings(self, **kw):
        status, answer = self.call('POST', '/_fake/catalog/settings', json.dumps(kw).encode())
        self.assertEqual(status, 200, answer)

    def tearDown(self):
        self.settings(billing_key=KEY, price_factor=1.0, skus_left_out=[], billing_fault=None,
                      machine_types_fault=None, accelerator_types_fault=None)

    def pages(self, path, headers, items_of, size_param='maxResults'):
        """Every page of a list: (items, pages)."""
        out, token, pages = [], None, 0
        while True:
            q = {size_param: 500}
            if token:
                q['pageToken'] = token
            sep = '&' if '?' in path else '?'
            status, answer = self.call('GET', path + sep + urllib.parse.urlencode(q),
                                       headers=headers)
            self.assertEqual(status, 200, answer)
            pages += 1
            out += items_of(answer)
            token = answer.get('nextPageToken')
            if not token:
                return out, pages

    @staticmethod
    def aggregated(what):
        def items(answer):
            return [(scope, i) for scope, v in answer['items'].items()
                    for i in v.get(what, [])]
        return items

    def test_machine_types(self):
        items, pages = self.pages('/compute/v1/projects/cclfs-test/aggregated/machineTypes',
                                  self.bearer, self.aggregated('machineTypes'))
        self.assertGreater(pages, 10)  # pages of 2 whatever maxResults asks
        where = {}
        for scope, mt in items:
            self.assertEqual('zones/' + mt['zone'], scope)
            where.setdefault(mt['name'], set()).add(mt['zone'])
        self.assertEqual(len(where['e2-standard-2']), 7)
        self.assertNotIn('us-central1-f', where['g2-standard-4'])
        self.assertEqual(where['t2a-standard-4'], {'us-central1-a', 'us-central1-b',
                                                   'us-central1-c', 'us-central1-f'})
        g2 = next(mt for _, mt in items if mt['name'] == 'g2-standard-4')
        self.assertEqual(g2['accelerators'], [{'guestAcceleratorType': 'nvidia-l4',
                                               'guestAcceleratorCount': 1}])
        self.assertEqual((g2['guestCpus'], g2['memoryMb'], g2['architecture']),
                         (4, 16384, 'X86_64'))
        old = next(mt for _, mt in items if mt['name'] == 'n1-highcpu-2')
        self.assertEqual(old['deprecated']['state'], 'OBSOLETE')

    def test_accelerator_types(self):
        items, _ = self.pages('/compute/v1/projects/cclfs-test/aggregated/acceleratorTypes',
                              self.bearer, self.aggregated('acceleratorTypes'))
        l4 = sorted(scope for scope, a in items if a['name'] == 'nvidia-l4')
        self.assertEqual(l4, ['zones/europe-west4-a', 'zones/europe-west4-b',
                              'zones/europe-west4-c', 'zones/us-central1-a',
                              'zones/us-central1-b'])
        self.assertEqual(items[0][1]['kind'], 'compute#acceleratorType')

    def test_compute_needs_a_token_and_the_project(self):
        status, _ = self.call('GET', '/compute/v1/projects/cclfs-test/aggregated/machineTypes')
        self.assertEqual(status, 401)
        status, answer = self.call('GET', '/compute/v1/projects/other/aggregated/machineTypes',
                                   headers=self.bearer)
        self.assertEqual(status, 403, answer)

    def test_skus_with_the_key(self):
        skus, pages = self.pages(SKUS + '?key=' + KEY, {}, lambda a: a['skus'], 'pageSize')
        self.assertGreater(pages, 10)
        by = {s['description']: s for s in skus if s['category']['usageType'] != 'Commit1Yr'}
        e2 = by['E2 Instance Core running in Americas']
        self.assertEqual(e2['category']['usageType'], 'OnDemand')
        self.assertEqual(e2['serviceRegions'], ['us-central1'])
        rate = e2['pricingInfo'][0]['pricingExpression']['tieredRates'][0]['unitPrice']
        self.assertEqual((rate['units'], rate['nanos']), ('0', 21811000))
        spot = by['Spot Preemptible E2 Instance Ram running in Netherlands']
        self.assertEqual(spot['category']['usageType'], 'Preemptible')
        self.assertEqual(spot['pricingInfo'][0]['pricingExpression']['usageUnit'], 'GiBy.h')
        self.assertIn('Nvidia L4 GPU running in Americas', by)
        status, state = self.call('GET', '/_fake/catalog/state')
        self.assertNotIn(KEY, json.dumps(state))
        with open(os.path.join(self.dir, 'requests.log')) as f:
            self.assertNotIn(KEY, f.read())

    def test_skus_key_refused_or_bearer(self):
        status, answer = self.call('GET', SKUS + '?key=wrong')
        self.assertEqual(status, 400)
        self.assertIn('API key not valid', answer['error']['message'])
        status, _ = self.call('GET', SKUS)
        self.assertEqual(status, 401)
        status, answer = self.call('GET', SKUS, headers=self.bearer)
        self.assertEqual(status, 200, answer)
        self.assertEqual(len(answer['skus']), 2)

    def test_settings_and_faults(self):
        self.settings(price_factor=2.0, skus_left_out=['E2 Instance Ram running in Americas'])
        skus, _ = self.pages(SKUS, self.bearer, lambda a: a['skus'], 'pageSize')
        by = {s['description']: s for s in skus if s['category']['usageType'] != 'Commit1Yr'}
        self.assertNotIn('E2 Instance Ram running in Americas', by)
        rate = by['E2 Instance Core running in Americas']['pricingInfo'][0][
            'pricingExpression']['tieredRates'][0]['unitPrice']
        self.assertEqual(rate['nanos'], 43622000)
        self.settings(billing_fault={'status': 403, 'reason': 'forbidden',
                                     'message': 'Cloud Billing API has not been used'})
        status, answer = self.call('GET', SKUS, headers=self.bearer)
        self.assertEqual(status, 403, answer)
        self.settings(machine_types_fault={'status': 503, 'reason': 'backendError'})
        status, _ = self.call('GET', '/compute/v1/projects/cclfs-test/aggregated/machineTypes',
                              headers=self.bearer)
        self.assertEqual(status, 503)
        status, _ = self.call('POST', '/_fake/catalog/settings', b'{"nope": 1}')
        self.assertEqual(status, 400)


if __name__ == '__main__':
    unittest.main()
