# tests/fakeec2/fake_catalog.py: the catalog the fake EC2 endpoint serves (regions, instance
# types, their offerings, spot price history and the Price List's on-demand prices), made at
# start from the project's catalog/data/types.csv, offers.csv and regions.csv (ec2 rows).
"""The fake's catalog: the CSV rules of catalog/data/SOURCES.md run backwards.

Regions: the ec2 rows of regions.csv, ordered us-east-1, us-west-2, eu-west-1, then the
others in the file's order. With --regions N the first N are enabled (opt-in-not-required);
the others are "not-opted-in": DescribeRegions lists them only with AllRegions=true, and an
EC2 call signed for one is answered OptInRequired.

Instance types (DescribeInstanceTypes): every ec2 row of types.csv, and one type new to the
hierarchy (NEW_TYPE). vcpus -> VCpuInfo.DefaultVCpus; memory_bytes / 2^20 ->
MemoryInfo.SizeInMiB; architecture -> ProcessorInfo.SupportedArchitectures;
processor_manufacturer -> ProcessorInfo.Manufacturer; storage_type and storage_bytes ->
InstanceStorageInfo (none for EBS-only; TotalSizeInGB = bytes / 2^30; disk type hdd or ssd,
NvmeSupport required for StorageType_EC2_NVMeSSD); network -> NetworkPerformance "N Gigabit"
or "Up to N Gigabit" (a ceiling below 10 Gbit/s that is not a whole number of Gbit/s is
given as "Low to Moderate" with the figure in NetworkCards[0].PeakBandwidthInGbps, as old
types are); accelerators -> GpuInfo, NeuronInfo (CoreInfo.Version from NeuronCore_vN),
InferenceAcceleratorInfo (Qualcomm), FpgaInfo (FPGA rows) or MediaAcceleratorInfo (the
Xilinx rows without a type), named by ACCEL_API. A10G, L4 and L40S memory is given the way
the API does, whole decimal GB in MiB (24 GiB -> 22888 MiB); a fractional GPU (g6f) has
Count 0, LogicalGpuCount 1 and GpuPartitionSize = accelerator_fraction.

The API's known mistakes, seeded: p5.4xlarge has GpuInfo Count 0; p5en.48xlarge's GPU is
named "NVIDIA"; every Trainium2 device has 524288 MiB.

Offers: one DescribeInstanceTypeOfferings item (location type region) per offers.csv row of
an enabled region; one item per zone of the row's zones (location type
availability-zone).

On-demand prices (GetProducts): a type priced in us-east-1 by offers.csv is priced in every
region R that offers it at round(us-east-1 price x FACTOR(R), 6), where FACTOR(R) = 1 +
0.05 x the position of R in the order above (us-east-1 1.00, us-west-2 1.05, eu-west-1
1.10, af-south-1 1.15, ...). Other product variants (Windows, Dedicated tenancy, SQL Std
preinstalled, unused capacity reservations) are listed too, dearer: only the filters of a
correct query leave one entry per type. Each entry has a Reserved term that is cheaper and
must not be read as the on-demand price.

Launches (Launchables, read without building the rest): each type's architecture (a type
types.csv does not have is x86_64), the zones where a region offers a type (offers.csv
order) and a region's zones (every zone of its offers, sorted).

Spot prices (DescribeSpotPriceHistory): for a priced offer whose zones are z0..z(n-1)
(offers.csv order), the latest Linux/UNIX price of zone zi is
round(0.3 x on-demand x (1 + 0.01 x (n-1-i)), 6), so the lowest latest price, the offer's
spot price, is round(0.3 x on-demand, 6), in the last zone. Zone z0 also has an older
entry a day before, at round(0.1 x on-demand, 6), and every zone a "Windows" entry newer
than the Linux one at 0.6 x on-demand: neither may be taken for the spot price.
"""

import csv
import datetime
import json
import os
import threading
import zlib
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', '..', 'catalog', 'data')
FIRST_REGIONS = ('us-east-1', 'us-west-2', 'eu-west-1')
PRICE_REGION = 'us-east-1'
MIB = 1 << 20
GIB = 1 << 30

# The type new to the hierarchy (its accelerator "GB300" has no platform type yet).
NEW_TYPE = 'p6e-gb300.36xlarge'
NEW_TYPE_ROW = {
    'instance_type': NEW_TYPE, 'vcpus': '144', 'memory_bytes': str(960 * GIB),
    'accelerator_count': '4', 'accelerator_type': 'GPU', 'accelerator_manufacturer': 'NVIDIA',
    'accelerator': 'GB300', 'accelerator_memory_bytes': str(279 * GIB),
    'processor_manufacturer': 'NVIDIA', 'storage_type': 'StorageType_EC2_NVMeSSD',
    'storage_bytes': str(22500 * GIB), 'network_bits_per_s': '1600000000000',
    'architecture': 'arm64', 'accelerator_fraction': '1', 'network_up_to': '0',
}
NEW_TYPE_OFFERS = {'us-east-1': ['us-east-1a', 'us-east-1d'], 'us-west-2': ['us-west-2b']}
NEW_TYPE_PRICE = 120.0  # us-east-1, USD/hour

# Platform accelerator -> (the API's block, name, manufacturer).
ACCEL_API = {
    'AMDRadeon_PRO_V520': ('gpu', 'Radeon Pro V520', 'AMD'),
    'AWSInferentia': ('neuron', 'Inferentia', 'AWS'),
    'AWSInferentia2': ('neuron', 'Inferentia2', 'AWS'),
    'AWSTrainium': ('neuron', 'Trainium', 'AWS'),
    'AWSTrainium2': ('neuron', 'Trainium2', 'AWS'),
    'HabanaGaudi': ('gpu', 'Gaudi HL-205', 'Habana'),
    'NVIDIATesla_T4': ('gpu', 'T4', 'NVIDIA'),
    'NVIDIATesla_V100': ('gpu', 'V100', 'NVIDIA'),
    'NVIDIA_A100': ('gpu', 'A100', 'NVIDIA'),
    'NVIDIA_A10G': ('gpu', 'A10G', 'NVIDIA'),
    'NVIDIA_B200': ('gpu', 'B200', 'NVIDIA'),
    'NVIDIA_B300': ('gpu', 'B300', 'NVIDIA'),
    'NVIDIA_H100': ('gpu', 'H100', 'NVIDIA'),
    'NVIDIA_H200': ('gpu', 'H200', 'NVIDIA'),
    'NVIDIA_L4': ('gpu', 'L4', 'NVIDIA'),
    'NVIDIA_L40S': ('gpu', 'L40S', 'NVIDIA'),
    'NVIDIA_RTXPRO6000': ('gpu', 'RTX PRO Server 6000', 'NVIDIA'),
    'QualcommCloudAI100': ('inference', 'Qualcomm AI100', 'Qualcomm'),
    'GB300': ('gpu', 'GB300', 'NVIDIA'),
}
# Accelerators whose memory the API gives as whole decimal GB in MiB.
DECIMAL_GB = ('NVIDIA_A10G', 'NVIDIA_L4', 'NVIDIA_L40S')


def to_xml(tag, value):
    """<tag>value</tag>: a dict's keys become elements, a list's entries <item>s."""
    if isinstance(value, dict):
        inner = ''.join(to_xml(k, v) for k, v in value.items() if v is not None)
    elif isinstance(value, list):
        inner = ''.join(to_xml('item', v) for v in value)
    else:
        inner = escape(str(value))
    return '<%s>%s</%s>' % (tag, inner, tag)


def iso(when):
    return when.strftime('%Y-%m-%dT%H:%M:%S.000Z')


def price_list_entry(name, attrs, price):
    """One PriceList string of GetProducts: the product and its terms."""
    sku = 'SKU%08X' % zlib.crc32(json.dumps([name, attrs], sort_keys=True).encode())
    od = {'%s.JRTCKXETXF' % sku: {
        'offerTermCode': 'JRTCKXETXF', 'sku': sku, 'effectiveDate': '2026-07-01T00:00:00Z',
        'priceDimensions': {'%s.JRTCKXETXF.6YS6EN2CT7' % sku: {
            'unit': 'Hrs', 'endRange': 'Inf', 'beginRange': '0', 'appliesTo': [],
            'rateCode': '%s.JRTCKXETXF.6YS6EN2CT7' % sku,
            'description': '$%s per On Demand %s %s Instance Hour'
                           % (price, attrs['operatingSystem'], name),
            'pricePerUnit': {'USD': '%.10f' % price}}},
        'termAttributes': {}}}
    reserved = {'%s.4NA7Y494T4' % sku: {
        'offerTermCode': '4NA7Y494T4', 'sku': sku, 'effectiveDate': '2026-07-01T00:00:00Z',
        'priceDimensions': {'%s.4NA7Y494T4.6YS6EN2CT7' % sku: {
            'unit': 'Hrs', 'endRange': 'Inf', 'beginRange': '0', 'appliesTo': [],
            'rateCode': '%s.4NA7Y494T4.6YS6EN2CT7' % sku, 'description': 'Reserved',
            'pricePerUnit': {'USD': '%.10f' % (price * 0.6)}}},
        'termAttributes': {'LeaseContractLength': '1yr', 'OfferingClass': 'standard',
                           'PurchaseOption': 'No Upfront'}}}
    product = {'productFamily': 'Compute Instance', 'sku': sku,
               'attributes': dict(attrs, servicecode='AmazonEC2', usagetype='BoxUsage:' + name,
                                  operation='RunInstances', vcpu='0')}
    return json.dumps({'product': product, 'serviceCode': 'AmazonEC2',
                       'terms': {'OnDemand': od, 'Reserved': reserved},
                       'version': '20260701000000', 'publicationDate': '2026-07-01T00:00:00Z'})


def region_order(rows):
    names = [r['region'] for r in rows if r['provider'] == 'ec2']
    return [r for r in FIRST_REGIONS if r in names] + [r for r in names
                                                        if r not in FIRST_REGIONS]


def gbps_text(bits):
    gbps = float(bits) / 1e9
    return ('%.6f' % gbps).rstrip('0').rstrip('.')


def accel_mib(row):
    """The per-device memory as the API gives it."""
    if not row['accelerator_memory_bytes']:
        return None
    b = int(row['accelerator_memory_bytes'])
    if row['accelerator'] in DECIMAL_GB and b % GIB == 0:
        return (b // GIB) * 10**9 // MIB
    return b // MIB


def type_shape(row):
    """One DescribeInstanceTypes item (nested dicts and lists; lists become <item>s)."""
    name = row['instance_type']
    arch = row['architecture']
    item = {
        'instanceType': name,
        'currentGeneration': 'true',
        'bareMetal': 'true' if 'metal' in name else 'false',
        'processorInfo': {'supportedArchitectures': [arch],
                          'manufacturer': row['processor_manufacturer']},
        'vCpuInfo': {'defaultVCpus': int(row['vcpus'])},
        'memoryInfo': {'sizeInMiB': int(row['memory_bytes']) // MIB},
        'instanceStorageSupported': 'false',
        'supportedUsageClasses': ['on-demand', 'spot'],
    }
    st = row['storage_type']
    if st and st != 'StorageType_EC2_EBSOnly':
        total = int(row['storage_bytes']) // GIB if row['storage_bytes'] else 0
        item['instanceStorageSupported'] = 'true'
        item['instanceStorageInfo'] = {
            'totalSizeInGB': total,
            'disks': [{'sizeInGB': total, 'count': 1,
                       'type': 'hdd' if st == 'StorageType_HDD' else 'ssd'}],
            'nvmeSupport': 'required' if st == 'StorageType_EC2_NVMeSSD' else 'unsupported',
        }
    if row['network_bits_per_s']:
        bits = float(row['network_bits_per_s'])
        up_to = row['network_up_to'] == '1'
        net = {'maximumNetworkInterfaces': 4}
        if up_to and bits < 10e9 and bits % 1e9:
            net['networkPerformance'] = 'Low to Moderate'
            net['networkCards'] = [{'networkCardIndex': 0,
                                    'networkPerformance': 'Low to Moderate',
                                    'peakBandwidthInGbps': gbps_text(bits)}]
        else:
            net['networkPerformance'] = ('Up to %s Gigabit' if up_to else '%s Gigabit') \
                % gbps_text(bits)
        item['networkInfo'] = net
    count = int(row['accelerator_count'] or 0)
    if count:
        accel_shape(row, item, count)
    return item


def accel_shape(row, item, count):
    acc, maker, mib = row['accelerator'], row['accelerator_manufacturer'], accel_mib(row)
    if acc in ACCEL_API:
        block, api_name, maker = ACCEL_API[acc]
    elif row['accelerator_type'] == 'FPGA':
        block, api_name = 'fpga', 'VU47P'
    else:
        block, api_name = 'media', 'U30'
    mem = {'sizeInMiB': mib} if mib is not None else None
    if block == 'gpu':
        gpu = {'name': api_name, 'manufacturer': maker, 'count': count}
        frac = float(row['accelerator_fraction'] or 1)
        if frac < 1:
            gpu.update(count=0, logicalGpuCount=1, gpuPartitionSize=row['accelerator_fraction'])
        if mem:
            gpu['memoryInfo'] = mem
        item['gpuInfo'] = {'gpus': [gpu], 'totalGpuMemoryInMiB': (mib or 0) * count}
    elif block == 'neuron':
        version = int(row['accelerator_architecture'].rsplit('_v', 1)[1])
        item['neuronInfo'] = {
            'neuronDevices': [{'count': count, 'name': api_name,
                               'coreInfo': {'count': 2, 'version': version},
                               'memoryInfo': mem}],
            'totalNeuronDeviceMemoryInMiB': (mib or 0) * count}
    else:
        key, lst, total = {'inference': ('inferenceAcceleratorInfo', 'accelerators',
                                         'totalInferenceMemoryInMiB'),
                           'fpga': ('fpgaInfo', 'fpgas', 'totalFpgaMemoryInMiB'),
                           'media': ('mediaAcceleratorInfo', 'accelerators',
                                     'totalMediaMemoryInMiB')}[block]
        entry = {'count': count, 'name': api_name, 'manufacturer': maker}
        if mem:
            entry['memoryInfo'] = mem
        item[key] = {lst: [entry], total: (mib or 0) * count}


def seed_mistakes(types):
    """The API's known mistakes, as the refresh must correct them."""
    gpu = types['p5.4xlarge']['gpuInfo']['gpus'][0]
    gpu['count'] = 0
    types['p5.4xlarge']['gpuInfo']['totalGpuMemoryInMiB'] = 0
    types['p5en.48xlarge']['gpuInfo']['gpus'][0]['name'] = 'NVIDIA'
    for t in types.values():
        for dev in t.get('neuronInfo', {}).get('neuronDevices', []):
            if dev['name'] == 'Trainium2':
                dev['memoryInfo'] = {'sizeInMiB': 524288}
                t['neuronInfo']['totalNeuronDeviceMemoryInMiB'] = 524288 * dev['count']


def ec2_rows(name, data=DATA):
    """The ec2 rows of one CSV file of catalog/data."""
    with open(os.path.join(data, name)) as f:
        return [r for r in csv.DictReader(f) if r['provider'] == 'ec2']


class Launchables:
    """What RunInstances needs of the catalog, cheap to read (the full Catalog is built
    only for the catalog calls): each type's architecture (types.csv; a type it does not
    know is x86_64) and the zones of each region (offers.csv, in its order)."""

    def __init__(self, data=DATA):
        self.arch = {r['instance_type']: r['architecture'] for r in ec2_rows('types.csv', data)}
        self.arch[NEW_TYPE] = NEW_TYPE_ROW['architecture']
        self.type_zones_of = {}  # region -> {type: [zones]}
        for r in ec2_rows('offers.csv', data):
            self.type_zones_of.setdefault(r['region'], {})[r['instance_type']] = \
                r['zones'].split()
        for region, zones in NEW_TYPE_OFFERS.items():
            self.type_zones_of.setdefault(region, {})[NEW_TYPE] = list(zones)
        self.zones_of = {r: sorted({z for zs in d.values() for z in zs})
                         for r, d in self.type_zones_of.items()}

    def architecture(self, name):
        return self.arch.get(name, 'x86_64')

    def type_zones(self, region, name):
        """The zones where REGION offers type NAME, in offers.csv order ([]: none)."""
        return list(self.type_zones_of.get(region, {}).get(name, []))

    def zones(self, region):
        """The zones of REGION (a region the fixture does not know has REGION + a..c)."""
        return self.zones_of.get(region) or [region + s for s in 'abc']


def read_regions(data=DATA):
    """The fake's regions, in order."""
    with open(os.path.join(data, 'regions.csv')) as f:
        return region_order(list(csv.DictReader(f)))


class Catalog:
    """What the fake answers about types, offers and prices (read-only once built)."""

    def __init__(self, enabled=None, data=DATA, now=None):
        self.regions = read_regions(data)
        self.enabled = self.regions[:enabled] if enabled else list(self.regions)
        self.factor = {r: round(1 + 0.05 * k, 2) for k, r in enumerate(self.regions)}
        rows = ec2_rows('types.csv', data)
        rows.append(dict((k, '') for k in rows[0]) | NEW_TYPE_ROW)
        self.types = {r['instance_type']: type_shape(r) for r in rows}
        seed_mistakes(self.types)
        self.type_names = sorted(self.types)
        # region -> [(type, [zones], price or None)] in offers.csv order
        self.offers = {r: [] for r in self.regions}
        us_price = {}
        offer_rows = ec2_rows('offers.csv', data)
        for r in offer_rows:
            if r['region'] == PRICE_REGION and r['price_usd_hour']:
                us_price[r['instance_type']] = float(r['price_usd_hour'])
        us_price[NEW_TYPE] = NEW_TYPE_PRICE
        for r in offer_rows:
            if r['region'] in self.offers:
                self.offers[r['region']].append((r['instance_type'], r['zones'].split()))
        for region, zones in NEW_TYPE_OFFERS.items():
            self.offers[region].append((NEW_TYPE, zones))
        self.prices = {}  # (type, region) -> on-demand price
        for region, lst in self.offers.items():
            for name, _ in lst:
                if name in us_price:
                    self.prices[(name, region)] = round(us_price[name] * self.factor[region],
                                                        6)
        self.now = now or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self.spot = {r: self.spot_history(r) for r in self.enabled}
        self.type_xml = [(n, to_xml('item', self.types[n])) for n in self.type_names]
        self.cache = {}
        self.cache_lock = threading.Lock()

    def cached(self, key, make):
        """Answers rendered once (the fake serves many pages of them)."""
        with self.cache_lock:
            if key not in self.cache:
                self.cache[key] = make()
            return self.cache[key]

    def offering_items(self, region, location_type):
        """[(type, location, xml)] of DescribeInstanceTypeOfferings."""
        def make():
            pairs = (self.region_offerings(region) if location_type == 'region'
                     else self.zone_offerings(region))
            return [(t, loc, to_xml('item', {'instanceType': t, 'locationType': location_type,
                                             'location': loc})) for t, loc in pairs]
        return self.cached(('offerings', region, location_type), make)

    def spot_items(self, region):
        """[(type, zone, product, xml)] of DescribeSpotPriceHistory."""
        def make():
            return [(t, z, p, to_xml('item', {'instanceType': t, 'productDescription': p,
                                              'spotPrice': '%.6f' % price,
                                              'timestamp': iso(when), 'availabilityZone': z}))
                    for t, z, p, when, price in self.spot.get(region, [])]
        return self.cached(('spot', region), make)

    def product_items(self, region):
        """[(attributes, PriceList string)] of GetProducts."""
        def make():
            return [(attrs, price_list_entry(t, attrs, price))
                    for t, attrs, price in self.products(region)]
        return self.cached(('products', region), make)

    def spot_history(self, region):
        """[(type, zone, product, timestamp, price)] of one region."""
        out = []
        for k, (name, zones) in enumerate(self.offers[region]):
            od = self.prices.get((name, region))
            if od is None:
                continue
            n = len(zones)
            for i, zone in enumerate(zones):
                latest = (name, zone, 'Linux/UNIX',
                          self.now - datetime.timedelta(minutes=i + 1),
                          round(0.3 * od * (1 + 0.01 * (n - 1 - i)), 6))
                entries = [latest]
                if i == 0:
                    older = (name, zone, 'Linux/UNIX', self.now - datetime.timedelta(days=1),
                             round(0.1 * od, 6))
                    entries = [latest, older] if k % 2 else [older, latest]
                entries.append((name, zone, 'Windows', self.now - datetime.timedelta(seconds=10),
                                round(0.6 * od, 6)))
                out.extend(entries)
        return out

    def spot_price(self, name, region):
        """The spot price a correct client derives for an offer (None: not priced)."""
        od = self.prices.get((name, region))
        return None if od is None else round(0.3 * od, 6)

    def region_offerings(self, region):
        return [(name, region) for name, _ in self.offers[region]]

    def zone_offerings(self, region):
        return [(name, z) for name, zones in self.offers[region] for z in zones]

    def products(self, region):
        """[(type, attributes, on-demand price)] of one region: every product variant."""
        out = []
        for name, _ in self.offers[region]:
            od = self.prices.get((name, region))
            if od is None:
                continue
            base = {'instanceType': name, 'regionCode': region, 'operatingSystem': 'Linux',
                    'tenancy': 'Shared', 'preInstalledSw': 'NA', 'capacitystatus': 'Used'}
            for change, price in (({}, od), ({'operatingSystem': 'Windows'}, od * 2),
                                  ({'tenancy': 'Dedicated'}, od * 1.1),
                                  ({'preInstalledSw': 'SQL Std'}, od + 1),
                                  ({'capacitystatus': 'UnusedCapacityReservation'}, od * 1.2)):
                out.append((name, dict(base, **change), round(price, 6)))
        return out
