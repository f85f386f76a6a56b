#!/usr/bin/python3
# tests/fakegce/fake_compute.py: a fake Google Compute Engine API (v1) in memory for the
# test suites: regions and zones, instances (bulkInsert, list, get, stop, start, delete,
# guest attributes), zone, region and global operations, firewalls, public image families
# and resource policies; each running instance a real sshd test host
# (tests/sshd/testhosts.bash). fake_gce.py serves it over HTTP.
"""A fake Compute Engine API, driven by ComputeAPI.handle (the HTTP server is elsewhere).

    api = ComputeAPI(dir, project, net='127.0.3', first=10, regions=None, base_url='')
    status, obj = api.handle('GET', '/projects/P/zones/Z/instances', {'filter': [...]}, b'')
    status, obj = api.control('POST', '/settings', b'{"op_ms": 100}')
    api.close()

Paths are those under /compute/v1; queries are parse_qs dicts; bodies JSON bytes. Every
answer is (HTTP status, JSON-able dict). Errors have GCE's shape: {"error": {"code",
"message", "errors": [{"message", "domain": "global", "reason"}], "status"}}.

Projects: PROJECT is the only one served; any other answers 403 forbidden ("Required
'compute.X' permission for 'projects/OTHER'"), except the public image projects
debian-cloud and ubuntu-os-cloud for images. A path the fake does not know: 404.

Calls served (the "template" each counts under in the state's "calls" in brackets):
    GET  regions/R [GET region], zones [GET zones], zones/Z [GET zone]
    POST zones/Z/instances/bulkInsert [POST bulkInsert]
    GET  zones/Z/instances [GET instances], aggregated/instances [GET aggregatedInstances]
    GET  zones/Z/instances/N [GET instance], DELETE ... [DELETE instance]
    POST zones/Z/instances/N/stop|start [POST stop | POST start]
    GET  zones/Z/instances/N/getGuestAttributes [GET getGuestAttributes]
    GET  zones/Z/operations [GET zoneOperations], zones/Z/operations/O [GET zoneOperation]
    POST zones/Z/operations/O/wait [POST zoneOperationWait]; the same for regions/R
         (regionOperation...) and global (globalOperation...)
    POST global/firewalls [POST firewalls], GET global/firewalls [GET firewalls],
         GET|DELETE global/firewalls/F [GET firewall | DELETE firewall]
    GET  global/images/family/F [GET imageFamily], global/images/I [GET image]
    POST regions/R/resourcePolicies [POST resourcePolicies],
         GET|DELETE regions/R/resourcePolicies/RP [GET resourcePolicy | DELETE ...],
         GET aggregated/resourcePolicies [GET aggregatedResourcePolicies]

Operations: each change answers an Operation (kind compute#operation) PENDING, RUNNING
once looked at, DONE op_ms (setting, default 300) after it was made and once what it
waits for is over (a stop: the sshd killed; a delete: the instance gone). wait returns
when it is DONE or after 2 s. A requestId (query) seen before in the project answers the
operation it made then, and nothing is done again.

bulkInsert: {count, minCount, namePattern (the run of #s is the number, zero-padded,
starting after the highest number an instance of the zone has under the pattern, else 1)
or perInstanceProperties {NAME: {}}, instanceProperties {machineType (a name of
MACHINE_TYPES), disks [{boot, initializeParams {sourceImage}}] (an image this fake knows,
of the machine type's architecture), networkInterfaces [{network|subnetwork,
accessConfigs [{type ONE_TO_ONE_NAT}]}], labels, tags {items}, metadata {items}
("ssh-keys": lines USER:KEY...), scheduling {provisioningModel, onHostMaintenance,
instanceTerminationAction}, guestAccelerators, resourcePolicies}}. Checked at once (400
invalid): the machine type, the image and its architecture, label keys and values, the
names (RFC 1035), resource policies (404). Capacity (setting): a list of {"zone",
"machine_type", "provisioning" ("*" by default; provisioning STANDARD|SPOT|*), "code"
(ZONE_RESOURCE_POOL_EXHAUSTED by default, QUOTA_EXCEEDED, UNSUPPORTED_OPERATION)}: a
matching bulkInsert launches nothing, its operation ends DONE with that error.

Instances: status PROVISIONING, STAGING, then RUNNING once its sshd listens and two
reads or op_ms have passed; stop: STOPPING then TERMINATED, its sshd killed; start:
STAGING then RUNNING on a new natIP (the host directory moved, same host key); delete:
STOPPING, then gone. An instance listens on NET.K:22 (K a slot from FIRST up, the
lowest never given out first), natIP NET.K when it has an access config; networkIP is
NET.K too while it has a slot (as the fake EC2's private address: a 10.x address is not
reachable from the tests, and reaching workers through the manager needs one), else
10.128.0.K of its first slot. Its sshd accepts the client key of DIR/testhosts (ssh -F
DIR/testhosts/ssh_config root@NATIP) and every key of its ssh-keys metadata, as root
only (the state records the user names the lines give).

Spot: scheduling.provisioningModel SPOT. /_fake/preempt takes instances back: STOPPING
at once (sshd killed), TERMINATED (instanceTerminationAction STOP, the default) or gone
(DELETE) op_ms/2 later; lastStopTimestamp set; a DONE zone operation of operationType
compute.instances.preempted with the instance as targetLink is listed by
zoneOperations.list (filter operationType="compute.instances.preempted").

Filters (instances, aggregatedList, operations, firewalls): terms FIELD OP VALUE joined
by AND or by spaces, each optionally in parentheses; FIELD a dotted path of the answer's
JSON (labels.KEY, name, status, operationType...); OP = (equal), != , : (with * as a
wildcard; "labels.k:*" is "has the label") or eq / ne (a regular expression over the
whole value); VALUE bare or in double quotes. OR is not supported (400). Lists page by
maxResults (default the page_size setting, 2) with nextPageToken / pageToken.

Guest attributes: getGuestAttributes?queryPath=hostkeys/ of a RUNNING instance gives
its sshd's host key (setting guest_hostkeys, default true); otherwise 404.

Faults (control POST /faults): a list of {"method" ("*"), "path_re" (a regular
expression searched in the path, ".*" by default), "status", "reason" (a GCE reason;
status and message have defaults per reason), "message", "count" (1; negative: for
ever), "skip", "delay_ms"}; a matching call is let through SKIP times, then answered
with the error, after DELAY_MS, before anything is done. A fault without a reason only
delays.

Control paths (without /_fake): GET /state, POST /settings {op_ms, page_size, capacity,
guest_hostkeys}, POST /preempt {"name", "zone"} or {"names": [...], "zone"} (the zone may
be left out when the name is unique), POST|DELETE /faults, POST /reset-calls.
"""

import base64
import contextlib
import datetime
import fnmatch
import json
import os
import queue
import random
import re
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import zlib

TESTHOSTS_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'sshd', 'testhosts.bash')
MAX_CONCURRENT_LAUNCHES = 8
DOWN_WORKERS = 8  # threads that kill the sshds of stopped and deleted instances
WAIT_S = 2.0  # operations.wait returns after this at the latest

DEFAULT_REGIONS = {
    'us-central1': ['us-central1-a', 'us-central1-b', 'us-central1-c', 'us-central1-f'],
    'europe-west4': ['europe-west4-a', 'europe-west4-b', 'europe-west4-c'],
}

# name -> (architecture, vCPUs, memory MB, accelerators)
MACHINE_TYPES = {
    'e2-small': ('X86_64', 2, 2048, []),
    'e2-medium': ('X86_64', 2, 4096, []),
    'e2-standard-2': ('X86_64', 2, 8192, []),
    'e2-standard-4': ('X86_64', 4, 16384, []),
    'n1-standard-4': ('X86_64', 4, 15360, []),
    'n2-standard-2': ('X86_64', 2, 8192, []),
    'n2-standard-8': ('X86_64', 8, 32768, []),
    'c3-standard-4': ('X86_64', 4, 16384, []),
    't2a-standard-2': ('ARM64', 2, 8192, []),
    't2a-standard-4': ('ARM64', 4, 16384, []),
    'g2-standard-4': ('X86_64', 4, 16384, [{'guestAcceleratorType': 'nvidia-l4',
                                            'guestAcceleratorCount': 1}]),
}

# (image project, family) -> (image name, architecture)
PUBLIC_IMAGES = {
    ('debian-cloud', 'debian-12'): ('debian-12-bookworm-v20241112', 'X86_64'),
    ('debian-cloud', 'debian-12-arm64'): ('debian-12-bookworm-arm64-v20241112', 'ARM64'),
    ('ubuntu-os-cloud', 'ubuntu-2404-lts-amd64'): (
        'ubuntu-2404-noble-amd64-v20241115', 'X86_64'),
    ('ubuntu-os-cloud', 'ubuntu-2404-lts-arm64'): (
        'ubuntu-2404-noble-arm64-v20241115', 'ARM64'),
}
IMAGE_PROJECTS = sorted({p for p, _ in PUBLIC_IMAGES})
IMAGE_CREATED = '2024-11-12T00:00:00.000-08:00'

STATUS_TEXT = {400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED',
               404: 'NOT_FOUND', 409: 'ALREADY_EXISTS', 412: 'FAILED_PRECONDITION',
               429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE'}
# reason -> (HTTP status, message) of the faults that name only a reason.
FAULT_DEFAULTS = {
    'rateLimitExceeded': (429, "Quota exceeded for quota metric 'Queries' and limit "
                               "'Queries per minute' of service 'compute.googleapis.com'."),
    'userRateLimitExceeded': (403, 'User Rate Limit Exceeded'),
    'backendError': (503, 'Internal error. Please try again or contact Google Support.'),
    'internalError': (500, 'Internal error. Please try again or contact Google Support.'),
    'forbidden': (403, 'Permission denied.'),
    'notFound': (404, 'The resource was not found'),
    'badRequest': (400, 'Bad request.'),
}
CAPACITY_CODES = ('ZONE_RESOURCE_POOL_EXHAUSTED', 'QUOTA_EXCEEDED', 'UNSUPPORTED_OPERATION')

NAME_RE = re.compile(r'[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?')
LABEL_KEY_RE = re.compile(r'[a-z][a-z0-9_-]{0,62}')
LABEL_VALUE_RE = re.compile(r'[a-z0-9_-]{0,63}')


class GceError(Exception):
    """A GCE error answer: its HTTP status and body (see error_body)."""

    def __init__(self, status, reason, message):
        super().__init__('%d %s: %s' % (status, reason, message))
        self.status = status
        self.answer = error_body(status, reason, message)


def error_body(status, reason, message):
    return {'error': {'code': status, 'message': message,
                      'errors': [{'message': message, 'domain': 'global', 'reason': reason}],
                      'status': STATUS_TEXT.get(status, 'UNKNOWN')}}


def invalid(message):
    return GceError(400, 'invalid', message)


def not_found(resource):
    return GceError(404, 'notFound', "The resource '%s' was not found" % resource)


def rfc3339(t=None):
    t = time.time() if t is None else t
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec='milliseconds')


def numeric_id():
    return str(random.randrange(10 ** 18, 10 ** 19))


def scoped_items(key, scopes):
    """An aggregated list's items: {scope: {KEY: [...]}} for each (scope, objects) of
    SCOPES, a scope without any on this page with Compute Engine's warning instead."""
    items = {}
    for scope, here in scopes:
        items[scope] = {key: here} if here else {
            'warning': {'code': 'NO_RESULTS_ON_PAGE',
                        'message': 'There are no results for scope \'%s\' on this page.'
                                   % scope,
                        'data': [{'key': 'scope', 'value': scope}]}}
    return items


def short_name(value):
    """The last path element of a URL or partial path ("zones/Z/machineTypes/T" -> T)."""
    return value.rstrip('/').rsplit('/', 1)[-1] if isinstance(value, str) else value


def lookup_path(obj, dotted):
    """The value at a dotted path of a JSON object, or None."""
    for part in dotted.split('.'):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            return None
    return obj


# ------------------------------------------------------------------ filters

TERM_RE = re.compile(r'\s*(\()?\s*([A-Za-z_][\w.\-]*)\s*(!=|=|:|\beq\b|\bne\b)\s*'
                     r'("(?:[^"\\]|\\.)*"|[^\s()"]+)\s*(\))?\s*')
AND_RE = re.compile(r'\s*\bAND\b\s*', re.IGNORECASE)


def parse_filter(text):
    """A filter expression -> [(field, op, value)]; raises GceError 400."""
    terms, pos, text = [], 0, (text or '').strip()
    while pos < len(text):
        if terms:
            m = AND_RE.match(text, pos)
            if m:
                pos = m.end()
        m = TERM_RE.match(text, pos)
        if not m or bool(m.group(1)) != bool(m.group(5)):
            raise invalid("Invalid value for field 'filter': '%s'. Invalid list filter "
                          "expression." % text)
        value = m.group(4)
        if value.startswith('"'):
            value = re.sub(r'\\(.)', r'\1', value[1:-1])
        terms.append((m.group(2), m.group(3), value))
        pos = m.end()
    return terms


def as_text(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def filter_match(obj, terms):
    for field, op, want in terms:
        have = as_text(lookup_path(obj, field))
        if op == '=':
            ok = have == want
        elif op == '!=':
            ok = have != want
        elif op == ':':
            ok = have is not None and fnmatch.fnmatchcase(have, want)
        else:
            try:
                ok = have is not None and re.fullmatch(want, have) is not None
            except re.error:
                raise invalid("Invalid value for field 'filter': bad regular expression "
                              "'%s'." % want)
            if op == 'ne':
                ok = not ok
        if not ok:
            return False
    return True


# ------------------------------------------------------------------ the model

class Instance:
    def __init__(self, name, zone, props, machine_type, image, request_id):
        self.name = name
        self.zone = zone
        self.region = zone.rsplit('-', 1)[0]
        self.id = numeric_id()
        self.machine_type = machine_type
        self.architecture = MACHINE_TYPES[machine_type][0]
        self.image = image                 # (project, name)
        self.props = props                 # the instanceProperties given
        self.labels = dict(props.get('labels') or {})
        self.tags = list((props.get('tags') or {}).get('items') or [])
        self.metadata = list((props.get('metadata') or {}).get('items') or [])
        sched = dict(props.get('scheduling') or {})
        self.provisioning = sched.get('provisioningModel', 'STANDARD')
        sched.setdefault('provisioningModel', self.provisioning)
        sched.setdefault('onHostMaintenance',
                         'TERMINATE' if self.provisioning == 'SPOT' else 'MIGRATE')
        sched.setdefault('automaticRestart', self.provisioning != 'SPOT')
        if self.provisioning == 'SPOT':
            sched.setdefault('instanceTerminationAction', 'STOP')
            sched['preemptible'] = False
        self.scheduling = sched
        self.request_id = request_id
        self.hostname = None               # perInstanceProperties' hostname
        self.key_lines, self.users = ssh_keys(self.metadata)
        nics = props.get('networkInterfaces') or [{}]
        self.nic = dict(nics[0])
        self.nat = any(a.get('type', 'ONE_TO_ONE_NAT') == 'ONE_TO_ONE_NAT'
                       for a in self.nic.get('accessConfigs') or [])
        self.policies = []                 # resource policy names (region's)
        self.status = 'PROVISIONING'
        self.status_message = None
        self.since = time.monotonic()      # when it entered its status
        self.polls = 0                     # reads seen in this status
        self.settle_at = None              # STOPPING -> settle_to after this, once down
        self.settle_to = None              # 'TERMINATED' or 'DELETED'
        self.created = rfc3339()
        self.last_start = self.created
        self.last_stop = None
        self.preempted = False
        self.slot = None                   # K of NET.K
        self.dir_slot = None               # K of the host directory it owns
        self.private_slot = None
        self.ready = False                 # its sshd listens
        self.down = True                   # its sshd is known dead
        self.sshd_pid = None
        self.generation = 0                # bumped by stop/delete/preempt
        self.ops_lock = threading.Lock()
        self.gone = False                  # deleted (kept by the operations only)


def ssh_keys(items):
    """The authorized_keys lines and user names of ssh-keys metadata."""
    lines, users = [], []
    for item in items:
        if item.get('key') not in ('ssh-keys', 'sshKeys'):
            continue
        for line in (item.get('value') or '').splitlines():
            line = line.strip()
            if not line or ':' not in line:
                continue
            user, key = line.split(':', 1)
            if not key.strip():
                continue
            lines.append(key.strip())
            if user not in users:
                users.append(user)
    return lines, users


class Operation:
    def __init__(self, scope, op_type, target_link, target_id, done_at, cond=None,
                 on_done=None):
        self.id = numeric_id()
        self.name = 'operation-%d-%s-%s-%s' % (
            int(time.time() * 1000), '%013x' % random.getrandbits(52),
            '%08x' % random.getrandbits(32), '%08x' % random.getrandbits(32))
        self.scope = scope                 # ('zones', Z) / ('regions', R) / ('global', None)
        self.type = op_type
        self.target_link = target_link
        self.target_id = target_id
        self.done_at = done_at
        self.cond = cond                   # more to wait for (under the lock)
        self.on_done = on_done             # run under the lock when it turns DONE
        self.status = 'PENDING'
        self.inserted = rfc3339()
        self.started = None
        self.ended = None
        self.error = None                  # [{code, message}]
        self.http_error = None             # (status, message)
        self.status_message = None
        self.metadata = None               # instancesBulkInsertOperationMetadata
        self.user = None                   # who made it (None: the project's account)


class Fault:
    """An injected failure or delay: a call whose method and path match is let through
    SKIP times, then answered COUNT times (negative: for ever) with the error REASON
    (HTTP STATUS, MESSAGE) after DELAY_MS, before it is carried out."""
    # field -> (type, default); status and message default by reason (FAULT_DEFAULTS)
    SPEC = {'method': (str, '*'), 'path_re': (str, '.*'), 'reason': (str, None),
            'status': (int, None), 'message': (str, None), 'count': (int, 1),
            'skip': (int, 0), 'delay_ms': (int, 0)}

    def __init__(self, spec):
        if not isinstance(spec, dict):
            raise ValueError('a fault is a JSON object')
        for field, value in spec.items():
            if field not in self.SPEC:
                raise ValueError('unknown fault field %r' % field)
            want = self.SPEC[field][0]
            if not isinstance(value, want) or isinstance(value, bool):
                raise ValueError('"%s" must be %s' % (field, 'a string' if want is str
                                                      else 'an integer'))
        f = {k: spec.get(k, d) for k, (_, d) in self.SPEC.items()}
        status, message = FAULT_DEFAULTS.get(f['reason'], (400, 'Injected fault.'))
        f['status'] = status if f['status'] is None else f['status']
        f['message'] = message if f['message'] is None else f['message']
        if f['reason'] is None and f['delay_ms'] <= 0:
            raise ValueError('a fault needs a "reason" or a "delay_ms"')
        try:
            self.regex = re.compile(f['path_re'])
        except re.error as e:
            raise ValueError('bad "path_re": %s' % e)
        self.fields = f
        self.method, self.reason, self.status = f['method'], f['reason'], f['status']
        self.message, self.skip, self.delay_ms = f['message'], f['skip'], f['delay_ms']
        self.remaining = f['count']

    def matches(self, method, path):
        return self.method in ('*', method) and self.regex.search(path) is not None

    def as_json(self):
        return dict(self.fields, count=self.remaining, skip=self.skip)


class HostPool:
    """The sshd test hosts of a directory (tests/sshd/testhosts.bash): host K listens on
    NET.K:22 and lives in DIR/hostK; K is a slot from FIRST up. Every daemon is started
    and stopped through the script's functions, which find them by pid."""

    def __init__(self, dir, net, first):
        self.dir = dir
        self.net = net
        self.first = first
        self.given = set()   # every slot handed out once
        os.makedirs(dir, exist_ok=True)
        left = sorted(n for n in os.listdir(dir) if re.fullmatch(r'host\d+', n))
        if left:  # an earlier run in this directory: its daemons go, their dirs aside
            self.call('testhosts_stop', dir)
            for n in left:
                self.retire(int(n[4:]), 'stale-' + n)
        done, why = self.call('testhosts_init', dir)
        if not done:
            raise RuntimeError('fake_compute: testhosts_init failed: ' + why)

    def call(self, function, *args):
        """One function of testhosts.bash: (succeeded, its stderr)."""
        proc = subprocess.run(
            ['bash', '-c', 'source "$0" && "$@"', TESTHOSTS_SCRIPT, function,
             *map(str, args)],
            env=dict(os.environ, TESTHOSTS_NET=self.net, TESTHOSTS_OWN_LOGIN='1'),
            stdin=subprocess.DEVNULL,
            capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write('fake_compute: %s %s: exit %d: %s\n' % (
                function, ' '.join(map(str, args)), proc.returncode, proc.stderr))
        return proc.returncode == 0, proc.stderr.strip()

    def path(self, slot):
        return os.path.join(self.dir, 'host%d' % slot)

    def address(self, slot):
        return None if slot is None else '%s.%d' % (self.net, slot)

    def has(self, slot):
        """Whether DIR/hostSLOT has been set up as a host."""
        return slot is not None and os.path.isfile(os.path.join(self.path(slot),
                                                                'sshd_config'))

    def pid(self, slot):
        try:
            with open(os.path.join(self.path(slot), 'sshd.pid')) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def in_use(self):
        """The slots of NET.K:22 a process listens on, whoever it is."""
        a, b, c = map(int, self.net.split('.'))
        tail = '%02X%02X%02X:0016' % (c, b, a)
        found = set()
        try:
            with open('/proc/net/tcp') as f:
                rows = [line.split() for line in f.readlines()[1:]]
        except OSError:
            return found
        for row in rows:
            if row[3] == '0A' and row[1].endswith(tail):
                found.add(int(row[1][:2], 16))
        return found

    def take(self, count, busy):
        """Up to COUNT slots that are not in BUSY, have no directory and nothing on their
        port: those never handed out first (a new instance gets a new address while there
        is one), then the lowest."""
        busy = set(busy) | self.in_use()
        fresh, reused = [], []
        for k in range(self.first, 255):
            if k in busy or os.path.exists(self.path(k)):
                continue
            (reused if k in self.given else fresh).append(k)
        chosen = (fresh + reused)[:count]
        self.given.update(chosen)
        return chosen

    def bring_up(self, old, new, key_lines):
        """The host of slot OLD moved to NEW (same host key and keys), or when OLD has no
        host a new one on NEW accepting KEY_LINES: (succeeded, error)."""
        try:
            if self.has(old):
                return self.call('testhosts_move', self.dir, old, new)
            os.makedirs(self.path(new), exist_ok=True)
            with open(os.path.join(self.path(new), 'authorized_keys'), 'w') as f:
                f.writelines(k + '\n' for k in key_lines)
            return self.call('testhosts_start', self.dir, 1, new)
        except OSError as e:
            return False, str(e)

    def kill(self, slot):
        """The host's sshd and every process under it, killed from here: spawning the
        script's bash per host costs most of a stop of 64 instances on 2 cores. The script
        is the fallback when the daemon's pid is not recorded."""
        if not self.has(slot):
            return
        pid = self.pid(slot)
        if pid is None or not is_sshd_of(pid, self.path(slot)) or not kill_tree(pid):
            self.call('testhosts_kill', self.dir, slot)
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.path(slot), 'sshd.pid'))

    def retire(self, slot, name):
        """DIR/hostSLOT, dead, moved to DIR/deleted/NAME (kept for its log)."""
        if slot is None or not os.path.isdir(self.path(slot)):
            return
        os.makedirs(os.path.join(self.dir, 'deleted'), exist_ok=True)
        n, dest = 1, os.path.join(self.dir, 'deleted', name)
        while os.path.exists(dest):
            n += 1
            dest = os.path.join(self.dir, 'deleted', '%s.%d' % (name, n))
        os.rename(self.path(slot), dest)

    def stop_all(self):
        self.call('testhosts_stop', self.dir)


# ------------------------------------------------------------------ routes

# METHOD path-under-/projects/{project} handler [template]; {x} is a path element.
ROUTE_TABLE = """
GET    regions/{region}                                  region_get
GET    zones                                             zones_list
GET    zones/{zone}                                      zone_get
POST   zones/{zone}/instances/bulkInsert                 bulk_insert      bulkInsert
GET    zones/{zone}/instances                            instances_list   instances
GET    aggregated/instances                              instances_aggregated aggregatedInstances
GET    zones/{zone}/instances/{name}                     instance_get     instance
DELETE zones/{zone}/instances/{name}                     instance_delete  instance
POST   zones/{zone}/instances/{name}/stop                instance_stop    stop
POST   zones/{zone}/instances/{name}/start               instance_start   start
GET    zones/{zone}/instances/{name}/getGuestAttributes  guest_attributes getGuestAttributes
GET    zones/{zone}/operations                           zone_ops_list    zoneOperations
GET    zones/{zone}/operations/{op}                      op_get           zoneOperation
POST   zones/{zone}/operations/{op}/wait                 op_wait          zoneOperationWait
GET    regions/{region}/operations/{op}                  op_get           regionOperation
POST   regions/{region}/operations/{op}/wait             op_wait          regionOperationWait
GET    global/operations/{op}                            op_get           globalOperation
POST   global/operations/{op}/wait                       op_wait          globalOperationWait
POST   global/firewalls                                  firewall_insert  firewalls
GET    global/firewalls                                  firewalls_list   firewalls
GET    global/firewalls/{name}                           firewall_get     firewall
DELETE global/firewalls/{name}                           firewall_delete  firewall
GET    global/images/family/{family}                     image_family     imageFamily
GET    global/images/{name}                              image_get        image
POST   regions/{region}/resourcePolicies                 policy_insert    resourcePolicies
GET    regions/{region}/resourcePolicies/{name}          policy_get       resourcePolicy
DELETE regions/{region}/resourcePolicies/{name}          policy_delete    resourcePolicy
GET    aggregated/resourcePolicies                       policies_aggregated aggregatedResourcePolicies
"""


def compile_routes(table):
    """[(method, regex, handler, template)]; the template is "METHOD NAME" (NAME the
    table's last word, else the path's last element)."""
    routes = []
    for line in table.strip().splitlines():
        words = line.split()
        method, path, handler = words[:3]
        name = words[3] if len(words) > 3 else path.rsplit('/', 1)[-1].strip('{}')
        regex = re.sub(r'\\{(\w+)\\}', r'(?P<\1>[^/]+)',
                       re.escape('/projects/{project}/' + path))
        routes.append((method, re.compile(regex), handler, '%s %s' % (method, name)))
    return routes


ROUTES = compile_routes(ROUTE_TABLE)
# The permission a call of another project lacks (403).
PERMISSIONS = {'GET': 'get', 'POST': 'create', 'DELETE': 'delete'}


class ComputeAPI:
    def __init__(self, dir, project, net='127.0.3', first=10, regions=None, base_url=''):
        """dir: the fake's directory (host dirs go to dir/testhosts); project: the only
        project id served; net: the /24 prefix of instance addresses (natIP = net.K);
        regions: {region: [zone, ...]} (default DEFAULT_REGIONS); base_url: the prefix of
        selfLinks (http://127.0.0.1:PORT/compute/v1)."""
        self.dir = os.path.abspath(dir)
        self.project = project
        self.net = net
        self.first = first
        self.base_url = base_url.rstrip('/')
        self.regions = {r: list(z) for r, z in (regions or DEFAULT_REGIONS).items()}
        self.zone_region = {z: r for r, zs in self.regions.items() for z in zs}
        self.lock = threading.Lock()
        self.instances = {}          # (zone, name) -> Instance (also while deleting)
        self.order = []              # Instances in launch order (the state's list)
        self.ops = {}                # name -> Operation
        self.open_ops = []           # the Operations not DONE yet (advance looks at these)
        self.request_ids = {}        # requestId -> operation name
        self.launches = {}           # requestId -> instances launched
        self.firewalls = {}          # name -> dict
        self.policies = {}           # (region, name) -> dict
        self.calls = {}
        self.faults = []
        self.settings = {'op_ms': 300, 'page_size': 2, 'capacity': [],
                         'guest_hostkeys': True}
        self.closing = False
        self.up_sem = threading.Semaphore(MAX_CONCURRENT_LAUNCHES)
        self.threads = []
        self.prune_at = 64           # len(threads) at which the ended ones are dropped
        self.hosts = HostPool(os.path.join(self.dir, 'testhosts'), net, first)
        # A stop, delete or preemption hands its sshd's kill to these threads, kept for
        # it: a thread started per call made the call wait until the new thread had
        # run, long when 64 calls at once are served by one interpreter.
        self.down_queue = queue.SimpleQueue()
        self.down_workers = [threading.Thread(target=self.down_worker, daemon=True,
                                              name='fake_compute down')
                             for _ in range(DOWN_WORKERS)]
        for t in self.down_workers:
            t.start()

    # ------------------------------------------------------------ links

    def link(self, *parts):
        return self.base_url + '/projects/' + '/'.join(str(p) for p in parts)

    def zone_link(self, zone):
        return self.link(self.project, 'zones', zone)

    def region_link(self, region):
        return self.link(self.project, 'regions', region)

    def instance_link(self, inst):
        return self.link(self.project, 'zones', inst.zone, 'instances', inst.name)

    def address(self, slot):
        return self.hosts.address(slot)

    # ------------------------------------------------------------ instances' sshds

    def run_job(self, fn, *args):
        """FN(*ARGS) in a thread of its own; close() waits for those still running."""
        def body():
            try:
                fn(*args)
            except Exception as e:  # a job that fails must not take the server down
                sys.stderr.write('fake_compute: %s: %r\n' % (fn.__name__, e))
        t = threading.Thread(target=body, daemon=True, name='fake_compute ' + fn.__name__)
        with self.lock:
            # Pruned when it has doubled, not at each job: 64 stops at once each went
            # through every thread of the others under the lock.
            if len(self.threads) >= self.prune_at:
                self.threads = [x for x in self.threads if x.is_alive()]
                self.prune_at = max(64, 2 * len(self.threads))
            self.threads.append(t)
        t.start()

    def up_job(self, inst, gen):
        """The instance's sshd up on its slot: its host directory moved there when it has
        one (same host key and keys), else a new host with its ssh-keys."""
        with self.up_sem, inst.ops_lock:
            with self.lock:
                if self.closing or inst.generation != gen:
                    return
                old, new = inst.dir_slot, inst.slot
            ok, err = self.hosts.bring_up(old, new, inst.key_lines)
            pid = self.hosts.pid(new)
            with self.lock:
                if ok or self.hosts.has(new):
                    inst.dir_slot = new
                inst.sshd_pid = pid
                if inst.generation != gen:
                    return  # stopped or deleted meanwhile: its stop job kills it
                if ok:
                    inst.ready, inst.down = True, False
                    return
                inst.generation += 1
                inst.status, inst.since = 'TERMINATED', time.monotonic()
                inst.status_message = 'sshd did not start: ' + err
            self.down(inst)

    def down(self, inst):
        """Kill the instance's sshd (its ops_lock held)."""
        with self.lock:
            slot = inst.dir_slot
        self.hosts.kill(slot)
        with self.lock:
            inst.down, inst.sshd_pid = True, None

    def down_worker(self):
        """Run the down jobs queued, until a None."""
        while True:
            job = self.down_queue.get()
            if job is None:
                return
            try:
                self.down_job(*job)
            except Exception as e:  # a job that fails must not take the server down
                sys.stderr.write('fake_compute: down_job: %r\n' % e)

    def down_later(self, inst, retire):
        """down_job(INST, RETIRE) on a down worker; returns at once."""
        self.down_queue.put((inst, retire))

    def down_job(self, inst, retire):
        """Stop, preemption or delete: the sshd killed; with RETIRE the host directory
        moved out of the way and the slots given back."""
        with inst.ops_lock:
            self.down(inst)
            if not retire:
                return
            with self.lock:
                slot = inst.dir_slot
            self.hosts.retire(slot, '%s-%s' % (inst.name, inst.id))
            with self.lock:
                inst.dir_slot = inst.slot = None

    def free_slots(self, count):
        """(lock held)"""
        busy = {k for i in self.order if not i.gone for k in (i.slot, i.dir_slot)}
        return self.hosts.take(count, busy)

    def close(self):
        """Stop every sshd this fake started (testhosts_stop: by pid)."""
        with self.lock:
            self.closing = True
            threads = list(self.threads)
        for _ in self.down_workers:
            self.down_queue.put(None)  # after the jobs queued: they are done first
        limit = time.monotonic() + 60
        for t in threads + self.down_workers:
            t.join(max(0.1, limit - time.monotonic()))
        self.hosts.stop_all()

    # ------------------------------------------------------------ time passing

    def advance(self):
        """The transitions due by now (lock held)."""
        now = time.monotonic()
        op_s = self.settings['op_ms'] / 1000.0
        for inst in self.order:
            if inst.gone:
                continue
            if inst.status == 'PROVISIONING' and (inst.polls >= 1 or
                                                  now - inst.since >= op_s / 3):
                inst.status, inst.since, inst.polls = 'STAGING', now, 0
            elif inst.status == 'STAGING' and inst.ready and (
                    inst.polls >= 2 or now - inst.since >= op_s * 2 / 3):
                inst.status, inst.since, inst.polls = 'RUNNING', now, 0
            elif inst.status == 'STOPPING' and inst.down and inst.settle_at is not None \
                    and now >= inst.settle_at:
                if inst.settle_to == 'DELETED':
                    self.remove(inst)
                else:
                    inst.status, inst.since, inst.polls = 'TERMINATED', now, 0
                    inst.last_stop = rfc3339()
                inst.settle_at = inst.settle_to = None
        # Only the open ones: a call went through every operation ever made, under
        # the lock every call takes.
        ops, self.open_ops = self.open_ops, []
        for op in ops:
            if op.status == 'DONE':
                continue
            if now >= op.done_at and (op.cond is None or op.cond()):
                if op.on_done is not None:
                    op.on_done(op)
                op.status = 'DONE'
                op.started = op.started or op.inserted
                op.ended = rfc3339()
                continue
            if op.status == 'PENDING':
                op.status = 'RUNNING'
                op.started = rfc3339()
            self.open_ops.append(op)

    def remove(self, inst):
        inst.gone = True
        inst.status = 'DELETED'
        self.instances.pop((inst.zone, inst.name), None)

    def settle(self, inst, to, after_s):
        inst.status, inst.since, inst.polls = 'STOPPING', time.monotonic(), 0
        inst.settle_to = to
        inst.settle_at = time.monotonic() + after_s
        inst.generation += 1
        inst.ready = False
        inst.down = False  # until the stop job has killed its sshd

    # ------------------------------------------------------------ request handling

    def count_call(self, template):
        with self.lock:
            self.calls[template] = self.calls.get(template, 0) + 1

    def take_fault(self, method, path):
        """The fault this call meets, if any: every matching fault still skipping lets
        it through once more; the first that is not answers it (one of its count used)."""
        with self.lock:
            hit = None
            for f in (f for f in self.faults if f.remaining and f.matches(method, path)):
                if f.skip:
                    f.skip -= 1
                elif hit is None:
                    hit = f
                    f.remaining -= 1 if f.remaining > 0 else 0
            return hit

    def handle(self, method, path, query, body):
        """One API call: (HTTP status, JSON-able dict)."""
        method = method.upper()
        path = urllib.parse.unquote(path.split('?', 1)[0]).rstrip('/') or '/'
        if path.startswith('/compute/v1/'):
            path = path[len('/compute/v1'):]
        query = query or {}
        for m, regex, handler, template in ROUTES:
            match = regex.fullmatch(path)
            if match and m == method:
                break
        else:
            known = any(r.fullmatch(path) for _, r, _, _ in ROUTES)
            if known:
                return 405, error_body(405, 'httpMethodNotAllowed',
                                       'Method %s is not allowed for %s' % (method, path))
            return 404, error_body(404, 'notFound', 'The requested URL %s was not found '
                                   'on this server.' % path)
        self.count_call(template)
        fault = self.take_fault(method, path)
        if fault is not None:
            if fault.delay_ms > 0:
                time.sleep(fault.delay_ms / 1000.0)
            if fault.reason is not None:
                return fault.status, error_body(fault.status, fault.reason, fault.message)
        args = match.groupdict()
        try:
            project = args.pop('project')
            images = handler in ('image_family', 'image_get')
            if project != self.project and not (images and project in IMAGE_PROJECTS):
                what = template.split()[-1]
                raise GceError(403, 'forbidden', "Required 'compute.%s.%s' permission for "
                               "'projects/%s'" % (what, PERMISSIONS[method], project))
            if body:
                try:
                    data = json.loads(body.decode('utf-8') if isinstance(body, bytes)
                                      else body)
                except (UnicodeDecodeError, ValueError) as e:
                    raise GceError(400, 'parseError', 'Invalid JSON payload received. %s'
                                   % e)
            else:
                data = None
            if method == 'POST' and data is not None and not isinstance(data, dict):
                raise GceError(400, 'parseError', 'Invalid JSON payload received: '
                               'expected an object.')
            q = {k: v[-1] if isinstance(v, list) else v for k, v in query.items()}
            if images:
                args['image_project'] = project
            return getattr(self, handler)(q=q, data=data or {}, **args)
        except GceError as e:
            return e.status, e.answer

    # ------------------------------------------------------------ checks

    def check_zone(self, zone):
        if zone not in self.zone_region:
            raise not_found('projects/%s/zones/%s' % (self.project, zone))
        return self.zone_region[zone]

    def check_region(self, region):
        if region not in self.regions:
            raise not_found('projects/%s/regions/%s' % (self.project, region))

    def find_instance(self, zone, name):
        """(lock held)"""
        self.check_zone(zone)
        inst = self.instances.get((zone, name))
        if inst is None or inst.gone:
            raise not_found('projects/%s/zones/%s/instances/%s' % (self.project, zone, name))
        return inst

    def page(self, items, q, key='items'):
        """(page of items, extra fields) by maxResults and pageToken."""
        size = self.settings['page_size']
        if q.get('maxResults') not in (None, ''):
            try:
                size = int(q['maxResults'])
            except ValueError:
                raise invalid("Invalid value for field 'maxResults': '%s'."
                              % q['maxResults'])
            if not 0 <= size <= 500:
                raise invalid("Invalid value for field 'maxResults': '%d'. Must be in the "
                              "range [0, 500]." % size)
            size = size or 500
        start = 0
        if q.get('pageToken'):
            try:
                start = int(base64.urlsafe_b64decode(q['pageToken'].encode()).decode()
                            .split(':', 1)[1])
            except (ValueError, IndexError, UnicodeDecodeError):
                raise invalid("Invalid value for field 'pageToken': '%s'." % q['pageToken'])
        out = {}
        if start + size < len(items):
            out['nextPageToken'] = base64.urlsafe_b64encode(
                ('offset:%d' % (start + size)).encode()).decode()
        return items[start:start + size], out

    # ------------------------------------------------------------ regions and zones

    def region_json(self, region):
        return {'kind': 'compute#region', 'id': str(1000 + sorted(self.regions).index(region)),
                'name': region, 'description': region, 'status': 'UP',
                'creationTimestamp': IMAGE_CREATED,
                'zones': [self.zone_link(z) for z in self.regions[region]],
                'quotas': [{'metric': 'CPUS', 'limit': 1000.0, 'usage': 0.0}],
                'selfLink': self.region_link(region)}

    def zone_json(self, zone):
        return {'kind': 'compute#zone', 'id': str(2000 + sorted(self.zone_region).index(zone)),
                'name': zone, 'description': zone, 'status': 'UP',
                'region': self.region_link(self.zone_region[zone]),
                'creationTimestamp': IMAGE_CREATED,
                'availableCpuPlatforms': ['Intel Cascade Lake', 'AMD Milan', 'Ampere Altra'],
                'selfLink': self.zone_link(zone)}

    def region_get(self, q, data, region):
        self.check_region(region)
        return 200, self.region_json(region)

    def zone_get(self, q, data, zone):
        self.check_zone(zone)
        return 200, self.zone_json(zone)

    def zones_list(self, q, data):
        terms = parse_filter(q.get('filter'))
        with self.lock:
            items = [self.zone_json(z) for z in sorted(self.zone_region)]
            items = [i for i in items if filter_match(i, terms)]
            items, extra = self.page(items, q)
        return 200, dict({'kind': 'compute#zoneList', 'id': 'projects/%s/zones' % self.project,
                          'items': items, 'selfLink': self.link(self.project, 'zones')},
                         **extra)

    # ------------------------------------------------------------ images

    def image_json(self, project, family):
        name, arch = PUBLIC_IMAGES[(project, family)]
        return {'kind': 'compute#image', 'id': str(zlib.crc32(name.encode()) * 1000003),
                'name': name, 'family': family, 'architecture': arch, 'status': 'READY',
                'creationTimestamp': IMAGE_CREATED, 'sourceType': 'RAW',
                'diskSizeGb': '10', 'archiveSizeBytes': '1000000000',
                'licenses': [self.link(project, 'global', 'licenses', family)],
                'selfLink': self.link(project, 'global', 'images', name)}

    def image_family(self, q, data, family, image_project):
        if (image_project, family) not in PUBLIC_IMAGES:
            raise not_found('projects/%s/global/images/family/%s' % (image_project, family))
        return 200, self.image_json(image_project, family)

    def image_get(self, q, data, name, image_project):
        for (project, family), (iname, _) in PUBLIC_IMAGES.items():
            if project == image_project and iname == name:
                return 200, self.image_json(project, family)
        raise not_found('projects/%s/global/images/%s' % (image_project, name))

    def resolve_image(self, source):
        """(project, name, architecture) of a sourceImage; raises GceError."""
        if not isinstance(source, str) or not source:
            raise invalid("Invalid value for field 'resource.instanceProperties.disks[0]."
                          "initializeParams.sourceImage': ''. Must be a valid image.")
        path = source.split('/compute/v1/', 1)[-1]
        m = re.fullmatch(r'(?:projects/([^/]+)/)?global/images/(family/)?([^/]+)', path)
        if not m:
            raise invalid("Invalid value for field 'resource.instanceProperties.disks[0]."
                          "initializeParams.sourceImage': '%s'. The URL is malformed."
                          % source)
        project = m.group(1) or self.project
        for (p, family), (name, arch) in PUBLIC_IMAGES.items():
            if p == project and (family if m.group(2) else name) == m.group(3):
                return p, name, arch
        raise not_found('projects/%s/global/images/%s%s' % (project, m.group(2) or '',
                                                            m.group(3)))

    # ------------------------------------------------------------ instances

    def internal(self, inst):
        """The instance's networkIP (lock held)."""
        if inst.slot is not None and not inst.gone:
            return self.address(inst.slot)
        return '10.128.0.%d' % inst.private_slot

    def instance_json(self, inst):
        mt = self.link(self.project, 'zones', inst.zone, 'machineTypes', inst.machine_type)
        nic = {'kind': 'compute#networkInterface', 'name': 'nic0',
               'network': self.link(self.project, 'global', 'networks',
                                    short_name(inst.nic.get('network') or 'default')),
               'subnetwork': self.link(self.project, 'regions', inst.region, 'subnetworks',
                                       short_name(inst.nic.get('subnetwork') or 'default')),
               'networkIP': self.internal(inst), 'stackType': 'IPV4_ONLY',
               'fingerprint': 'AAAAAAAAAAA='}
        if inst.nat:
            ac = {'kind': 'compute#accessConfig', 'type': 'ONE_TO_ONE_NAT',
                  'name': 'External NAT', 'networkTier': 'PREMIUM'}
            if inst.status in ('STAGING', 'RUNNING', 'STOPPING') and inst.slot is not None:
                ac['natIP'] = self.address(inst.slot)
            nic['accessConfigs'] = [ac]
        image_project, image_name = inst.image
        out = {
            'kind': 'compute#instance', 'id': inst.id, 'name': inst.name,
            'creationTimestamp': inst.created, 'zone': self.zone_link(inst.zone),
            'machineType': mt, 'status': inst.status, 'cpuPlatform': 'Unknown CPU Platform',
            'canIpForward': False, 'networkInterfaces': [nic],
            'disks': [{'kind': 'compute#attachedDisk', 'type': 'PERSISTENT',
                       'mode': 'READ_WRITE', 'boot': True, 'autoDelete': True,
                       'index': 0, 'deviceName': 'persistent-disk-0', 'interface': 'SCSI',
                       'architecture': inst.architecture, 'diskSizeGb': '10',
                       'source': self.link(self.project, 'zones', inst.zone, 'disks',
                                           inst.name),
                       'licenses': [self.link(image_project, 'global', 'licenses',
                                              image_name)]}],
            'metadata': {'kind': 'compute#metadata', 'fingerprint': 'AAAAAAAAAAA=',
                         'items': [dict(i) for i in inst.metadata]},
            'tags': {'items': list(inst.tags), 'fingerprint': 'AAAAAAAAAAA='},
            'labels': dict(inst.labels), 'labelFingerprint': 'AAAAAAAAAAA=',
            'scheduling': dict(inst.scheduling),
            'lastStartTimestamp': inst.last_start,
            'selfLink': self.instance_link(inst),
            'fingerprint': 'AAAAAAAAAAA=', 'startRestricted': False,
            'deletionProtection': False,
        }
        if inst.status_message:
            out['statusMessage'] = inst.status_message
        if inst.hostname:
            out['hostname'] = inst.hostname
        if inst.last_stop:
            out['lastStopTimestamp'] = inst.last_stop
        if inst.policies:
            out['resourcePolicies'] = [self.link(self.project, 'regions', inst.region,
                                                 'resourcePolicies', p)
                                       for p in inst.policies]
        accels = inst.props.get('guestAccelerators') or MACHINE_TYPES[inst.machine_type][3]
        if accels:
            out['guestAccelerators'] = [
                {'acceleratorType': self.link(self.project, 'zones', inst.zone,
                                              'acceleratorTypes',
                                              short_name(a.get('acceleratorType') or
                                                         a.get('guestAcceleratorType'))),
                 'acceleratorCount': a.get('acceleratorCount') or
                 a.get('guestAcceleratorCount') or 1} for a in accels]
        return out

    def check_props(self, props, zone, names):
        """(machine type, (image project, name), policies) of instanceProperties."""
        if not isinstance(props, dict):
            raise invalid("Invalid value for field 'resource.instanceProperties'.")
        mt = short_name(props.get('machineType'))
        if mt not in MACHINE_TYPES:
            raise invalid("Invalid value for field 'resource.instanceProperties.machineType':"
                          " '%s'. Machine type with name '%s' does not exist in zone '%s'."
                          % (props.get('machineType'), mt, zone))
        disks = props.get('disks') or []
        boot = [d for d in disks if isinstance(d, dict) and d.get('boot')] or disks[:1]
        if not boot:
            raise invalid("Invalid value for field 'resource.instanceProperties.disks': ''. "
                          "Boot disk must be specified.")
        source = (boot[0].get('initializeParams') or {}).get('sourceImage')
        project, image, arch = self.resolve_image(source)
        if arch != MACHINE_TYPES[mt][0]:
            raise GceError(400, 'badRequest',
                           "Requested boot disk architecture (%s) is not compatible with "
                           "machine type architecture (%s)." % (arch, MACHINE_TYPES[mt][0]))
        labels = props.get('labels') or {}
        if not isinstance(labels, dict):
            raise invalid("Invalid value for field 'resource.instanceProperties.labels'.")
        rules = (('key', LABEL_KEY_RE, 'must start with a lowercase character, can only '
                  'contain lowercase letters, numeric characters, underscores and dashes. '
                  'The key'),
                 ('value', LABEL_VALUE_RE, 'can only contain lowercase letters, numeric '
                  'characters, underscores and dashes. The value'))
        for pair in labels.items():
            for text, (what, regex, rule) in zip(pair, rules):
                if not isinstance(text, str) or not regex.fullmatch(text):
                    raise invalid("Invalid value for field 'resource.instanceProperties."
                                  "labels': '%s'. Label %s '%s' violates format constraints."
                                  " The %s %s can be at most 63 characters long. "
                                  "International characters are allowed."
                                  % (text, what, text, what, rule))
        for name in names:
            if not NAME_RE.fullmatch(name):
                raise invalid("Invalid value for field 'resource.name': '%s'. Must be a "
                              "match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
                              % name)
        sched = props.get('scheduling') or {}
        model = sched.get('provisioningModel', 'STANDARD')
        if model not in ('STANDARD', 'SPOT'):
            raise invalid("Invalid value for field 'resource.instanceProperties.scheduling."
                          "provisioningModel': '%s'." % model)
        action = sched.get('instanceTerminationAction')
        if action is not None and action not in ('STOP', 'DELETE'):
            raise invalid("Invalid value for field 'resource.instanceProperties.scheduling."
                          "instanceTerminationAction': '%s'." % action)
        region = self.zone_region[zone]
        policies = []
        for p in props.get('resourcePolicies') or []:
            pname = short_name(p)
            if (region, pname) not in self.policies:
                raise not_found('projects/%s/regions/%s/resourcePolicies/%s'
                                % (self.project, region, pname))
            policies.append(pname)
        return mt, (project, image), policies

    def pattern_names(self, pattern, count, zone):
        m = re.fullmatch(r'([^#]*)(#+)([^#]*)', pattern or '')
        if not m:
            raise invalid("Invalid value for field 'resource.namePattern': '%s'. The name "
                          "pattern must contain one sequence of '#' characters." % pattern)
        head, hashes, tail = m.groups()
        width = len(hashes)
        taken = re.compile(re.escape(head) + r'(\d{%d,})' % width + re.escape(tail))
        top = 0
        for (z, name), inst in self.instances.items():
            mm = taken.fullmatch(name)
            if z == zone and mm and not inst.gone:
                top = max(top, int(mm.group(1)))
        return ['%s%0*d%s' % (head, width, top + n, tail) for n in range(1, count + 1)]

    def capacity_code(self, zone, mt, model):
        for e in self.settings['capacity']:
            if e.get('zone', '*') in ('*', zone) and \
                    e.get('machine_type', '*') in ('*', mt) and \
                    e.get('provisioning', '*') in ('*', model):
                return e.get('code', 'ZONE_RESOURCE_POOL_EXHAUSTED')
        return None

    def new_op(self, scope, op_type, target_link, target_id, delay_s=None, cond=None,
               on_done=None, request_id=None):
        """(lock held)"""
        delay = self.settings['op_ms'] / 1000.0 if delay_s is None else delay_s
        op = Operation(scope, op_type, target_link, target_id, time.monotonic() + delay,
                       cond, on_done)
        self.ops[op.name] = op
        self.open_ops.append(op)
        if request_id:
            self.request_ids[request_id] = op.name
        return op

    def op_json(self, op):
        kind, where = op.scope
        if kind == 'global':
            link = self.link(self.project, 'global', 'operations', op.name)
        else:
            link = self.link(self.project, kind, where, 'operations', op.name)
        out = {'kind': 'compute#operation', 'id': op.id, 'name': op.name,
               'operationType': op.type, 'targetLink': op.target_link,
               'targetId': op.target_id, 'status': op.status,
               'user': op.user or 'cclfs@%s.iam.gserviceaccount.com' % self.project,
               'progress': 100 if op.status == 'DONE' else 0,
               'insertTime': op.inserted, 'selfLink': link}
        if kind == 'zones':
            out['zone'] = self.zone_link(where)
        elif kind == 'regions':
            out['region'] = self.region_link(where)
        if op.started:
            out['startTime'] = op.started
        if op.status == 'DONE':
            out['endTime'] = op.ended
            if op.error:
                out['error'] = {'errors': [dict(e) for e in op.error]}
                out['httpErrorStatusCode'] = op.http_error[0]
                out['httpErrorMessage'] = op.http_error[1]
        if op.status_message:
            out['statusMessage'] = op.status_message
        if op.metadata:
            out['instancesBulkInsertOperationMetadata'] = json.loads(json.dumps(op.metadata))
        return out

    def repeated(self, q):
        """The operation a requestId made before, as an answer, or None (lock held)."""
        rid = q.get('requestId')
        if rid and rid in self.request_ids:
            self.advance()
            return 200, self.op_json(self.ops[self.request_ids[rid]])
        return None

    def bulk_insert(self, q, data, zone):
        self.check_zone(zone)
        region = self.zone_region[zone]
        rid = q.get('requestId')
        launched = []
        with self.lock:
            again = self.repeated(q)
            if again:
                return again
            try:
                count = int(data.get('count', 0))
                min_count = int(data.get('minCount', count))
            except (TypeError, ValueError):
                raise invalid("Invalid value for field 'resource.count'.")
            per = data.get('perInstanceProperties') or {}
            if per:
                names = list(per)
                count = count or len(names)
                if count != len(names):
                    raise invalid("Invalid value for field 'resource.count': '%d'. The count "
                                  "must equal the number of perInstanceProperties." % count)
            else:
                if count < 1 or count > 1000:
                    raise invalid("Invalid value for field 'resource.count': '%d'. Must be "
                                  "in the range [1, 1000]." % count)
                if not 1 <= min_count <= count:
                    raise invalid("Invalid value for field 'resource.minCount': '%d'."
                                  % min_count)
                names = self.pattern_names(data.get('namePattern'), count, zone)
            props = data.get('instanceProperties')
            mt, image, policies = self.check_props(props, zone, names)
            for name in names:
                if (zone, name) in self.instances:
                    raise GceError(409, 'alreadyExists', "The resource 'projects/%s/zones/"
                                   "%s/instances/%s' already exists" % (self.project, zone,
                                                                        name))
            model = (props.get('scheduling') or {}).get('provisioningModel', 'STANDARD')
            target = self.link(self.project, 'zones', zone, 'instances', names[0])
            op = self.new_op(('zones', zone), 'bulkInsert', target, numeric_id(),
                             request_id=rid)
            loc = 'zones/' + zone
            status = {'targetVmCount': count, 'createdVmCount': 0, 'failedToCreateVmCount': 0,
                      'deletedVmCount': 0, 'status': 'FINISHED'}
            code = self.capacity_code(zone, mt, model)
            slots = [] if code else self.free_slots(count)
            if not code and len(slots) < min_count:
                code = 'ZONE_RESOURCE_POOL_EXHAUSTED'
            if code:
                op.error = [{'code': code, 'message': self.capacity_message(code, zone, mt,
                                                                            region)}]
                op.http_error = {'QUOTA_EXCEEDED': (403, 'FORBIDDEN'),
                                 'UNSUPPORTED_OPERATION': (400, 'BAD REQUEST')}.get(
                                     code, (503, 'SERVICE UNAVAILABLE'))
                status.update(failedToCreateVmCount=count, status='FAILED')
                op.metadata = {'perLocationStatus': {loc: status}}
                if rid:
                    self.launches[rid] = 0
                return 200, self.op_json(op)
            status['createdVmCount'] = len(slots)
            op.metadata = {'perLocationStatus': {loc: status}}
            for name, slot in zip(names, slots):
                p = dict(props)
                extra = per.get(name) or {}
                inst = Instance(name, zone, p, mt, image, rid)
                if extra.get('hostname'):
                    inst.hostname = extra['hostname']
                inst.policies = list(policies)
                inst.slot = inst.private_slot = slot
                self.instances[(zone, name)] = inst
                self.order.append(inst)
                launched.append((inst, inst.generation))
            if rid:
                self.launches[rid] = self.launches.get(rid, 0) + len(launched)
            answer = self.op_json(op)
        for inst, gen in launched:
            self.run_job(self.up_job, inst, gen)
        return 200, answer

    def capacity_message(self, code, zone, mt, region):
        if code == 'QUOTA_EXCEEDED':
            return ("Quota 'CPUS' exceeded.  Limit: 8.0 in region %s." % region)
        if code == 'UNSUPPORTED_OPERATION':
            return ("Machine type with name '%s' does not exist in zone '%s'." % (mt, zone))
        return ("The zone 'projects/%s/zones/%s' does not have enough resources available "
                "to fulfill the request.  Try a different zone, or try again later."
                % (self.project, zone))

    def read_instances(self, insts):
        for inst in insts:
            inst.polls += 1

    def instances_list(self, q, data, zone):
        self.check_zone(zone)
        terms = parse_filter(q.get('filter'))
        with self.lock:
            self.advance()
            insts = sorted((i for (z, _), i in self.instances.items()
                            if z == zone and not i.gone), key=lambda i: i.name)
            items = [self.instance_json(i) for i in insts]
            keep = [n for n, o in enumerate(items) if filter_match(o, terms)]
            self.read_instances(insts[n] for n in keep)
            items, extra = self.page([items[n] for n in keep], q)
        out = {'kind': 'compute#instanceList',
               'id': 'projects/%s/zones/%s/instances' % (self.project, zone),
               'items': items, 'selfLink': self.link(self.project, 'zones', zone, 'instances')}
        if not items:
            del out['items']
        return 200, dict(out, **extra)

    def instances_aggregated(self, q, data):
        terms = parse_filter(q.get('filter'))
        with self.lock:
            self.advance()
            insts = sorted((i for i in self.instances.values() if not i.gone),
                           key=lambda i: (i.zone, i.name))
            pairs = [(i, self.instance_json(i)) for i in insts]
            pairs = [(i, o) for i, o in pairs if filter_match(o, terms)]
            self.read_instances(i for i, _ in pairs)
            page, extra = self.page(pairs, q)
        items = scoped_items('instances', [('zones/' + z, [o for i, o in page if i.zone == z])
                                           for z in sorted(self.zone_region)])
        return 200, dict({'kind': 'compute#instanceAggregatedList',
                          'id': 'projects/%s/aggregated/instances' % self.project,
                          'items': items,
                          'selfLink': self.link(self.project, 'aggregated', 'instances')},
                         **extra)

    def instance_get(self, q, data, zone, name):
        with self.lock:
            self.advance()
            inst = self.find_instance(zone, name)
            inst.polls += 1
            return 200, self.instance_json(inst)

    def instance_change(self, q, zone, name, kind, change):
        """stop, start, delete: a requestId seen before answers its operation; else
        CHANGE(inst) (lock held) makes the changes and returns (cond of the operation,
        (function, args...) to call after, without the lock, or None)."""
        with self.lock:
            again = self.repeated(q)
            if again:
                return again
            self.advance()
            inst = self.find_instance(zone, name)
            cond, job = change(inst)
            op = self.new_op(('zones', zone), kind, self.instance_link(inst), inst.id,
                             cond=cond, request_id=q.get('requestId'))
            answer = self.op_json(op)
        if job:
            job[0](*job[1:])
        return 200, answer

    def instance_stop(self, q, data, zone, name):
        def change(inst):
            job = None
            if inst.status in ('PROVISIONING', 'STAGING', 'RUNNING', 'REPAIRING'):
                self.settle(inst, 'TERMINATED', self.settings['op_ms'] / 2000.0)
                job = (self.down_later, inst, False)
            return (lambda: inst.status == 'TERMINATED' or inst.gone), job
        return self.instance_change(q, zone, name, 'stop', change)

    def instance_start(self, q, data, zone, name):
        def change(inst):
            if inst.status == 'STOPPING':
                raise GceError(400, 'resourceNotReady', "The resource 'projects/%s/zones/%s/"
                               "instances/%s' is not ready" % (self.project, zone, name))
            if inst.status not in ('TERMINATED', 'SUSPENDED'):
                return None, None
            # A new external address while there is one (its own is still taken).
            inst.slot = (self.free_slots(1) or [inst.slot])[0]
            inst.status, inst.since, inst.polls = 'STAGING', time.monotonic(), 0
            inst.status_message, inst.preempted, inst.ready = None, False, False
            inst.last_start = rfc3339()
            inst.generation += 1
            return None, (self.run_job, self.up_job, inst, inst.generation)
        return self.instance_change(q, zone, name, 'start', change)

    def instance_delete(self, q, data, zone, name):
        def change(inst):
            self.settle(inst, 'DELETED', self.settings['op_ms'] / 2000.0)
            return (lambda: inst.gone), (self.down_later, inst, True)
        return self.instance_change(q, zone, name, 'delete', change)

    def guest_attributes(self, q, data, zone, name):
        path = q.get('queryPath') or q.get('variableKey') or ''
        with self.lock:
            self.advance()
            inst = self.find_instance(zone, name)
            missing = not_found('projects/%s/zones/%s/instances/%s/guestAttributes/%s'
                                % (self.project, zone, name, path))
            if not self.settings['guest_hostkeys'] or inst.status != 'RUNNING' or \
                    inst.dir_slot is None or not path.startswith('hostkeys'):
                raise missing
            pub = os.path.join(self.hosts.path(inst.dir_slot), 'ssh_host_ed25519_key.pub')
        try:
            with open(pub) as f:
                words = f.read().split()
        except OSError:
            raise missing
        item = {'namespace': 'hostkeys', 'key': words[0], 'value': words[1]}
        if path.strip('/') not in ('hostkeys', 'hostkeys/' + words[0]):
            raise missing
        return 200, {'kind': 'compute#guestAttributes', 'queryPath': path,
                     'queryValue': {'items': [item]},
                     'selfLink': self.link(self.project, 'zones', zone, 'instances', name,
                                           'guestAttributes') + '?queryPath=' + path}

    # ------------------------------------------------------------ operations

    def find_op(self, op, scope):
        what = ('projects/%s/global/operations/%s' % (self.project, op)) if scope[0] == \
            'global' else 'projects/%s/%s/%s/operations/%s' % (self.project, scope[0],
                                                               scope[1], op)
        o = self.ops.get(op)
        if o is None or o.scope != scope:
            raise not_found(what)
        return o

    @staticmethod
    def scope_of(zone, region):
        return ('zones', zone) if zone else ('regions', region) if region else \
            ('global', None)

    def op_get(self, q, data, op, zone=None, region=None):
        if zone:
            self.check_zone(zone)
        if region:
            self.check_region(region)
        with self.lock:
            self.advance()
            return 200, self.op_json(self.find_op(op, self.scope_of(zone, region)))

    def op_wait(self, q, data, op, zone=None, region=None):
        if zone:
            self.check_zone(zone)
        if region:
            self.check_region(region)
        scope = self.scope_of(zone, region)
        deadline = time.monotonic() + WAIT_S
        while True:
            with self.lock:
                self.advance()
                o = self.find_op(op, scope)
                if o.status == 'DONE' or time.monotonic() >= deadline:
                    return 200, self.op_json(o)
            # Many waits at once each take the lock: not too often.
            time.sleep(0.05)

    def zone_ops_list(self, q, data, zone):
        self.check_zone(zone)
        terms = parse_filter(q.get('filter'))
        with self.lock:
            self.advance()
            items = [self.op_json(o) for o in self.ops.values() if o.scope == ('zones', zone)]
            items = [o for o in items if filter_match(o, terms)]
            items, extra = self.page(items, q)
        out = {'kind': 'compute#operationList',
               'id': 'projects/%s/zones/%s/operations' % (self.project, zone),
               'items': items,
               'selfLink': self.link(self.project, 'zones', zone, 'operations')}
        if not items:
            del out['items']
        return 200, dict(out, **extra)

    # ------------------------------------------------------------ firewalls

    def firewall_insert(self, q, data):
        name = data.get('name')
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise invalid("Invalid value for field 'resource.name': '%s'. Must be a match "
                          "of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name)
        direction = data.get('direction', 'INGRESS')
        if direction not in ('INGRESS', 'EGRESS'):
            raise invalid("Invalid value for field 'resource.direction': '%s'." % direction)
        allowed = data.get('allowed') or []
        if not allowed and not data.get('denied'):
            raise invalid("Invalid value for field 'resource.allowed': ''. A firewall rule "
                          "must have at least one allowed or denied entry.")
        for a in allowed:
            if not isinstance(a, dict) or not a.get('IPProtocol'):
                raise invalid("Invalid value for field 'resource.allowed[0].IPProtocol'.")
        with self.lock:
            again = self.repeated(q)
            if again:
                return again
            if name in self.firewalls:
                raise GceError(409, 'alreadyExists', "The resource 'projects/%s/global/"
                               "firewalls/%s' already exists" % (self.project, name))
            fw = {'kind': 'compute#firewall', 'id': numeric_id(), 'name': name,
                  'creationTimestamp': rfc3339(),
                  'description': data.get('description', ''),
                  'network': self.link(self.project, 'global', 'networks',
                                       short_name(data.get('network') or 'default')),
                  'priority': data.get('priority', 1000), 'direction': direction,
                  'allowed': [dict(a) for a in allowed], 'disabled': False,
                  'logConfig': {'enable': False},
                  'selfLink': self.link(self.project, 'global', 'firewalls', name)}
            for field in ('sourceRanges', 'sourceTags', 'targetTags', 'destinationRanges',
                          'denied'):
                if data.get(field):
                    fw[field] = list(data[field])
            if direction == 'INGRESS' and 'sourceRanges' not in fw and 'sourceTags' not in fw:
                fw['sourceRanges'] = ['0.0.0.0/0']
            self.firewalls[name] = fw
            op = self.new_op(('global', None), 'insert', fw['selfLink'], fw['id'],
                             request_id=q.get('requestId'))
            return 200, self.op_json(op)

    def firewall_get(self, q, data, name):
        with self.lock:
            fw = self.firewalls.get(name)
            if fw is None:
                raise not_found('projects/%s/global/firewalls/%s' % (self.project, name))
            return 200, dict(fw)

    def firewalls_list(self, q, data):
        terms = parse_filter(q.get('filter'))
        with self.lock:
            items = [dict(f) for f in self.firewalls.values() if filter_match(f, terms)]
            items, extra = self.page(items, q)
        out = {'kind': 'compute#firewallList', 'id': 'projects/%s/global/firewalls'
               % self.project, 'items': items,
               'selfLink': self.link(self.project, 'global', 'firewalls')}
        if not items:
            del out['items']
        return 200, dict(out, **extra)

    def firewall_delete(self, q, data, name):
        with self.lock:
            again = self.repeated(q)
            if again:
                return again
            fw = self.firewalls.get(name)
            if fw is None:
                raise not_found('projects/%s/global/firewalls/%s' % (self.project, name))
            op = self.new_op(('global', None), 'delete', fw['selfLink'], fw['id'],
                             on_done=lambda o: self.firewalls.pop(name, None),
                             request_id=q.get('requestId'))
            fw['deleting'] = op.name
            return 200, self.op_json(op)

    # ------------------------------------------------------------ resource policies

    def policy_link(self, region, name):
        return self.link(self.project, 'regions', region, 'resourcePolicies', name)

    def policy_insert(self, q, data, region):
        self.check_region(region)
        name = data.get('name')
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise invalid("Invalid value for field 'resource.name': '%s'. Must be a match "
                          "of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'" % name)
        gpp = data.get('groupPlacementPolicy')
        if gpp is not None:
            if not isinstance(gpp, dict) or gpp.get('collocation', 'COLLOCATED') not in (
                    'COLLOCATED', 'UNSPECIFIED_COLLOCATION'):
                raise invalid("Invalid value for field 'resource.groupPlacementPolicy."
                              "collocation'.")
            vm = gpp.get('vmCount')
            if vm is not None and (not isinstance(vm, int) or not 2 <= vm <= 1500):
                raise invalid("Invalid value for field 'resource.groupPlacementPolicy."
                              "vmCount': '%s'. Must be in the range [2, 1500]." % vm)
        with self.lock:
            again = self.repeated(q)
            if again:
                return again
            if (region, name) in self.policies:
                raise GceError(409, 'alreadyExists', "The resource '%s' already exists"
                               % ('projects/%s/regions/%s/resourcePolicies/%s'
                                  % (self.project, region, name)))
            pol = {'kind': 'compute#resourcePolicy', 'id': numeric_id(), 'name': name,
                   'creationTimestamp': rfc3339(), 'region': self.region_link(region),
                   'description': data.get('description', ''), 'status': 'READY',
                   'selfLink': self.policy_link(region, name)}
            for field in ('groupPlacementPolicy', 'instanceSchedulePolicy',
                          'snapshotSchedulePolicy'):
                if data.get(field) is not None:
                    pol[field] = json.loads(json.dumps(data[field]))
            self.policies[(region, name)] = pol
            op = self.new_op(('regions', region), 'insert', pol['selfLink'], pol['id'],
                             request_id=q.get('requestId'))
            return 200, self.op_json(op)

    def policies_aggregated(self, q, data):
        """Every region's resource policies (filter and pages as for instances)."""
        terms = parse_filter(q.get('filter'))
        with self.lock:
            pols = [dict(self.policies[k]) for k in sorted(self.policies)]
            pols = [p for p in pols if filter_match(p, terms)]
            page, extra = self.page(pols, q)
        items = scoped_items('resourcePolicies', [
            ('regions/' + r, [p for p in page if short_name(p['region']) == r])
            for r in sorted(self.regions)])
        return 200, dict({'kind': 'compute#resourcePolicyAggregatedList',
                          'id': 'projects/%s/aggregated/resourcePolicies' % self.project,
                          'items': items,
                          'selfLink': self.link(self.project, 'aggregated',
                                                'resourcePolicies')}, **extra)

    def policy_get(self, q, data, region, name):
        self.check_region(region)
        with self.lock:
            pol = self.policies.get((region, name))
            if pol is None:
                raise not_found('projects/%s/regions/%s/resourcePolicies/%s'
                                % (self.project, region, name))
            return 200, dict(pol)

    def policy_delete(self, q, data, region, name):
        self.check_region(region)
        with self.lock:
            again = self.repeated(q)
            if again:
                return again
            self.advance()
            pol = self.policies.get((region, name))
            if pol is None:
                raise not_found('projects/%s/regions/%s/resourcePolicies/%s'
                                % (self.project, region, name))
            users = [i for i in self.order if not i.gone and i.region == region
                     and name in i.policies]
            if users:
                raise GceError(400, 'resourceInUseByAnotherResource',
                               "The resource_policy resource 'projects/%s/regions/%s/"
                               "resourcePolicies/%s' is already being used by 'projects/%s/"
                               "zones/%s/instances/%s'" % (self.project, region, name,
                                                           self.project, users[0].zone,
                                                           users[0].name))
            op = self.new_op(('regions', region), 'delete', pol['selfLink'], pol['id'],
                             on_done=lambda o: self.policies.pop((region, name), None),
                             request_id=q.get('requestId'))
            return 200, self.op_json(op)

    # ------------------------------------------------------------ control

    def preempt(self, data):
        if not isinstance(data, dict) or not (('name' in data) ^ ('names' in data)):
            return 400, {'error': 'expected {"name": N} or {"names": [...]}, and "zone"'}
        names = data['names'] if 'names' in data else [data['name']]
        zone = data.get('zone')
        if not isinstance(names, list) or not names or \
                not all(isinstance(n, str) for n in names):
            return 400, {'error': 'names are a non-empty list of strings'}
        with self.lock:
            self.advance()
            victims = []
            for n in dict.fromkeys(names):
                found = [i for (z, nm), i in self.instances.items()
                         if nm == n and not i.gone and zone in (None, z)]
                if len(found) != 1:
                    return 400, {'error': 'no such instance (or not unique without "zone"): '
                                          '%s' % n}
                inst = found[0]
                if inst.provisioning != 'SPOT':
                    return 400, {'error': '%s is not a SPOT instance' % n}
                if inst.status not in ('PROVISIONING', 'STAGING', 'RUNNING'):
                    return 400, {'error': '%s is %s' % (n, inst.status)}
                victims.append(inst)
            for inst in victims:
                action = inst.scheduling.get('instanceTerminationAction', 'STOP')
                self.settle(inst, 'DELETED' if action == 'DELETE' else 'TERMINATED',
                            self.settings['op_ms'] / 2000.0)
                inst.preempted = True
                inst.status_message = 'Instance was preempted.'
                inst.last_stop = rfc3339()
                op = self.new_op(('zones', inst.zone), 'compute.instances.preempted',
                                 self.instance_link(inst), inst.id, delay_s=0)
                op.status = 'DONE'
                op.started = op.ended = op.inserted
                op.status_message = 'Instance was preempted.'
                op.user = 'system'
        for inst in victims:
            self.down_later(inst, action_delete(inst))
        return 200, {'preempted': [i.name for i in victims]}

    @staticmethod
    def capacity_problem(entries):
        """What is wrong with a capacity setting, or None."""
        if not isinstance(entries, list):
            return 'a list of entries'
        allowed = {'zone': None, 'machine_type': None,
                   'provisioning': ('*', 'STANDARD', 'SPOT'), 'code': CAPACITY_CODES}
        for e in entries:
            if not isinstance(e, dict) or not set(e) <= set(allowed):
                return 'entries are {%s}' % ', '.join(allowed)
            for field, choices in allowed.items():
                if field in e and (not isinstance(e[field], str) or
                                   (choices and e[field] not in choices)):
                    return '%s: %s' % (field, ' | '.join(choices or ('a string',)))
        return None

    def check_settings(self, data):
        """What is wrong with a /settings object, or None."""
        if not isinstance(data, dict):
            return 'settings are a JSON object'
        checks = {'op_ms': lambda v: None if type(v) is int and v >= 0 else
                  'a non-negative integer',
                  'page_size': lambda v: None if type(v) is int and v >= 1 else
                  'a positive integer',
                  'guest_hostkeys': lambda v: None if type(v) is bool else 'true or false',
                  'capacity': self.capacity_problem}
        for name, value in data.items():
            problem = checks[name](value) if name in checks else 'no such setting'
            if problem:
                return '%s: %s' % (name, problem)
        return None

    def state_json(self):
        with self.lock:
            self.advance()
            return {
                'instances': [{
                    'zone': i.zone, 'name': i.name, 'id': i.id, 'status': i.status,
                    'labels': dict(i.labels), 'tags': list(i.tags),
                    'natIP': self.address(i.slot) if i.nat and not i.gone else None,
                    'address': self.address(i.slot) if not i.gone else None,
                    'networkIP': self.internal(i),
                    'machine_type': i.machine_type, 'architecture': i.architecture,
                    'provisioning_model': i.provisioning, 'users': list(i.users),
                    'preempted': i.preempted, 'resource_policies': list(i.policies),
                    'accelerators': ['%s:%s' % (short_name(a.get('acceleratorType')),
                                                a.get('acceleratorCount', 1))
                                     for a in i.props.get('guestAccelerators') or []],
                    'on_host_maintenance': i.scheduling.get('onHostMaintenance'),
                    'request_id': i.request_id, 'sshd_pid': i.sshd_pid,
                    'host_dir': self.hosts.path(i.dir_slot) if i.dir_slot is not None
                    else None,
                    'image': '%s/%s' % i.image,
                } for i in self.order if not i.gone],
                'deleted': [{'zone': i.zone, 'name': i.name, 'id': i.id}
                            for i in self.order if i.gone],
                'firewalls': [json.loads(json.dumps(f)) for f in self.firewalls.values()],
                'resource_policies': [dict(p) for p in self.policies.values()],
                'operations': len(self.ops),
                'calls': dict(self.calls),
                'launches': dict(self.launches),
                'faults': [f.as_json() for f in self.faults],
                'settings': json.loads(json.dumps(self.settings)),
            }

    def add_faults(self, data):
        try:
            faults = [Fault(x) for x in (data if isinstance(data, list) else [data])]
        except ValueError as e:
            return 400, {'error': str(e)}
        with self.lock:
            self.faults += faults
            return 200, {'faults': [f.as_json() for f in self.faults]}

    def clear_faults(self, data):
        with self.lock:
            self.faults = []
        return 200, {'faults': []}

    def change_settings(self, data):
        problem = self.check_settings(data)
        if problem:
            return 400, {'error': problem}
        with self.lock:
            self.settings.update(data)
            return 200, {'settings': json.loads(json.dumps(self.settings))}

    def reset_calls(self, data):
        with self.lock:
            self.calls = {}
        return 200, {'calls': {}}

    def control(self, method, path, body):
        """A /_fake request (path without /_fake): (status, JSON-able dict)."""
        action = {('GET', '/state'): lambda data: (200, self.state_json()),
                  ('POST', '/faults'): self.add_faults,
                  ('DELETE', '/faults'): self.clear_faults,
                  ('POST', '/preempt'): self.preempt,
                  ('POST', '/settings'): self.change_settings,
                  ('POST', '/reset-calls'): self.reset_calls,
                  }.get((method.upper(), path.split('?', 1)[0]))
        if action is None:
            return 404, {'error': 'no such control request: %s %s' % (method, path)}
        if isinstance(body, bytes):
            try:
                body = body.decode('utf-8')
            except UnicodeDecodeError as e:
                return 400, {'error': 'bad JSON: %s' % e}
        try:
            data = json.loads(body) if body and body.strip() else None
        except ValueError as e:
            return 400, {'error': 'bad JSON: %s' % e}
        return action(data)


PROC_SCAN = {'at': -1.0, 'children': {}}
PROC_LOCK = threading.Lock()
PROC_FRESH_S = 0.25


def proc_children():
    """{ppid: [pid...]} of every process, read at most PROC_FRESH_S ago: 64 stops at
    once share one scan of /proc instead of 64 (the sessions an sshd serves were forked
    long before it is stopped)."""
    with PROC_LOCK:
        if time.monotonic() - PROC_SCAN['at'] < PROC_FRESH_S:
            return PROC_SCAN['children']
        PROC_SCAN['children'] = scan_children()
        PROC_SCAN['at'] = time.monotonic()
        return PROC_SCAN['children']


def scan_children():
    """{ppid: [pid...]} of every process now."""
    children = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(')') + 2:].split()[1])
        children.setdefault(ppid, []).append(int(name))
    return children


def is_sshd_of(pid, hostdir):
    """Whether PID is the sshd of HOSTDIR (a recorded pid may be stale, even reused)."""
    try:
        with open('/proc/%d/comm' % pid) as f:
            comm = f.read().strip()
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            cmd = f.read().replace(b'\0', b' ').decode('utf-8', 'replace')
    except OSError:
        return False
    return comm == 'sshd' and ('-f %s/sshd_config' % os.path.abspath(hostdir)) in cmd


def kill_tree(pid, timeout_s=5.0):
    """SIGKILL PID (an sshd of a test host) and its descendants, and wait until they are
    gone (or zombies): whether it was done. Each process is held by a pidfd from before
    its signal (a pid reused meanwhile is not taken for it), and the wait is one poll()
    on them: 64 stops at once waited side by side with a read of /proc every 10 ms each,
    which kept the server's threads from the interpreter and slowed every call it
    answered meanwhile."""
    children = proc_children()
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    fds = []
    try:
        for p in tree:
            with contextlib.suppress(ProcessLookupError):
                fds.append(os.pidfd_open(p))
        for fd in fds:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        left = set(fds)
        deadline = time.monotonic() + timeout_s
        while left:
            wait_ms = int((deadline - time.monotonic()) * 1000)
            if wait_ms <= 0:
                return False
            for fd, _ in poller.poll(wait_ms):
                left.discard(fd)
                poller.unregister(fd)
        return True
    finally:
        for fd in fds:
            os.close(fd)


def action_delete(inst):
    return inst.scheduling.get('instanceTerminationAction', 'STOP') == 'DELETE'
