#!/usr/bin/python3
# tests/fakegce/fake_catalog.py: what the gcp catalog refresh reads, for fake_gce.py: the
# Compute API's machineTypes and acceleratorTypes aggregatedLists (the machine types of
# fake_compute.py in its zones) and the Cloud Billing Catalog's Compute SKUs.
"""The catalog part of the fake Google Cloud endpoint.

    cat = FakeCatalog(fake)       # fake: the FakeGCE (compute_api(), token_valid())
    status, obj = cat.handle_compute('GET', '/compute/v1/projects/P/aggregated/machineTypes',
                                     {'pageToken': [...]})   # None: not a catalog path
    status, obj = cat.handle_billing(handler, '/v1/services/6F81-5844-456A/skus', 'key=K')
    status, obj = cat.control('POST', '/settings', b'{"billing_key": "K"}')

Compute (behind fake_gce.py's bearer check): GET projects/P/aggregated/machineTypes and
aggregated/acceleratorTypes, items by scope ("zones/Z": {"machineTypes": [...]} or a
NO_RESULTS_ON_PAGE warning), paged by min(maxResults, the Compute part's page_size setting)
with nextPageToken / pageToken. Machine types: fake_compute.MACHINE_TYPES in every zone but
those of TYPE_ZONES_LEFT_OUT, and one OBSOLETE type; accelerator types: ACCELERATORS.

Billing: GET /v1/services/6F81-5844-456A/skus?pageSize=N&pageToken=T, {"skus": [...],
"nextPageToken"} (left out on the last page), paged by min(pageSize, page_size). Allowed
with ?key=KEY when KEY is the billing key (--billing-key or the billing_key setting; else
400 API_KEY_INVALID), or without a key with a valid bearer token (else 401). The SKUs:
core and RAM of each series of the machine types, the L4 GPU, on demand and spot, in both
regions; and SKUs no offer is made of (custom, sole tenancy, commitments, disks, licences).

Control (under /_fake/catalog): GET /state {"settings", "calls", "auth"}; POST /settings
{"billing_key": str|null, "price_factor": number (every price multiplied),
"skus_left_out": [descriptions], "billing_fault", "machine_types_fault",
"accelerator_types_fault": null or {"status", "reason", "message"} (every such call
answers that error until cleared)}.
"""

import base64
import json
import threading
import urllib.parse

from fake_compute import MACHINE_TYPES, error_body

BILLING_PREFIX = '/v1/services/'
BILLING_SERVICE = '6F81-5844-456A'
IMAGE_CREATED = '2024-11-12T00:00:00.000-08:00'

# machine type -> zones it is not offered in
TYPE_ZONES_LEFT_OUT = {'g2-standard-4': {'us-central1-f'}, 't2a-standard-4': {'europe-west4-a',
                                                                               'europe-west4-b',
                                                                               'europe-west4-c'}}
# an old type every zone still lists, OBSOLETE (no offer is made of it)
OBSOLETE_TYPE = 'n1-highcpu-2'

# accelerator type -> (description, zones)
ACCELERATORS = {
    'nvidia-l4': ('NVIDIA L4', ['us-central1-a', 'us-central1-b', 'europe-west4-a',
                                'europe-west4-b', 'europe-west4-c']),
    'nvidia-tesla-t4': ('NVIDIA T4', ['us-central1-b', 'us-central1-f']),
}

# The SKUs' place names, and how much dearer a region is than us-central1.
REGIONS = {'us-central1': ('Americas', 1.0), 'europe-west4': ('Netherlands', 1.1)}

# series -> (description of its SKUs, core $/h, RAM $/GiB-h, spot core, spot RAM), in
# us-central1
SERIES = {
    'e2': ('E2 Instance', 0.021811, 0.002923, 0.006543, 0.000877),
    'n1': ('N1 Predefined Instance', 0.031611, 0.004237, 0.00664, 0.00089),
    'n2': ('N2 Instance', 0.031611, 0.004237, 0.007, 0.00094),
    'c3': ('C3 Instance', 0.03465, 0.003938, 0.00797, 0.000906),
    't2a': ('T2A Arm Instance', 0.0385, 0.00481, 0.0116, 0.00144),
    'g2': ('G2 Instance', 0.024988, 0.002928, 0.00999, 0.00117),
}
# GPU SKU description -> (on-demand $/h, spot $/h), in us-central1
GPUS = {'Nvidia L4': (0.56, 0.2236), 'Nvidia Tesla T4': (0.35, 0.14)}
# (description, resource family, group, usage type, unit, $) of SKUs no offer uses
OTHER_SKUS = [
    ('N2 Custom Instance Core running in Americas', 'Compute', 'CPU', 'OnDemand', 'h', 0.9),
    ('N2 Sole Tenancy Instance Core running in Americas', 'Compute', 'CPU', 'OnDemand', 'h',
     0.9),
    ('Commitment v1: E2 Cpu in Americas for 1 Year', 'Compute', 'CPU', 'Commit1Yr', 'h',
     0.001),
    ('E2 Instance Core running in Americas', 'Compute', 'CPU', 'Commit1Yr', 'h', 0.001),
    ('Storage PD Capacity', 'Storage', 'PDStandard', 'OnDemand', 'GiBy.mo', 0.04),
    ('Licensing Fee for Windows Server 2022 on VM with 2 VCPU', 'License', 'Windows',
     'OnDemand', 'h', 0.08),
]
SETTINGS = ('billing_key', 'price_factor', 'skus_left_out', 'billing_fault',
            'machine_types_fault', 'accelerator_types_fault')
BAD_KEY = 'API key not valid. Please pass a valid API key.'
UNAUTHENTICATED = ('Request had invalid authentication credentials. Expected OAuth 2 '
                   'access token, login cookie or other valid authentication credential.')


def money(amount):
    units = int(amount)
    return {'currencyCode': 'USD', 'units': str(units),
            'nanos': int(round((amount - units) * 1e9))}


def sku(n, description, family, group, usage, regions, unit, tiers):
    """A Sku as the Billing Catalog gives one; tiers: [(start, $)]."""
    sku_id = '%04X-%04X-%04X' % (0xA000 + n, 0xB000 + n * 7 % 4096, 0xC000 + n * 13 % 4096)
    return {
        'name': 'services/%s/skus/%s' % (BILLING_SERVICE, sku_id), 'skuId': sku_id,
        'description': description,
        'category': {'serviceDisplayName': 'Compute Engine', 'resourceFamily': family,
                     'resourceGroup': group, 'usageType': usage},
        'serviceRegions': list(regions),
        'pricingInfo': [{
            'effectiveTime': '2026-11-01T00:00:00Z', 'summary': '',
            'pricingExpression': {
                'usageUnit': unit, 'usageUnitDescription': unit, 'baseUnit': 's',
                'baseUnitDescription': 'second', 'baseUnitConversionFactor': 3600,
                'displayQuantity': 1,
                'tieredRates': [{'startUsageAmount': s, 'unitPrice': money(p)}
                                for s, p in tiers]},
            'currencyConversionRate': 1}],
        'serviceProviderName': 'Google',
    }


def fault_problem(v):
    if v is None:
        return None
    if (not isinstance(v, dict) or not isinstance(v.get('status', 403), int)
            or not set(v) <= {'status', 'reason', 'message'}):
        return 'null or {"status", "reason", "message"}'
    return None


class FakeCatalog:
    def __init__(self, fake, billing_key=None):
        self.fake = fake
        self.lock = threading.Lock()
        self.settings = {'billing_key': billing_key, 'price_factor': 1.0,
                         'skus_left_out': [], 'billing_fault': None,
                         'machine_types_fault': None, 'accelerator_types_fault': None}
        self.calls = {}
        self.auth = {'key': 0, 'bearer': 0, 'refused': 0}

    def count(self, table, name):
        with self.lock:
            table[name] = table.get(name, 0) + 1

    # --- paging ---

    def page_size(self, asked):
        api = self.fake.compute_api()
        size = api.settings.get('page_size', 2) if api is not None else 2
        try:
            asked = int(asked) if asked not in (None, '') else 0
        except ValueError:
            asked = 0
        return min(size, asked) if asked > 0 else size

    @staticmethod
    def page(items, size, token):
        start = 0
        if token:
            try:
                start = int(base64.urlsafe_b64decode(token.encode()).decode()
                            .split(':', 1)[1])
            except (ValueError, IndexError, UnicodeDecodeError):
                return None, None
        nxt = None
        if start + size < len(items):
            nxt = base64.urlsafe_b64encode(('offset:%d' % (start + size)).encode()).decode()
        return items[start:start + size], nxt

    @staticmethod
    def fault_answer(fault):
        status = fault.get('status', 403)
        return status, error_body(status, fault.get('reason', 'forbidden'),
                                  fault.get('message', 'Permission denied.'))

    # --- Compute ---

    def zones(self):
        api = self.fake.compute_api()
        return sorted(api.zone_region) if api is not None else []

    def machine_type_json(self, base, project, zone, name):
        if name == OBSOLETE_TYPE:
            arch, cpus, mem, accels = 'X86_64', 2, 1843, []
        else:
            arch, cpus, mem, accels = MACHINE_TYPES[name]
        out = {'kind': 'compute#machineType', 'id': str(3000 + sorted(MACHINE_TYPES).index(
            name) if name in MACHINE_TYPES else 3999), 'creationTimestamp': IMAGE_CREATED,
            'name': name, 'description': '%d vCPUs, %g GB RAM' % (cpus, mem / 1024.0),
            'guestCpus': cpus, 'memoryMb': mem, 'imageSpaceGb': 0,
            'maximumPersistentDisks': 128, 'maximumPersistentDisksSizeGb': '263168',
            'zone': zone, 'isSharedCpu': name in ('e2-small', 'e2-medium'),
            'architecture': arch,
            'selfLink': '%s/projects/%s/zones/%s/machineTypes/%s' % (base, project, zone, name)}
        if accels:
            out['accelerators'] = [dict(a) for a in accels]
        if name == OBSOLETE_TYPE:
            out['deprecated'] = {'state': 'OBSOLETE', 'replacement': 'e2-highcpu-2'}
        return out

    def accelerator_json(self, base, project, zone, name):
        return {'kind': 'compute#acceleratorType', 'id': str(4000 + sorted(ACCELERATORS).index(
            name)), 'creationTimestamp': IMAGE_CREATED, 'name': name,
            'description': ACCELERATORS[name][0],
            'zone': '%s/projects/%s/zones/%s' % (base, project, zone),
            'maximumCardsPerInstance': 8,
            'selfLink': '%s/projects/%s/zones/%s/acceleratorTypes/%s' % (base, project, zone,
                                                                         name)}

    def handle_compute(self, method, path, query):
        """(status, answer) of a catalog path under /compute/v1, else None."""
        parts = path.strip('/').split('/')
        if (len(parts) != 6 or parts[:2] != ['compute', 'v1'] or parts[2] != 'projects'
                or parts[4] != 'aggregated'
                or parts[5] not in ('machineTypes', 'acceleratorTypes')):
            return None
        project, what = parts[3], parts[5]
        q = {k: v[-1] for k, v in (query or {}).items()}
        if method != 'GET':
            return 405, error_body(405, 'httpMethodNotAllowed',
                                   'Method %s is not allowed' % method)
        self.count(self.calls, what)
        if project != self.fake.project:
            return 403, error_body(403, 'forbidden', "Required 'compute.%s.list' permission "
                                   "for 'projects/%s'" % (what, project))
        with self.lock:
            fault = self.settings['machine_types_fault' if what == 'machineTypes'
                                  else 'accelerator_types_fault']
        if fault is not None:
            return self.fault_answer(fault)
        base = self.fake.base_url + '/compute/v1'
        if what == 'machineTypes':
            names = sorted(list(MACHINE_TYPES) + [OBSOLETE_TYPE])
            pairs = [(z, n) for z in self.zones() for n in names
                     if z not in TYPE_ZONES_LEFT_OUT.get(n, ())]
            make = self.machine_type_json
        else:
            pairs = [(z, n) for z in self.zones() for n in sorted(ACCELERATORS)
                     if z in ACCELERATORS[n][1]]
            make = self.accelerator_json
        page, nxt = self.page(pairs, self.page_size(q.get('maxResults')), q.get('pageToken'))
        if page is None:
            return 400, error_body(400, 'invalid', "Invalid value for field 'pageToken': "
                                   "'%s'." % q.get('pageToken'))
        items = {}
        for zone in self.zones():
            here = [make(base, project, zone, n) for z, n in page if z == zone]
            items['zones/' + zone] = {what: here} if here else {'warning': {
                'code': 'NO_RESULTS_ON_PAGE',
                'message': "There are no results for scope 'zones/%s' on this page." % zone,
                'data': [{'key': 'scope', 'value': 'zones/' + zone}]}}
        kind = 'machineType' if what == 'machineTypes' else 'acceleratorType'
        out = {'kind': 'compute#%sAggregatedList' % kind,
               'id': 'projects/%s/aggregated/%s' % (project, what), 'items': items,
               'selfLink': '%s/projects/%s/aggregated/%s' % (base, project, what)}
        if nxt:
            out['nextPageToken'] = nxt
        return 200, out

    # --- billing ---

    def skus(self):
        with self.lock:
            factor = self.settings['price_factor']
            left_out = set(self.settings['skus_left_out'])
        out = []
        for region, (place, dearer) in sorted(REGIONS.items()):
            f = factor * dearer
            for series, (desc, core, ram, score, sram) in sorted(SERIES.items()):
                for kind, unit, group, od, spot in (('Core', 'h', 'CPU', core, score),
                                                    ('Ram', 'GiBy.h', 'RAM', ram, sram)):
                    text = '%s %s running in %s' % (desc, kind, place)
                    tiers = [(0, od * f)]
                    if series == 'n1' and kind == 'Core':  # sustained use, listed first
                        tiers.insert(0, (100, od * f * 0.7))
                    out.append((text, 'Compute', group, 'OnDemand', [region], unit, tiers))
                    out.append(('Spot Preemptible ' + text, 'Compute', group, 'Preemptible',
                                [region], unit, [(0, spot * f)]))
            for desc, (od, spot) in sorted(GPUS.items()):
                text = '%s GPU running in %s' % (desc, place)
                out.append((text, 'Compute', 'GPU', 'OnDemand', [region], 'h', [(0, od * f)]))
                out.append(('%s GPU attached to Spot Preemptible VMs running in %s'
                            % (desc, place), 'Compute', 'GPU', 'Preemptible', [region], 'h',
                            [(0, spot * f)]))
        for desc, family, group, usage, unit, price in OTHER_SKUS:
            out.append((desc, family, group, usage, sorted(REGIONS), unit,
                        [(0, price * factor), (100, price * factor / 2)]))
        return [sku(n, *s) for n, s in enumerate(out) if s[0] not in left_out]

    def handle_billing(self, handler, path, query):
        """(status, answer) of a Cloud Billing request (path under /v1/services/)."""
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(query).items()}
        self.count(self.calls, 'skus')
        with self.lock:
            accepted = self.settings['billing_key']
            fault = self.settings['billing_fault']
        if 'key' in q:
            if not accepted or q['key'] != accepted:
                self.count(self.auth, 'refused')
                answer = error_body(400, 'badRequest', BAD_KEY)
                answer['error']['details'] = [{
                    '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
                    'reason': 'API_KEY_INVALID', 'domain': 'googleapis.com'}]
                return 400, answer
            self.count(self.auth, 'key')
        else:
            auth = handler.headers.get('Authorization') or ''
            if not auth.startswith('Bearer ') or not self.fake.token_valid(auth[7:].strip()):
                self.count(self.auth, 'refused')
                return 401, {'error': {'code': 401, 'message': UNAUTHENTICATED,
                                       'status': 'UNAUTHENTICATED'}}
            self.count(self.auth, 'bearer')
        if handler.command != 'GET':
            return 405, error_body(405, 'httpMethodNotAllowed', 'GET only')
        if path.rstrip('/') != BILLING_PREFIX + BILLING_SERVICE + '/skus':
            return 404, error_body(404, 'notFound', 'Service not found: %s' % path)
        if fault is not None:
            return self.fault_answer(fault)
        page, nxt = self.page(self.skus(), self.page_size(q.get('pageSize')),
                              q.get('pageToken'))
        if page is None:
            return 400, error_body(400, 'badRequest', 'Invalid page token.')
        out = {'skus': page}
        if nxt:
            out['nextPageToken'] = nxt
        return 200, out

    # --- control ---

    def change(self, data):
        if not isinstance(data, dict):
            return 400, {'error': 'settings are a JSON object'}
        checks = {
            'billing_key': lambda v: None if v is None or isinstance(v, str) else
            'a string or null',
            'price_factor': lambda v: None if type(v) in (int, float) and v > 0 else
            'a positive number',
            'skus_left_out': lambda v: None if isinstance(v, list) and all(
                isinstance(x, str) for x in v) else 'a list of descriptions',
        }
        for name, value in data.items():
            check = checks.get(name, fault_problem if name in SETTINGS else None)
            problem = check(value) if check else 'no such setting'
            if problem:
                return 400, {'error': '%s: %s' % (name, problem)}
        with self.lock:
            self.settings.update(data)
            return 200, {'settings': self.state_settings()}

    def state_settings(self):
        """(lock held) the settings, the key itself left out."""
        s = dict(self.settings)
        s['billing_key'] = s['billing_key'] is not None
        return s

    def control(self, method, path, body):
        """A /_fake/catalog request (path without it): (status, JSON-able dict)."""
        if method == 'GET' and path == '/state':
            with self.lock:
                return 200, {'settings': self.state_settings(), 'calls': dict(self.calls),
                             'auth': dict(self.auth)}
        if method == 'POST' and path == '/settings':
            try:
                data = json.loads(body.decode('utf-8')) if body and body.strip() else {}
            except (UnicodeDecodeError, ValueError) as e:
                return 400, {'error': 'bad JSON: %s' % e}
            return self.change(data)
        return 404, {'error': 'no such control request: %s /_fake/catalog%s' % (method, path)}
