#!/usr/bin/python3
# tests/fakeec2/test_fake_ec2.py: the fake EC2 endpoint (fake_ec2.py) driven by botocore's
# own EC2 client, which proves it speaks the EC2 Query protocol; its instances answer real
# ssh. Needs root, sshd and botocore; exits non-zero on failure.
"""Run: /usr/bin/python3 tests/fakeec2/test_fake_ec2.py [-v]

FAKE_EC2_TEST_NET (default 127.0.9) is the /24 the fake's test hosts use here.
"""

import datetime
import http.client
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
import urllib.request
import warnings

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, ReadTimeoutError

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, 'fake_ec2.py')
TESTHOSTS = os.path.join(HERE, '..', 'sshd', 'testhosts.bash')
NET = os.environ.get('FAKE_EC2_TEST_NET', '127.0.9')
REGION = 'us-east-1'
AKID, SECRET = 'AKIATESTFAKEEC2', 'test-secret-key'
TOKEN_AKID, TOKEN_SECRET, TOKEN = 'ASIATESTFAKEEC2', 'token-secret-key', 'FwoGZXIvYXdzE/token+1='
NO_RETRIES = Config(retries={'total_max_attempts': 1, 'mode': 'standard'})
# The public SSM parameters of the latest images, and their architectures.
SSM_ARM64_AL2023 = '/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64'
SSM_PARAMETERS = {}
for _arch, _deb in (('x86_64', 'amd64'), ('arm64', 'arm64')):
    SSM_PARAMETERS.update({
        SSM_ARM64_AL2023.replace('arm64', _arch): _arch,
        '/aws/service/canonical/ubuntu/server/24.04/stable/current/%s/hvm/ebs-gp3/ami-id'
        % _deb: _arch,
        '/aws/service/canonical/ubuntu/server/22.04/stable/current/%s/hvm/ebs-gp3/ami-id'
        % _deb: _arch,
        '/aws/service/debian/release/12/latest/' + _deb: _arch})
ARCH_MESSAGE = ("The architecture '%s' of the specified instance type does not match the "
                "architecture '%s' of the specified AMI. Specify an instance type and an AMI "
                "that have matching architectures, and try again. You can use "
                "'describe-instance-types' or 'describe-images' to discover the architecture "
                "of the instance type or AMI.")


def pid_gone(pid):
    """True when PID does not exist or is a zombie (PID 1 may not reap daemons)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            stat = f.read()
    except OSError:
        return True
    return stat.rsplit(') ', 1)[1][:1] in ('Z', 'X')


def wait_for(predicate, timeout=20, interval=0.05, what='condition'):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for ' + what)
        time.sleep(interval)


class FakeEC2Test(unittest.TestCase):
    proc = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='cclfs-fakeec2.')
        cls.dir = os.path.join(cls.tmp, 'fake')
        cls.out = open(os.path.join(cls.tmp, 'fake.out'), 'w')
        cls.proc = subprocess.Popen(
            [sys.executable, FAKE, '--dir', cls.dir, '--region', REGION, '--net', NET,
             '--first', '10', '--credentials', '%s:%s' % (AKID, SECRET),
             '--credentials', '%s:%s:%s' % (TOKEN_AKID, TOKEN_SECRET, TOKEN)],
            stdin=subprocess.DEVNULL, stdout=cls.out, stderr=subprocess.STDOUT)
        port_file = os.path.join(cls.dir, 'port')
        deadline = time.monotonic() + 20
        while not os.path.exists(port_file):
            if cls.proc.poll() is not None or time.monotonic() > deadline:
                cls.out.flush()
                with open(cls.out.name) as f:
                    raise RuntimeError('the fake did not start: ' + f.read())
            time.sleep(0.02)
        with open(port_file) as f:
            cls.port = int(f.read())
        cls.url = 'http://127.0.0.1:%d' % cls.port
        cls.hosts = os.path.join(cls.dir, 'testhosts')
        cls.ec2 = cls.client()
        cls.all_pids = set()

    @classmethod
    def tearDownClass(cls):
        if cls.proc is not None and cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            try:
                cls.proc.wait(60)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait()
        subprocess.run(['bash', '-c', 'source "$1" && testhosts_stop "$2"', '_', TESTHOSTS,
                        cls.hosts], check=False)
        cls.out.close()
        if os.environ.get('FAKE_EC2_KEEP'):
            print('fake EC2 directory kept: ' + cls.tmp, file=sys.stderr)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        # botocore's pooled connections of short-lived clients are not worth a warning.
        warnings.simplefilter('ignore', ResourceWarning)
        self.control('DELETE', '/_fake/faults')
        self.control('POST', '/_fake/settings', {'latency_ms': 0, 'pending_polls': 1,
                                                 'stopping_polls': 1, 'page_size': None,
                                                 'ssh_silent': 0, 'deny': [],
                                                 'capacity': []})

    # ------------------------------------------------------------ helpers

    @classmethod
    def client(cls, akid=AKID, secret=SECRET, token=None, region=REGION, config=NO_RETRIES,
               service='ec2'):
        return botocore.session.get_session().create_client(
            service, region_name=region, endpoint_url=cls.url, aws_access_key_id=akid,
            aws_secret_access_key=secret, aws_session_token=token, config=config)

    def control(self, method, path, data=None):
        body = None if data is None else json.dumps(data).encode()
        req = urllib.request.Request(self.url + path, data=body, method=method)
        # The first look at the state builds the fixture's catalog: seconds on
        # a busy machine.
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)

    def state(self):
        s = self.control('GET', '/_fake/state')
        for inst in s['instances']:
            if inst['sshd_pid']:
                self.all_pids.add(inst['sshd_pid'])
        return s

    def inst_state(self, instance_id):
        return next(i for i in self.state()['instances'] if i['id'] == instance_id)

    def assertClientError(self, code, fn, *args, status=None, **kwargs):
        with self.assertRaises(ClientError) as cm:
            fn(*args, **kwargs)
        err = cm.exception.response
        self.assertEqual(err['Error']['Code'], code, err)
        if status is not None:
            self.assertEqual(err['ResponseMetadata']['HTTPStatusCode'], status)
        return err

    def describe(self, ids=None, **kwargs):
        if ids:
            kwargs['InstanceIds'] = ids
        out = self.ec2.describe_instances(**kwargs)
        return [i for r in out['Reservations'] for i in r['Instances']]

    def wait_states(self, ids, state):
        def done():
            found = self.describe(ids)
            return found if all(i['State']['Name'] == state for i in found) else None
        return wait_for(done, what='%s to be %s' % (ids, state))

    def ssh(self, address, *extra, config=True):
        if config:
            cmd = ['ssh', '-F', os.path.join(self.hosts, 'ssh_config')]
        else:
            cmd = ['ssh', '-F', '/dev/null', '-o', 'BatchMode=yes',
                   '-o', 'StrictHostKeyChecking=yes', '-o', 'ConnectTimeout=5',
                   '-o', 'UserKnownHostsFile=' + os.path.join(self.hosts, 'known_hosts')]
        # The server address of the session: the third word of SSH_CONNECTION.
        remote = 'set -- $SSH_CONNECTION; echo $3'
        return subprocess.run(cmd + list(extra) + ['root@' + address, remote],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=30)

    def raw(self, params, amz_date=None, headers=None, query='', akid=AKID, secret=SECRET,
            token=None, sign=True, date_twice=False):
        """POST a form body signed with botocore's signer at AMZ_DATE; returns
        (status, error code or None)."""
        body = '&'.join('%s=%s' % (k, urllib.request.quote(str(v), safe=''))
                        for k, v in params.items()).encode()
        host = '127.0.0.1:%d' % self.port
        amz_date = amz_date or datetime.datetime.now(
            datetime.timezone.utc).strftime('%Y%m%dT%H%M%SZ')
        hdrs = {'Host': host, 'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8',
                'X-Amz-Date': amz_date}
        if token:
            hdrs['X-Amz-Security-Token'] = token
        hdrs.update(headers or {})
        if sign:
            req = AWSRequest(method='POST', url='http://%s/' % host, data=body)
            for k, v in hdrs.items():
                req.headers[k] = v
            req.context['timestamp'] = amz_date
            signer = SigV4Auth(Credentials(akid, secret, token), 'ec2', REGION)
            canonical = signer.canonical_request(req)
            signature = signer.signature(signer.string_to_sign(req, canonical), req)
            hdrs['Authorization'] = (
                'AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s'
                % (akid, signer.credential_scope(req),
                   signer.signed_headers(signer.headers_to_sign(req)), signature))
        # Generous: the first price-list call builds the fixture's catalog, which
        # takes seconds on a busy machine.
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=120)
        conn.putrequest('POST', '/' + ('?' + query if query else ''), skip_host=True,
                        skip_accept_encoding=True)
        for k, v in hdrs.items():
            conn.putheader(k, v)
        if date_twice:
            conn.putheader('X-Amz-Date', amz_date)
        conn.putheader('Content-Length', str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        text = resp.read().decode()
        conn.close()
        code = None
        if resp.status != 200:
            self.assertTrue(text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<Response>'
                                            '<Errors><Error><Code>'), text)
            code = text.split('<Code>')[1].split('</Code>')[0]
            self.assertIn('<RequestID>', text)
        return resp.status, code

    def assertSilent(self, address):
        """ADDRESS:22 accepts a connection and sends nothing within a second; returns the
        connection (it has sent a client banner, which is dropped)."""
        conn = socket.create_connection((address, 22), timeout=5)
        conn.settimeout(1.0)
        with self.assertRaises(socket.timeout):
            conn.recv(64)
        conn.sendall(b'SSH-2.0-OpenSSH_9.2 fake-ec2-test\r\n')
        with self.assertRaises(socket.timeout):
            conn.recv(64)
        return conn

    def assertClosed(self, address, conns=()):
        """Nothing listens on ADDRESS:22 any more, and each connection of CONNS was closed
        from the other end."""
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((address, 22), timeout=5).close()
        for conn in conns:
            conn.settimeout(5)
            try:
                self.assertEqual(conn.recv(64), b'')
            except ConnectionResetError:
                pass
            conn.close()

    # ------------------------------------------------------------ tests

    def test_instance_lifecycle(self):
        ec2 = self.ec2
        keydir = os.path.join(self.tmp, 'lifekey')
        os.makedirs(keydir)
        key = os.path.join(keydir, 'id')
        subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'life', '-f', key],
                       check=True)
        with open(key + '.pub', 'rb') as f:
            pub = f.read()
        kp = ec2.import_key_pair(KeyName='life', PublicKeyMaterial=pub)
        self.assertEqual(kp['KeyName'], 'life')
        self.assertRegex(kp['KeyFingerprint'], r'^[0-9a-f]{2}(:[0-9a-f]{2}){15}$')
        self.assertTrue(kp['KeyPairId'].startswith('key-'))
        self.assertClientError('InvalidKeyPair.Duplicate', ec2.import_key_pair,
                               KeyName='life', PublicKeyMaterial=pub, status=400)
        self.assertClientError('InvalidKey.Format', ec2.import_key_pair,
                               KeyName='junk', PublicKeyMaterial=b'not a key')
        pairs = ec2.describe_key_pairs(KeyNames=['life'])['KeyPairs']
        self.assertEqual([(p['KeyName'], p['KeyFingerprint']) for p in pairs],
                         [('life', kp['KeyFingerprint'])])

        ec2.create_placement_group(GroupName='life-pg', Strategy='cluster')
        self.assertClientError('InvalidPlacementGroup.Duplicate', ec2.create_placement_group,
                               GroupName='life-pg', Strategy='cluster')
        groups = ec2.describe_placement_groups(GroupNames=['life-pg'])['PlacementGroups']
        self.assertEqual([(g['GroupName'], g['Strategy'], g['State']) for g in groups],
                         [('life-pg', 'cluster', 'available')])

        run = dict(ImageId='ami-0life', InstanceType='t3.micro', MinCount=2, MaxCount=2,
                   KeyName='life', Placement={'GroupName': 'life-pg'}, ClientToken='life-token',
                   SubnetId='subnet-0life', SecurityGroupIds=['sg-0cclfs'],
                   TagSpecifications=[
                       {'ResourceType': 'instance',
                        'Tags': [{'Key': 'cclfs:cluster', 'Value': 'life'},
                                 {'Key': 'Name', 'Value': 'life node'}]},
                       {'ResourceType': 'volume',
                        'Tags': [{'Key': 'cclfs:cluster', 'Value': 'life-vol'}]}])
        before = len(self.state()['instances'])
        r1 = ec2.run_instances(**run)
        ids = [i['InstanceId'] for i in r1['Instances']]
        self.assertEqual(len(ids), 2)
        self.assertRegex(r1['ReservationId'], r'^r-[0-9a-f]{17}$')
        for i in r1['Instances']:
            self.assertRegex(i['InstanceId'], r'^i-[0-9a-f]{17}$')
            self.assertEqual(i['State'], {'Code': 0, 'Name': 'pending'})
            self.assertTrue(i['PrivateIpAddress'].startswith(NET + '.'))
            self.assertNotIn('PublicIpAddress', i)
            self.assertEqual(i['ClientToken'], 'life-token')
            self.assertEqual(i['Placement']['GroupName'], 'life-pg')
            self.assertEqual(i['Placement']['AvailabilityZone'], REGION + 'a')
            self.assertEqual(i['KeyName'], 'life')
            self.assertEqual({t['Key']: t['Value'] for t in i['Tags']},
                             {'cclfs:cluster': 'life', 'Name': 'life node'})
        # The same token and parameters: the same reservation, nothing launched.
        r2 = ec2.run_instances(**run)
        self.assertEqual(r2['ReservationId'], r1['ReservationId'])
        self.assertEqual([i['InstanceId'] for i in r2['Instances']], ids)
        st = self.state()
        self.assertEqual(len(st['instances']), before + 2)
        self.assertEqual(st['launches_per_token']['life-token'], 1)
        self.assertClientError('IdempotentParameterMismatch', ec2.run_instances,
                               **dict(run, MaxCount=3))
        err = self.assertClientError('InvalidAMIID.NotFound', ec2.run_instances,
                                     **dict(run, ImageId='ami-bad1', ClientToken='t-bad'))
        self.assertEqual(err['Error']['Message'], "The image id '[ami-bad1]' does not exist")
        self.assertClientError('InvalidKeyPair.NotFound', ec2.run_instances,
                               **dict(run, KeyName='nokey', ClientToken='t-nokey'))
        self.assertClientError('InvalidPlacementGroup.Unknown', ec2.run_instances,
                               **dict(run, Placement={'GroupName': 'nopg'},
                                      ClientToken='t-nopg'))
        self.assertEqual(len(self.state()['instances']), before + 2)

        # pending_polls 1: the first describe still shows pending.
        self.assertEqual([i['State']['Name'] for i in self.describe(ids)], ['pending'] * 2)
        running = self.wait_states(ids, 'running')
        addrs = {}
        for i in running:
            self.assertEqual(i['PublicIpAddress'], i['PrivateIpAddress'])
            addrs[i['InstanceId']] = i['PrivateIpAddress']
        st = {i['id']: i for i in self.state()['instances']}
        for iid in ids:
            s = st[iid]
            self.assertEqual(s['state'], 'running')
            self.assertEqual(s['tags'], {'cclfs:cluster': 'life', 'Name': 'life node'})
            self.assertEqual(s['volume_tags'], {'cclfs:cluster': 'life-vol'})
            self.assertEqual((s['image_id'], s['instance_type'], s['key_name'],
                              s['placement_group'], s['subnet_id'], s['security_group_ids'],
                              s['client_token'], s['reservation_id']),
                             ('ami-0life', 't3.micro', 'life', 'life-pg', 'subnet-0life',
                              ['sg-0cclfs'], 'life-token', r1['ReservationId']))
            self.assertFalse(pid_gone(s['sshd_pid']))
        for iid, addr in addrs.items():
            r = self.ssh(addr)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, addr), r.stderr)
            r = self.ssh(addr, '-i', key, '-o', 'IdentitiesOnly=yes', config=False)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, addr), r.stderr)

        # Stop: the daemon dies at once.
        a, b = ids
        old_addr = addrs[a]
        old_pid = st[a]['sshd_pid']
        with open(os.path.join(st[a]['host_dir'], 'ssh_host_ed25519_key.pub')) as f:
            host_key = f.read()
        out = ec2.stop_instances(InstanceIds=[a])['StoppingInstances']
        self.assertEqual(out, [{'InstanceId': a, 'CurrentState': {'Code': 64, 'Name': 'stopping'},
                                'PreviousState': {'Code': 16, 'Name': 'running'}}])
        self.assertTrue(pid_gone(old_pid))
        self.assertNotEqual(self.ssh(old_addr).returncode, 0)
        self.assertClientError('IncorrectInstanceState', ec2.start_instances, InstanceIds=[a])
        stopped = self.wait_states([a], 'stopped')[0]
        self.assertNotIn('PublicIpAddress', stopped)

        # Start: another address, the same host key.
        out = ec2.start_instances(InstanceIds=[a])['StartingInstances']
        self.assertEqual([(o['CurrentState']['Name'], o['PreviousState']['Name']) for o in out],
                         [('pending', 'stopped')])
        new = self.wait_states([a], 'running')[0]
        new_addr = new['PublicIpAddress']
        self.assertNotEqual(new_addr, old_addr)
        self.assertNotIn(new_addr, addrs.values())
        s = self.inst_state(a)
        self.assertEqual(s['address'], new_addr)
        with open(os.path.join(s['host_dir'], 'ssh_host_ed25519_key.pub')) as f:
            self.assertEqual(f.read(), host_key)
        with open(os.path.join(self.hosts, 'known_hosts')) as f:
            known = dict(line.split(' ', 1) for line in f.read().splitlines())
        self.assertNotIn(old_addr, known)
        self.assertEqual(known[new_addr].split()[:2], host_key.split()[:2])
        for args in ((), ('-i', key, '-o', 'IdentitiesOnly=yes')):
            r = self.ssh(new_addr, *args, config=not args)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, new_addr), r.stderr)
        # Starting a running instance changes nothing.
        out = ec2.start_instances(InstanceIds=[a])['StartingInstances']
        self.assertEqual([(o['CurrentState']['Name'], o['PreviousState']['Name']) for o in out],
                         [('running', 'running')])

        self.assertClientError('InvalidPlacementGroup.InUse', ec2.delete_placement_group,
                               GroupName='life-pg')
        self.assertClientError('InvalidInstanceID.NotFound', ec2.stop_instances,
                               InstanceIds=['i-0123456789abcdef0'])

        # Terminate: daemons gone, addresses gone, listed for ever.
        st = {i['id']: i for i in self.state()['instances']}
        out = ec2.terminate_instances(InstanceIds=ids)['TerminatingInstances']
        self.assertEqual([(o['CurrentState']['Code'], o['PreviousState']['Name']) for o in out],
                         [(32, 'running'), (32, 'running')])
        for iid in ids:
            self.assertTrue(pid_gone(st[iid]['sshd_pid']))
        gone = self.wait_states(ids, 'terminated')
        for i in gone:
            self.assertEqual(i['State']['Code'], 48)
            self.assertEqual(i['StateReason'],
                             {'Code': 'Client.UserInitiatedShutdown',
                              'Message': 'Client.UserInitiatedShutdown: User initiated shutdown'})
            self.assertRegex(i['StateTransitionReason'],
                             r'^User initiated \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\)$')
            self.assertEqual((i['Architecture'], i['Placement']['AvailabilityZone']),
                             ('x86_64', REGION + 'a'))
            self.assertNotIn('InstanceLifecycle', i)
            self.assertNotIn('PrivateIpAddress', i)
            self.assertNotIn('PublicIpAddress', i)
        out = ec2.terminate_instances(InstanceIds=[a])['TerminatingInstances']
        self.assertEqual([(o['CurrentState']['Name'], o['PreviousState']['Name']) for o in out],
                         [('terminated', 'terminated')])
        self.assertClientError('IncorrectInstanceState', ec2.stop_instances, InstanceIds=[b])
        self.assertEqual(len(self.describe(ids)), 2)

        ec2.delete_placement_group(GroupName='life-pg')
        self.assertClientError('InvalidPlacementGroup.Unknown', ec2.delete_placement_group,
                               GroupName='life-pg')
        ec2.delete_key_pair(KeyName='life')
        ec2.delete_key_pair(KeyName='life')  # missing is fine
        self.assertClientError('InvalidKeyPair.NotFound', ec2.describe_key_pairs,
                               KeyNames=['life'])
        self.assertNotIn('life', self.state()['key_pairs'])
        self.assertNotIn('life-pg', self.state()['placement_groups'])

    def test_security_groups(self):
        ec2 = self.ec2
        self.control('POST', '/_fake/settings', {'sg_release_ms': 300})
        vpcs = ec2.describe_vpcs(Filters=[{'Name': 'is-default', 'Values': ['true']}])['Vpcs']
        self.assertEqual([v['VpcId'] for v in vpcs], ['vpc-0default'])
        subnets = ec2.describe_subnets(SubnetIds=['subnet-0cclfs'])['Subnets']
        self.assertEqual([(n['SubnetId'], n['VpcId']) for n in subnets],
                         [('subnet-0cclfs', 'vpc-0cclfs')])
        self.assertClientError('InvalidSubnetID.NotFound', ec2.describe_subnets,
                               SubnetIds=['subnet-0nope'])
        tags = [{'ResourceType': 'security-group',
                 'Tags': [{'Key': 'cclfs:cluster', 'Value': 'sgt'},
                          {'Key': 'cclfs:token', 'Value': 'tok-sgt'}]}]
        gid = ec2.create_security_group(GroupName='cclfs-sgt-tok', Description='sgt',
                                        VpcId='vpc-0default',
                                        TagSpecifications=tags)['GroupId']
        self.assertRegex(gid, r'^sg-[0-9a-f]{17}$')
        self.assertClientError('InvalidGroup.Duplicate', ec2.create_security_group,
                               GroupName='cclfs-sgt-tok', Description='sgt',
                               VpcId='vpc-0default')
        ec2.authorize_security_group_ingress(GroupId=gid, IpPermissions=[
            {'IpProtocol': 'tcp', 'FromPort': 22, 'ToPort': 22,
             'IpRanges': [{'CidrIp': '0.0.0.0/0'}]},
            {'IpProtocol': '-1', 'UserIdGroupPairs': [{'GroupId': gid}]}])
        self.assertClientError('InvalidPermission.Duplicate',
                               ec2.authorize_security_group_ingress, GroupId=gid,
                               IpPermissions=[{'IpProtocol': '-1',
                                               'UserIdGroupPairs': [{'GroupId': gid}]}])
        for flt in ([{'Name': 'group-name', 'Values': ['cclfs-sgt-*']}],
                    [{'Name': 'tag:cclfs:token', 'Values': ['tok-sgt']}],
                    [{'Name': 'group-id', 'Values': [gid]},
                     {'Name': 'vpc-id', 'Values': ['vpc-0default']}]):
            got = ec2.describe_security_groups(Filters=flt)['SecurityGroups']
            self.assertEqual([g['GroupId'] for g in got], [gid], flt)
        g = got[0]
        self.assertEqual(g['GroupName'], 'cclfs-sgt-tok')
        self.assertEqual({t['Key']: t['Value'] for t in g['Tags']},
                         {'cclfs:cluster': 'sgt', 'cclfs:token': 'tok-sgt'})
        self.assertEqual(sorted((p['IpProtocol'], p.get('FromPort'),
                                 tuple(r['CidrIp'] for r in p['IpRanges']),
                                 tuple(u['GroupId'] for u in p['UserIdGroupPairs']))
                                for p in g['IpPermissions']),
                         [('-1', None, (), (gid,)), ('tcp', 22, ('0.0.0.0/0',), ())])
        self.assertEqual(ec2.describe_security_groups(Filters=[
            {'Name': 'vpc-id', 'Values': ['vpc-0cclfs']},
            {'Name': 'group-name', 'Values': ['cclfs-sgt-tok']}])['SecurityGroups'], [])
        st = [x for x in self.state()['security_groups'] if x['id'] == gid]
        self.assertEqual([(x['name'], x['vpc_id'], len(x['rules'])) for x in st],
                         [('cclfs-sgt-tok', 'vpc-0default', 2)])

        run = dict(ImageId='ami-0sg', InstanceType='t3.micro', MinCount=1, MaxCount=1,
                   SecurityGroupIds=[gid])
        self.assertClientError('InvalidGroup.NotFound', ec2.run_instances,
                               **dict(run, SecurityGroupIds=['sg-0nope']))
        iid = ec2.run_instances(**run)['Instances'][0]['InstanceId']
        self.wait_states([iid], 'running')
        self.assertClientError('DependencyViolation', ec2.delete_security_group, GroupId=gid)
        ec2.terminate_instances(InstanceIds=[iid])
        self.wait_states([iid], 'terminated')
        # A while after the instance is gone the group is still in use, then it goes.
        wait_for(lambda: self.try_delete_sg(gid), timeout=10, what='the group deleted')
        self.assertClientError('InvalidGroup.NotFound', ec2.delete_security_group, GroupId=gid)
        self.assertNotIn(gid, [x['id'] for x in self.state()['security_groups']])

    def try_delete_sg(self, gid):
        try:
            self.ec2.delete_security_group(GroupId=gid)
            return True
        except ClientError as e:
            self.assertEqual(e.response['Error']['Code'], 'DependencyViolation')
            return False

    def test_describe_filters_and_pages(self):
        ec2 = self.ec2
        self.control('POST', '/_fake/settings', {'page_size': 2})
        tag = [{'ResourceType': 'instance', 'Tags': [{'Key': 'page', 'Value': 'p1'}]}]
        r1 = ec2.run_instances(ImageId='ami-0page', MinCount=3, MaxCount=3,
                               ClientToken='page-a', TagSpecifications=tag)
        r2 = ec2.run_instances(ImageId='ami-0page', MinCount=1, MaxCount=2,
                               ClientToken='page-b', TagSpecifications=tag)
        ids = [i['InstanceId'] for r in (r1, r2) for i in r['Instances']]
        self.assertEqual(len(ids), 5)

        pages, token = [], None
        while True:
            kw = {'Filters': [{'Name': 'tag:page', 'Values': ['p1']}], 'MaxResults': 5}
            if token:
                kw['NextToken'] = token
            out = ec2.describe_instances(**kw)
            pages.append([(r['ReservationId'], [i['InstanceId'] for i in r['Instances']])
                          for r in out['Reservations']])
            token = out.get('NextToken')
            if not token:
                break
        flat = [i for page in pages for _, group in page for i in group]
        self.assertEqual(flat, ids)
        self.assertEqual([sum(len(g) for _, g in page) for page in pages], [2, 2, 1])
        # Page 2 holds the last of reservation 1 and the first of reservation 2.
        self.assertEqual([rid for rid, _ in pages[1]], [r1['ReservationId'], r2['ReservationId']])

        def found(filters):
            return [i['InstanceId'] for i in self.describe(Filters=filters, MaxResults=1000)]
        # page_size caps every page: follow the tokens.
        def found_all(filters):
            out, token = [], None
            while True:
                kw = {'Filters': filters}
                if token:
                    kw['NextToken'] = token
                page = ec2.describe_instances(**kw)
                out += [i['InstanceId'] for r in page['Reservations'] for i in r['Instances']]
                token = page.get('NextToken')
                if not token:
                    return out
        self.assertEqual(found_all([{'Name': 'tag:page', 'Values': ['nope', 'p*']}]), ids)
        self.assertEqual(found_all([{'Name': 'tag-key', 'Values': ['page']},
                                    {'Name': 'client-token', 'Values': ['page-b']}]), ids[3:])
        self.assertEqual(found_all([{'Name': 'reservation-id',
                                     'Values': [r1['ReservationId']]}]), ids[:3])
        self.assertEqual(found_all([{'Name': 'instance-id', 'Values': [ids[4], ids[0]]}]),
                         [ids[0], ids[4]])
        self.assertEqual(found([{'Name': 'tag:page', 'Values': ['p2']}]), [])
        self.assertClientError('InvalidParameterValue', ec2.describe_instances,
                               Filters=[{'Name': 'no-such-filter', 'Values': ['x']}])
        self.assertClientError('InvalidParameterValue', ec2.describe_instances, MaxResults=4)

        # Terminated while still pending: no daemon survives the race.
        ec2.terminate_instances(InstanceIds=ids)
        self.wait_states(ids, 'terminated')
        st = {i['id']: i for i in self.state()['instances']}
        for iid in ids:
            self.assertIsNone(st[iid]['host_dir'])
            if st[iid]['sshd_pid']:
                self.assertTrue(pid_gone(st[iid]['sshd_pid']))
        self.assertEqual(found_all([{'Name': 'tag:page', 'Values': ['p1']},
                                    {'Name': 'instance-state-name',
                                     'Values': ['terminated']}]), ids)

    def test_signatures(self):
        ec2 = self.ec2
        pub = open(os.path.join(self.hosts, 'id_ed25519.pub'), 'rb').read()
        ec2.import_key_pair(KeyName='tamper-a', PublicKeyMaterial=pub)
        # Correctly signed: passes.
        self.assertEqual(len(ec2.describe_key_pairs(KeyNames=['tamper-a'])['KeyPairs']), 1)

        tampered = self.client()
        changed = []

        def flip(request, **kwargs):
            body = request.body
            if isinstance(body, str):
                body = body.encode()
            new = body.replace(b'tamper-a', b'tamper-b')
            changed.append(new != body and len(new) == len(body))
            request.body = new
        tampered.meta.events.register('before-send.ec2.DescribeKeyPairs', flip)
        err = self.assertClientError('SignatureDoesNotMatch', tampered.describe_key_pairs,
                                     KeyNames=['tamper-a'], status=403)
        self.assertEqual(changed, [True])
        self.assertIn('does not match the signature you provided', err['Error']['Message'])
        ec2.delete_key_pair(KeyName='tamper-a')

        self.assertClientError('AuthFailure', self.client(akid='AKIAUNKNOWN').describe_key_pairs,
                               status=401)
        self.assertClientError('SignatureDoesNotMatch',
                               self.client(secret='wrong-secret').describe_key_pairs,
                               status=403)
        err = self.assertClientError('SignatureDoesNotMatch',
                                     self.client(region='xx-nowhere-1').describe_key_pairs,
                                     status=403)
        self.assertIn('xx-nowhere-1', err['Error']['Message'])

        # Session tokens: required, equal and signed for that credential, absent for others.
        self.client(TOKEN_AKID, TOKEN_SECRET, TOKEN).describe_key_pairs()
        self.assertClientError('AuthFailure',
                               self.client(TOKEN_AKID, TOKEN_SECRET).describe_key_pairs)
        self.assertClientError('AuthFailure',
                               self.client(TOKEN_AKID, TOKEN_SECRET, 'other').describe_key_pairs)
        self.assertClientError('AuthFailure',
                               self.client(AKID, SECRET, TOKEN).describe_key_pairs)

        # Raw requests: the checks before and after the signature.
        ok = {'Action': 'DescribeKeyPairs', 'Version': '2016-11-15'}
        self.assertEqual(self.raw(ok), (200, None))
        self.assertEqual(self.raw(ok, token=TOKEN, akid=TOKEN_AKID, secret=TOKEN_SECRET),
                         (200, None))
        self.assertEqual(self.raw(ok, date_twice=True), (400, 'InvalidParameter'))
        self.assertEqual(self.raw(ok, query='Action=DescribeKeyPairs'), (400, 'InvalidParameter'))
        old = (datetime.datetime.now(datetime.timezone.utc)
               - datetime.timedelta(minutes=20)).strftime('%Y%m%dT%H%M%SZ')
        self.assertEqual(self.raw(ok, amz_date=old), (400, 'RequestExpired'))
        recent = (datetime.datetime.now(datetime.timezone.utc)
                  - datetime.timedelta(minutes=10)).strftime('%Y%m%dT%H%M%SZ')
        self.assertEqual(self.raw(ok, amz_date=recent), (200, None))
        self.assertEqual(self.raw(ok, sign=False), (401, 'MissingAuthenticationToken'))
        self.assertEqual(self.raw({'Action': 'DescribeKeyPairs'}), (400, 'MissingParameter'))
        self.assertEqual(self.raw({'Action': 'FlyToTheMoon', 'Version': '2016-11-15'}),
                         (400, 'InvalidAction'))
        self.assertEqual(self.raw(ok, headers={'Content-Type': 'application/json'}),
                         (400, 'InvalidParameter'))

        with open(os.path.join(self.dir, 'requests.log')) as f:
            log = f.read().splitlines()
        self.assertIn('DescribeKeyPairs 403 SignatureDoesNotMatch', log)
        self.assertIn('DescribeKeyPairs 400 InvalidParameter', log)
        self.assertIn('FlyToTheMoon 400 InvalidAction', log)
        self.assertIn('DescribeKeyPairs 200 OK', log)

    def test_faults(self):
        ec2 = self.ec2
        self.control('POST', '/_fake/reset-calls')
        # Throttled once, then served.
        self.control('POST', '/_fake/faults', [
            {'action': 'DescribeKeyPairs', 'code': 'RequestLimitExceeded', 'status': 503}])
        self.assertClientError('RequestLimitExceeded', ec2.describe_key_pairs, status=503)
        ec2.describe_key_pairs()
        self.assertEqual(self.state()['calls']['DescribeKeyPairs'], 2)
        # botocore's own retries get through two throttles.
        self.control('POST', '/_fake/faults', [
            {'action': 'DescribePlacementGroups', 'code': 'RequestLimitExceeded', 'count': 2}])
        retrying = self.client(config=Config(retries={'total_max_attempts': 4,
                                                      'mode': 'standard'}))
        out = retrying.describe_placement_groups()
        self.assertEqual(out['ResponseMetadata']['RetryAttempts'], 2)
        self.assertEqual(self.state()['calls']['DescribePlacementGroups'], 3)

        # Capacity: nothing launches, and the same token launches later.
        before = len(self.state()['instances'])
        self.control('POST', '/_fake/faults', [{'action': 'RunInstances',
                                                'code': 'InsufficientInstanceCapacity'}])
        run = dict(ImageId='ami-0cap', MinCount=1, MaxCount=1, ClientToken='cap-token')
        err = self.assertClientError('InsufficientInstanceCapacity', ec2.run_instances,
                                     status=500, **run)
        self.assertIn('sufficient capacity', err['Error']['Message'])
        st = self.state()
        self.assertEqual(len(st['instances']), before)
        self.assertNotIn('cap-token', st['launches_per_token'])
        iid = ec2.run_instances(**run)['Instances'][0]['InstanceId']
        self.assertEqual(self.state()['launches_per_token']['cap-token'], 1)
        ec2.terminate_instances(InstanceIds=[iid])

        # Any action, after one request passes; twice.
        self.control('POST', '/_fake/faults', [{'action': '*', 'code': 'UnauthorizedOperation',
                                                'skip': 1, 'count': 2}])
        ec2.describe_key_pairs()
        self.assertClientError('UnauthorizedOperation', ec2.describe_instances, status=403)
        self.assertClientError('UnauthorizedOperation', ec2.describe_key_pairs, status=403)
        ec2.describe_key_pairs()
        self.control('POST', '/_fake/faults', [
            {'action': 'DescribeKeyPairs', 'code': 'InternalError'},
            {'action': 'DescribeKeyPairs', 'code': 'Unavailable', 'message': 'down'}])
        self.assertClientError('InternalError', ec2.describe_key_pairs, status=500)
        err = self.assertClientError('Unavailable', ec2.describe_key_pairs, status=503)
        self.assertEqual(err['Error']['Message'], 'down')
        ec2.describe_key_pairs()
        # Code "": a proxy's page, not an EC2 document.
        self.control('POST', '/_fake/faults', [{'action': 'DescribeKeyPairs', 'code': '',
                                                'status': 502}])
        with self.assertRaises(ClientError) as cm:
            ec2.describe_key_pairs()
        self.assertEqual(cm.exception.response['ResponseMetadata']['HTTPStatusCode'], 502)
        with open(os.path.join(self.dir, 'requests.log')) as f:
            self.assertIn('DescribeKeyPairs 502 -', f.read().splitlines())
        ec2.describe_key_pairs()

        # A slow answer times the client out; others are served meanwhile.
        # The fake holds the slow request for 10 s: the checks below are
        # orders against that hold, far from what a loaded machine adds.
        self.control('POST', '/_fake/faults', [{'action': 'DescribePlacementGroups',
                                                'delay_ms': 10000}])
        impatient = self.client(config=Config(read_timeout=1, connect_timeout=2,
                                              retries={'total_max_attempts': 1}))
        result = {}

        def slow():
            t0 = time.monotonic()
            try:
                impatient.describe_placement_groups()
                result['outcome'] = 'answered'
            except ReadTimeoutError:
                result['outcome'] = 'timeout'
            result['took'] = time.monotonic() - t0
        t = threading.Thread(target=slow)
        held = time.monotonic()
        t.start()
        time.sleep(0.2)
        self.client().describe_key_pairs()
        # Answered while the fake still held the slow request.
        self.assertLess(time.monotonic() - held, 10)
        t.join()
        self.assertEqual(result['outcome'], 'timeout')
        self.assertLess(result['took'], 10)

        # The launch happens, its answer is late: the retry with the same token gets the
        # same reservation and launches nothing more.
        self.control('POST', '/_fake/faults', [{'action': 'RunInstances', 'delay_ms': 2000,
                                                'delay_after': True}])
        late = dict(ImageId='ami-0late', MinCount=1, MaxCount=1, ClientToken='late-token')
        with self.assertRaises(ReadTimeoutError):
            impatient.run_instances(**late)
        st = self.state()
        self.assertEqual(st['launches_per_token']['late-token'], 1)
        first = [i for i in st['instances'] if i['client_token'] == 'late-token']
        self.assertEqual(len(first), 1)
        again = ec2.run_instances(**late)
        self.assertEqual([i['InstanceId'] for i in again['Instances']], [first[0]['id']])
        self.assertEqual(self.state()['launches_per_token']['late-token'], 1)
        ec2.terminate_instances(InstanceIds=[first[0]['id']])

        # Latency on every signed request.
        self.control('POST', '/_fake/settings', {'latency_ms': 300})
        t0 = time.monotonic()
        ec2.describe_key_pairs()
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)

    # ------------------------------------------------------------ the catalog calls

    @classmethod
    def pricing(cls, region=REGION):
        return cls.client(region=region, service='pricing')

    def post_signed(self, service, region, body, headers):
        """POST BODY signed for SERVICE in REGION; (status, body)."""
        req = AWSRequest(method='POST', url=self.url + '/', data=body, headers=headers)
        SigV4Auth(Credentials(AKID, SECRET), service, region).add_auth(req)
        # Generous: the first price-list call builds the fixture's catalog, which
        # takes seconds on a busy machine.
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=120)
        try:
            conn.request('POST', '/', body=body, headers=dict(req.headers.items()))
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def test_catalog_pages(self):
        """botocore's own paginators page through every catalog call; the counts are the
        fixture's (catalog/data), the prices the documented rule's."""
        cat = self.state()['catalog']
        items = cat['items']
        ec2 = self.client(region='eu-west-1')
        regions = ec2.describe_regions()['Regions']
        self.assertEqual(sorted(r['RegionName'] for r in regions), sorted(cat['enabled']))
        self.assertTrue(all(r['OptInStatus'] == 'opt-in-not-required' for r in regions))

        pages = list(ec2.get_paginator('describe_instance_types').paginate())
        types = {t['InstanceType']: t for p in pages for t in p['InstanceTypes']}
        self.assertEqual(len(types), items['DescribeInstanceTypes'])
        self.assertGreater(len(pages), 10)  # the small default page
        self.assertEqual(types['p5.4xlarge']['GpuInfo']['Gpus'][0]['Count'], 0)
        self.assertEqual(types['p5en.48xlarge']['GpuInfo']['Gpus'][0]['Name'], 'NVIDIA')
        self.assertEqual(types['p5.48xlarge']['GpuInfo']['Gpus'][0]['MemoryInfo'],
                         {'SizeInMiB': 81920})
        self.assertEqual(types['g5.xlarge']['GpuInfo']['Gpus'][0]['MemoryInfo'],
                         {'SizeInMiB': 22888})
        self.assertEqual(types['m7g.large']['ProcessorInfo']['SupportedArchitectures'],
                         ['arm64'])
        self.assertEqual(types['m7g.large']['NetworkInfo']['NetworkPerformance'],
                         'Up to 12.5 Gigabit')
        self.assertEqual(types['p6e-gb300.36xlarge']['GpuInfo']['Gpus'][0]['Name'], 'GB300')
        self.assertEqual(types['m7g.large']['VCpuInfo']['DefaultVCpus'], 2)
        self.assertEqual(types['m7g.large']['MemoryInfo']['SizeInMiB'], 8192)

        for lt in ('region', 'availability-zone'):
            pages = list(ec2.get_paginator('describe_instance_type_offerings').paginate(
                LocationType=lt))
            offers = [o for p in pages for o in p['InstanceTypeOfferings']]
            self.assertEqual(len(offers),
                             items['DescribeInstanceTypeOfferings:' + lt]['eu-west-1'])
            self.assertGreater(len(pages), 1)
            self.assertTrue(all(o['LocationType'] == lt for o in offers))
        pages = list(ec2.get_paginator('describe_spot_price_history').paginate(
            ProductDescriptions=['Linux/UNIX'], StartTime=datetime.datetime.now(
                datetime.timezone.utc), PaginationConfig={'PageSize': 1000}))
        spot = [e for p in pages for e in p['SpotPriceHistory']]
        self.assertEqual(len(spot), items['DescribeSpotPriceHistory:Linux/UNIX']['eu-west-1'])
        self.assertEqual(len(pages), -(-len(spot) // 1000))
        self.assertTrue(all(e['AvailabilityZone'].startswith('eu-west-1') for e in spot))
        self.assertClientError('InvalidParameterValue', ec2.describe_instance_types,
                               MaxResults=1000)

        # The Price List: one Linux entry per priced type, at us-east-1 x the factor.
        filters = [{'Type': 'TERM_MATCH', 'Field': f, 'Value': v} for f, v in (
            ('regionCode', 'eu-west-1'), ('operatingSystem', 'Linux'), ('tenancy', 'Shared'),
            ('preInstalledSw', 'NA'), ('capacitystatus', 'Used'))]
        pages = list(self.pricing().get_paginator('get_products').paginate(
            ServiceCode='AmazonEC2', Filters=filters))
        prices = {}
        for p in pages:
            for text in p['PriceList']:
                e = json.loads(text)
                od = next(iter(e['terms']['OnDemand'].values()))
                dim = next(iter(od['priceDimensions'].values()))
                prices[e['product']['attributes']['instanceType']] = float(
                    dim['pricePerUnit']['USD'])
        self.assertEqual(len(prices), items['GetProducts:Linux']['eu-west-1'])
        self.assertGreater(len(pages), 10)
        self.assertAlmostEqual(prices['t3.micro'], round(0.0104 * cat['factor']['eu-west-1'], 6))
        self.assertEqual(cat['factor']['eu-west-1'], 1.1)
        everything = sum(len(p['PriceList']) for p in self.pricing().get_paginator(
            'get_products').paginate(ServiceCode='AmazonEC2', Filters=filters[:1]))
        self.assertGreater(everything, len(prices))  # the other variants
        calls = self.state()['calls_by_region']
        self.assertGreater(calls['DescribeSpotPriceHistory']['eu-west-1'], 0)
        self.assertGreater(calls['GetProducts']['us-east-1'], 0)

    def test_catalog_signatures(self):
        """EC2 signed for pricing, pricing signed for EC2, pricing outside us-east-1 and an
        EC2 region the fake does not know: refused."""
        form = {'Content-Type': 'application/x-www-form-urlencoded; charset=utf-8'}
        body = b'Action=DescribeRegions&Version=2016-11-15'
        self.assertEqual(self.post_signed('ec2', 'eu-west-1', body, form)[0], 200)
        status, out = self.post_signed('pricing', 'us-east-1', body, form)
        self.assertEqual(status, 403)
        self.assertIn(b'SignatureDoesNotMatch', out)
        status, out = self.post_signed('ec2', 'xx-nowhere-1', body, form)
        self.assertEqual(status, 403)
        self.assertIn(b'xx-nowhere-1', out)
        target = {'Content-Type': 'application/x-amz-json-1.1',
                  'X-Amz-Target': 'AWSPriceListService.GetProducts'}
        query = json.dumps({'ServiceCode': 'AmazonEC2', 'MaxResults': 1}).encode()
        self.assertEqual(self.post_signed('pricing', 'us-east-1', query, target)[0], 200)
        for service, region in (('ec2', 'us-east-1'), ('pricing', 'eu-central-1')):
            status, out = self.post_signed(service, region, query, target)
            self.assertEqual(status, 403, (service, region))
            self.assertEqual(json.loads(out)['__type'], 'SignatureDoesNotMatch')
        self.assertClientError('SignatureDoesNotMatch', self.pricing('eu-central-1').get_products,
                               ServiceCode='AmazonEC2')

    def test_ssh_silent(self):
        ec2 = self.ec2
        for bad in (2, -1, 'yes'):
            with self.assertRaises(urllib.error.HTTPError) as cm:
                self.control('POST', '/_fake/settings', {'ssh_silent': bad})
            self.assertEqual(cm.exception.code, 400)
        self.assertEqual(self.control('POST', '/_fake/settings', {'ssh_silent': 1})
                         ['settings']['ssh_silent'], 1)
        silent = [i['InstanceId'] for i in ec2.run_instances(
            ImageId='ami-0silent', MinCount=2, MaxCount=2,
            ClientToken='silent-a')['Instances']]
        # The setting holds for launches from then on: not for a retried token, nor
        # for what is launched after it is turned off.
        self.control('POST', '/_fake/settings', {'ssh_silent': 0})
        again = ec2.run_instances(ImageId='ami-0silent', MinCount=2, MaxCount=2,
                                  ClientToken='silent-a')['Instances']
        self.assertEqual([i['InstanceId'] for i in again], silent)
        loud = ec2.run_instances(ImageId='ami-0silent', MinCount=1, MaxCount=1,
                                 ClientToken='silent-b')['Instances'][0]['InstanceId']
        addrs = {i['InstanceId']: i['PublicIpAddress']
                 for i in self.wait_states(silent + [loud], 'running')}
        st = {i['id']: i for i in self.state()['instances']}
        for iid in silent:
            self.assertEqual((st[iid]['ssh_silent'], st[iid]['silent_listening'],
                              st[iid]['sshd_pid'], st[iid]['host_dir']),
                             (True, True, None, None))
        self.assertEqual((st[loud]['ssh_silent'], st[loud]['silent_listening']),
                         (False, False))
        self.assertFalse(pid_gone(st[loud]['sshd_pid']))

        a, b = silent
        conns = {iid: [self.assertSilent(addrs[iid]), self.assertSilent(addrs[iid])]
                 for iid in silent}
        # ssh connects and waits for the banner until its own timeout.
        t0 = time.monotonic()
        r = subprocess.run(['ssh', '-F', os.path.join(self.hosts, 'ssh_config'), '-o',
                            'ConnectTimeout=2', 'root@' + addrs[a], 'true'],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=30)
        took = time.monotonic() - t0
        self.assertEqual(r.returncode, 255, r.stderr)
        self.assertIn('banner exchange', r.stderr)
        self.assertGreaterEqual(took, 1.8)
        # A real sshd next to them still greets.
        with socket.create_connection((addrs[loud], 22), timeout=5) as c:
            c.settimeout(5)
            self.assertTrue(c.recv(64).startswith(b'SSH-2.0-'))

        # Stop: the listener and its connections close; start: silent again, elsewhere.
        ec2.stop_instances(InstanceIds=[a])
        self.assertClosed(addrs[a], conns.pop(a))
        self.assertFalse(self.inst_state(a)['silent_listening'])
        self.wait_states([a], 'stopped')
        ec2.start_instances(InstanceIds=[a])
        new = self.wait_states([a], 'running')[0]['PublicIpAddress']
        self.assertNotEqual(new, addrs[a])
        self.assertClosed(addrs[a])
        conns[a] = [self.assertSilent(new)]
        addrs[a] = new

        # Terminate: nothing listens, every connection closed, no thread left.
        ec2.terminate_instances(InstanceIds=silent + [loud])
        for iid in silent:
            self.assertClosed(addrs[iid], conns[iid])
        st = {i['id']: i for i in self.state()['instances']}
        self.assertEqual([st[iid]['silent_listening'] for iid in silent], [False, False])
        self.assertTrue(pid_gone(st[loud]['sshd_pid']))
        self.wait_states(silent + [loud], 'terminated')
        left = subprocess.run(['ss', '-Htln', 'src', addrs[a]], capture_output=True,
                              text=True).stdout
        self.assertEqual(left.strip(), '')

    # ------------------------------------------------------------ SSM, images, launches

    def test_ssm_parameters_and_images(self):
        """The public parameters' images, per region and architecture, and DescribeImages
        of them and of the user's images."""
        self.control('POST', '/_fake/reset-calls')
        east, west = self.client(service='ssm'), self.client(service='ssm', region='eu-west-1')
        ids = {}
        for name, arch in SSM_PARAMETERS.items():
            got = east.get_parameter(Name=name)['Parameter']
            self.assertEqual((got['Name'], got['Type'], got['Version'], got['DataType'],
                              got['ARN']),
                             (name, 'String', 1, 'text', 'arn:aws:ssm:us-east-1::parameter' + name))
            self.assertRegex(got['Value'], r'^ami-0[0-9a-f]{16}$')
            self.assertIsInstance(got['LastModifiedDate'], datetime.datetime)
            self.assertEqual(east.get_parameter(Name=name)['Parameter']['Value'], got['Value'])
            other = west.get_parameter(Name=name)['Parameter']
            self.assertNotEqual(other['Value'], got['Value'])
            self.assertEqual(other['ARN'], 'arn:aws:ssm:eu-west-1::parameter' + name)
            ids[got['Value']] = arch
        self.assertEqual(len(ids), len(SSM_PARAMETERS))
        err = self.assertClientError('ParameterNotFound', east.get_parameter,
                                     Name='/aws/service/debian/release/11/latest/amd64',
                                     status=400)
        self.assertEqual(err['Error']['Message'], '')
        st = self.state()
        self.assertEqual(st['calls']['GetParameter'], 3 * len(SSM_PARAMETERS) + 1)
        self.assertEqual(st['calls_by_region']['GetParameter'],
                         {'us-east-1': 2 * len(SSM_PARAMETERS) + 1,
                          'eu-west-1': len(SSM_PARAMETERS)})
        with open(os.path.join(self.dir, 'requests.log')) as f:
            self.assertIn('GetParameter 400 ParameterNotFound\n', f.read())
        # Faults and deny reach it; a signature for another service does not.
        name = next(iter(SSM_PARAMETERS))
        self.control('POST', '/_fake/faults', [{'action': 'GetParameter',
                                                'code': 'ThrottlingException'}])
        self.assertClientError('ThrottlingException', east.get_parameter, Name=name)
        east.get_parameter(Name=name)
        self.control('POST', '/_fake/settings', {'deny': ['GetParameter']})
        err = self.assertClientError('AccessDeniedException', east.get_parameter, Name=name,
                                     status=400)
        self.assertIn('is not authorized to perform: ssm:GetParameter on resource: '
                      'arn:aws:ssm:us-east-1::parameter' + name, err['Error']['Message'])
        self.control('POST', '/_fake/settings', {'deny': []})
        body = json.dumps({'Name': name}).encode()
        hdrs = {'Content-Type': 'application/x-amz-json-1.1',
                'X-Amz-Target': 'AmazonSSM.GetParameter'}
        self.assertEqual(self.post_signed('ssm', 'eu-west-1', body, hdrs)[0], 200)
        self.assertEqual(self.post_signed('ec2', 'eu-west-1', body, hdrs)[0], 403)

        # DescribeImages: each image with its parameter's architecture, in any region.
        ec2 = self.client(region='eu-west-1')
        images = ec2.describe_images(ImageIds=list(ids))['Images']
        self.assertEqual({i['ImageId']: i['Architecture'] for i in images}, ids)
        for im in images:
            self.assertEqual((im['State'], im['Public'], im['ImageType'],
                              im['RootDeviceType'], im['RootDeviceName'],
                              im['VirtualizationType'], im['PlatformDetails']),
                             ('available', True, 'machine', 'ebs', '/dev/xvda', 'hvm',
                              'Linux/UNIX'))
            self.assertTrue(im['ImageLocation'].endswith('/' + im['Name']))
        names = sorted(i['Name'] for i in images)
        self.assertIn('al2023-ami-2023.6.20241111.0-kernel-6.1-arm64', names)
        self.assertIn('ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-arm64-server-20241109',
                      names)
        self.assertIn('debian-12-arm64-20241110-1927', names)
        user = ec2.describe_images(ImageIds=['ami-0cclfs', 'ami-0armuser'])['Images']
        self.assertEqual([(i['ImageId'], i['Architecture'], i['OwnerId']) for i in user],
                         [('ami-0cclfs', 'x86_64', '123456789012'),
                          ('ami-0armuser', 'arm64', '123456789012')])
        err = self.assertClientError('InvalidAMIID.NotFound', ec2.describe_images,
                                     ImageIds=['ami-bad42'], status=400)
        self.assertEqual(err['Error']['Message'], "The image id '[ami-bad42]' does not exist")
        self.assertEqual(ec2.describe_images(ImageIds=list(ids), Owners=['self'])['Images'], [])
        # Without ids: the region's public images, by owner and filter.
        amazon = ec2.describe_images(Owners=['amazon'])['Images']
        self.assertEqual(sorted(i['Architecture'] for i in amazon), ['arm64', 'x86_64'])
        arm = ec2.describe_images(Filters=[{'Name': 'architecture', 'Values': ['arm64']},
                                           {'Name': 'name', 'Values': ['debian-12-*']}])
        self.assertEqual([i['Name'] for i in arm['Images']], ['debian-12-arm64-20241110-1927'])

    def test_dry_run_and_deny(self):
        ec2 = self.ec2
        self.control('POST', '/_fake/reset-calls')
        before = self.state()
        run = dict(ImageId='ami-0dry', InstanceType='t3.micro', MinCount=1, MaxCount=1,
                   ClientToken='dry-token', DryRun=True)
        err = self.assertClientError('DryRunOperation', ec2.run_instances, **run, status=412)
        self.assertEqual(err['Error']['Message'],
                         'Request would have succeeded, but DryRun flag is set.')
        # Checked as a real call is: image, group, key pair, zone.
        self.assertClientError('InvalidAMIID.NotFound', ec2.run_instances,
                               **dict(run, ImageId='ami-bad7'))
        self.assertClientError('InvalidGroup.NotFound', ec2.run_instances,
                               **dict(run, SecurityGroupIds=['sg-0none']))
        self.assertClientError('InvalidKeyPair.NotFound', ec2.run_instances,
                               **dict(run, KeyName='nokey'))
        self.assertClientError('InvalidParameterValue', ec2.run_instances,
                               **dict(run, InstanceType='m7g.large'))
        self.assertClientError('DryRunOperation', ec2.describe_instances, DryRun=True)
        self.assertClientError('DryRunOperation', ec2.describe_images, DryRun=True,
                               ImageIds=['ami-0dry'])
        self.assertClientError('DryRunOperation', ec2.create_security_group, DryRun=True,
                               GroupName='dry-sg', Description='dry')
        self.assertClientError('InvalidInstanceID.NotFound', ec2.terminate_instances,
                               DryRun=True, InstanceIds=['i-0123456789abcdef0'])
        pub = open(os.path.join(self.hosts, 'id_ed25519.pub'), 'rb').read()
        self.assertClientError('DryRunOperation', ec2.import_key_pair, DryRun=True,
                               KeyName='dry-key', PublicKeyMaterial=pub)
        st = self.state()
        self.assertEqual(len(st['instances']), len(before['instances']))
        self.assertNotIn('dry-token', st['launches_per_token'])
        self.assertNotIn('dry-key', st['key_pairs'])
        self.assertNotIn('dry-sg', [g['name'] for g in st['security_groups']])
        self.assertEqual(st['dry_runs'], {'RunInstances': 5, 'DescribeInstances': 1,
                                          'DescribeImages': 1, 'CreateSecurityGroup': 1,
                                          'TerminateInstances': 1, 'ImportKeyPair': 1})
        self.assertEqual(st['calls']['RunInstances'], 5)
        with open(os.path.join(self.dir, 'requests.log')) as f:
            self.assertIn('RunInstances 412 DryRunOperation\n', f.read())
        # A fault on RunInstances answers a dry run too.
        self.control('POST', '/_fake/faults', [{'action': 'RunInstances',
                                                'code': 'VcpuLimitExceeded'}])
        self.assertClientError('VcpuLimitExceeded', ec2.run_instances, **run)
        self.assertClientError('DryRunOperation', ec2.run_instances, **run)

        # deny: every call of the actions, dry run or not, is unauthorized.
        self.control('POST', '/_fake/settings', {'deny': ['RunInstances', 'DescribeImages']})
        for dry in (True, False):
            err = self.assertClientError('UnauthorizedOperation', ec2.run_instances,
                                         **dict(run, DryRun=dry), status=403)
            msg = err['Error']['Message']
            self.assertTrue(msg.startswith(
                'You are not authorized to perform this operation. User: '
                'arn:aws:iam::123456789012:user/cclfs is not authorized to perform: '
                'ec2:RunInstances on resource: arn:aws:ec2:us-east-1:123456789012:* because '
                'no identity-based policy allows the ec2:RunInstances action. Encoded '
                'authorization failure message: '), msg)
        self.assertClientError('UnauthorizedOperation', ec2.describe_images,
                               ImageIds=['ami-0cclfs'])
        self.assertClientError('DryRunOperation', ec2.describe_instances, DryRun=True)
        self.assertEqual(len(self.state()['instances']), len(before['instances']))
        for bad in ({'deny': 'RunInstances'}, {'capacity': [{'market': 'reserved'}]},
                    {'capacity': [{'code': 'Unavailable'}]}, {'capacity': {}}):
            with self.assertRaises(urllib.error.HTTPError) as cm:
                self.control('POST', '/_fake/settings', bad)
            self.assertEqual(cm.exception.code, 400)

    def test_zones_architecture_and_capacity(self):
        """Placement.AvailabilityZone, the subnet's zone, the first zone offering the
        type; the architecture check; the capacity setting. Silent instances (no sshd)."""
        self.control('POST', '/_fake/settings', {'ssh_silent': 1})
        ec2, west = self.ec2, self.client(region='us-west-2')
        arm_ami = self.client(service='ssm').get_parameter(
            Name=SSM_ARM64_AL2023)['Parameter']['Value']
        err = self.assertClientError('InvalidParameterValue', ec2.run_instances,
                                     ImageId='ami-0cclfs', InstanceType='m7g.large',
                                     MinCount=1, MaxCount=1, status=400)
        self.assertEqual(err['Error']['Message'], ARCH_MESSAGE % ('arm64', 'x86_64'))
        err = self.assertClientError('InvalidParameterValue', ec2.run_instances,
                                     ImageId=arm_ami, InstanceType='t3.micro',
                                     MinCount=1, MaxCount=1)
        self.assertEqual(err['Error']['Message'], ARCH_MESSAGE % ('x86_64', 'arm64'))

        launched = []

        def launch(client, **kw):
            out = client.run_instances(**dict({'MinCount': 1, 'MaxCount': 1}, **kw))[
                'Instances'][0]
            launched.append((client, out['InstanceId']))
            return out
        one = launch(ec2, ImageId=arm_ami, InstanceType='m7g.large',
                     Placement={'AvailabilityZone': 'us-east-1c'})
        self.assertEqual((one['Placement']['AvailabilityZone'], one['Architecture']),
                         ('us-east-1c', 'arm64'))
        described = self.describe([one['InstanceId']])[0]
        self.assertEqual(described['Placement']['AvailabilityZone'], 'us-east-1c')
        s = self.inst_state(one['InstanceId'])
        self.assertEqual((s['zone'], s['market'], s['architecture']),
                         ('us-east-1c', 'on-demand', 'arm64'))
        # us-west-2 offers the new type in us-west-2b only.
        gb = dict(ImageId='ami-0armgb', InstanceType='p6e-gb300.36xlarge')
        self.assertEqual(launch(west, **gb)['Placement']['AvailabilityZone'], 'us-west-2b')
        self.assertEqual(launch(west, SubnetId='subnet-0cclfs', **gb)['Placement'][
            'AvailabilityZone'], 'us-west-2a')
        err = self.assertClientError('Unsupported', west.run_instances, MinCount=1, MaxCount=1,
                                     Placement={'AvailabilityZone': 'us-west-2c'}, **gb,
                                     status=400)
        self.assertEqual(err['Error']['Message'],
                         'Your requested instance type (p6e-gb300.36xlarge) is not supported '
                         'in your requested Availability Zone (us-west-2c). Please retry your '
                         'request by not specifying an Availability Zone or choosing '
                         'us-west-2b.')
        err = self.assertClientError('InvalidParameterValue', west.run_instances, MinCount=1,
                                     MaxCount=1, Placement={'AvailabilityZone': 'us-west-2z'},
                                     **gb)
        self.assertEqual(err['Error']['Message'], 'Invalid availability zone: [us-west-2z]')

        # Capacity: what matches launches nothing; dry runs are not refused.
        self.control('POST', '/_fake/settings', {'capacity': [
            {'zone': 'us-east-1b', 'instance_type': 't3.micro', 'market': 'on-demand'},
            {'zone': 'us-east-1d', 'instance_type': '*', 'market': '*'},
            {'zone': '*', 'instance_type': 't3.nano', 'market': 'spot'},
            {'zone': 'us-east-1a', 'instance_type': 't3.small', 'code': 'SpotMaxPriceTooLow'},
            {'instance_type': 't3.medium', 'code': 'InsufficientHostCapacity'}]})
        count = len(self.state()['instances'])
        tiny = dict(ImageId='ami-0cap', InstanceType='t3.micro', MinCount=1, MaxCount=1,
                    Placement={'AvailabilityZone': 'us-east-1b'})
        err = self.assertClientError('InsufficientInstanceCapacity', ec2.run_instances,
                                     **tiny, status=500)
        self.assertEqual(err['Error']['Message'],
                         'We currently do not have sufficient capacity in the Availability '
                         'Zone you requested (us-east-1b). Our system will be working on '
                         'provisioning additional capacity. You can currently get t3.micro '
                         'capacity by not specifying an Availability Zone in your request or '
                         'choosing us-east-1a, us-east-1c, us-east-1f.')
        self.assertClientError('DryRunOperation', ec2.run_instances, DryRun=True, **tiny)
        spot = {'MarketType': 'spot'}
        err = self.assertClientError('InsufficientInstanceCapacity', ec2.run_instances,
                                     **dict(tiny, InstanceType='t3.nano',
                                            InstanceMarketOptions=spot))
        self.assertEqual(err['Error']['Message'],
                         'There is no Spot capacity available that matches your request.')
        self.assertClientError('SpotMaxPriceTooLow', ec2.run_instances,
                               **dict(tiny, InstanceType='t3.small', Placement={}))
        self.assertClientError('InsufficientHostCapacity', ec2.run_instances,
                               **dict(tiny, InstanceType='t3.medium', Placement={}),
                               status=500)
        self.assertEqual(len(self.state()['instances']), count)
        # What does not match launches: another zone, the other market.
        self.assertEqual(launch(ec2, **dict(tiny, InstanceType='t3.nano'))[
            'Placement']['AvailabilityZone'], 'us-east-1b')
        self.assertEqual(launch(ec2, ImageId='ami-0cap', InstanceType='t3.micro',
                                Placement={'AvailabilityZone': 'us-east-1c'})
                         ['Placement']['AvailabilityZone'], 'us-east-1c')
        mine = [iid for client, iid in launched if client is ec2]
        found = self.describe(Filters=[{'Name': 'instance-id', 'Values': mine},
                                       {'Name': 'availability-zone', 'Values': ['us-east-1c']},
                                       {'Name': 'architecture', 'Values': ['arm64']}])
        self.assertEqual([i['InstanceId'] for i in found], [one['InstanceId']])
        for client, iid in launched:
            client.terminate_instances(InstanceIds=[iid])

    def test_spot_reclaim(self):
        """Spot instances: launched, refused stop, reclaimed (sshd gone, terminated with
        the spot reason), and a new launch after."""
        ec2 = self.ec2
        base = dict(ImageId='ami-0spot', InstanceType='t3.micro', MinCount=1, MaxCount=1)
        for opts, code in (
                ({'SpotInstanceType': 'persistent', 'InstanceInterruptionBehavior': 'terminate'},
                 'InvalidParameterCombination'),
                ({'SpotInstanceType': 'one-time', 'InstanceInterruptionBehavior': 'stop'},
                 'InvalidParameterCombination'),
                ({'SpotInstanceType': 'persistent', 'InstanceInterruptionBehavior': 'stop'},
                 'InvalidParameterValue'),
                ({'SpotInstanceType': 'weekly'}, 'InvalidParameterValue'),
                ({'InstanceInterruptionBehavior': 'pause'}, 'InvalidParameterValue')):
            self.assertClientError(code, ec2.run_instances, **base, InstanceMarketOptions={
                'MarketType': 'spot', 'SpotOptions': opts})
        market = {'MarketType': 'spot', 'SpotOptions': {
            'SpotInstanceType': 'one-time', 'InstanceInterruptionBehavior': 'terminate'}}
        out = ec2.run_instances(**base, ClientToken='spot-1',
                                InstanceMarketOptions=market)['Instances'][0]
        iid = out['InstanceId']
        self.assertEqual(out['InstanceLifecycle'], 'spot')
        self.assertRegex(out['SpotInstanceRequestId'], r'^sir-[0-9a-f]{8}$')
        running = self.wait_states([iid], 'running')[0]
        self.assertEqual(running['InstanceLifecycle'], 'spot')
        self.assertEqual(running['SpotInstanceRequestId'], out['SpotInstanceRequestId'])
        self.assertEqual([i['InstanceId'] for i in self.describe(Filters=[
            {'Name': 'instance-lifecycle', 'Values': ['spot']},
            {'Name': 'client-token', 'Values': ['spot-1']}])], [iid])
        addr = running['PublicIpAddress']
        r = self.ssh(addr)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, addr), r.stderr)
        s = self.inst_state(iid)
        self.assertEqual((s['market'], s['spot_request_id']),
                         ('spot', out['SpotInstanceRequestId']))
        self.assertClientError('UnsupportedOperation', ec2.stop_instances, InstanceIds=[iid])

        # A silent on-demand instance and a silent spot one, for the refusals and the
        # reclaim nobody polls.
        self.control('POST', '/_fake/settings', {'ssh_silent': 1})
        od = ec2.run_instances(**base)['Instances'][0]['InstanceId']
        quiet = ec2.run_instances(**base, InstanceMarketOptions=market)['Instances'][0][
            'InstanceId']
        self.wait_states([od, quiet], 'running')
        for data in ({'instance_id': od}, {'instance_id': 'i-0123456789abcdef0'},
                     {'instance_ids': []}, {}):
            with self.assertRaises(urllib.error.HTTPError) as cm:
                self.control('POST', '/_fake/reclaim', data)
            self.assertEqual(cm.exception.code, 400)
            self.assertIn('error', json.load(cm.exception))

        self.assertEqual(self.control('POST', '/_fake/reclaim', {'instance_id': iid}),
                         {'reclaimed': [iid]})
        s = self.inst_state(iid)
        self.assertEqual((s['state'], s['state_reason_code']),
                         ('shutting-down', 'Server.SpotInstanceTermination'))
        self.assertTrue(pid_gone(s['sshd_pid']))
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection((addr, 22), timeout=5).close()
        gone = self.describe([iid])[0]
        self.assertEqual(gone['State']['Name'], 'terminated')
        self.assertEqual(gone['StateReason'], {
            'Code': 'Server.SpotInstanceTermination',
            'Message': 'Server.SpotInstanceTermination: Spot instance termination'})
        self.assertTrue(gone['StateTransitionReason'].startswith('Service initiated ('))
        with self.assertRaises(urllib.error.HTTPError) as cm:
            self.control('POST', '/_fake/reclaim', {'instance_ids': [iid]})
        self.assertEqual(cm.exception.code, 400)
        # Nobody polls: terminated within about a second all the same.
        quiet_addr = self.inst_state(quiet)['address']
        self.control('POST', '/_fake/reclaim', {'instance_ids': [quiet]})
        self.assertClosed(quiet_addr)
        wait_for(lambda: self.inst_state(quiet)['state'] == 'terminated', timeout=3,
                 what='the reclaimed instance to be terminated')

        # A new token launches anew, on a new address.
        self.control('POST', '/_fake/settings', {'ssh_silent': 0})
        again = ec2.run_instances(**base, ClientToken='spot-2',
                                  InstanceMarketOptions=market)['Instances'][0]
        self.assertNotEqual(again['InstanceId'], iid)
        new_addr = self.wait_states([again['InstanceId']], 'running')[0]['PublicIpAddress']
        self.assertNotEqual(new_addr, addr)
        r = self.ssh(new_addr)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, new_addr), r.stderr)
        self.assertEqual(self.state()['launches_per_token']['spot-1'], 1)
        ec2.terminate_instances(InstanceIds=[again['InstanceId'], od])

    def test_zz_sigterm_stops_every_sshd(self):
        """Last: SIGTERM with instances running; no daemon of the fake survives, no
        silent listener either."""
        ec2 = self.ec2
        ids = [i['InstanceId'] for i in ec2.run_instances(
            ImageId='ami-0end', MinCount=3, MaxCount=3)['Instances']]
        self.control('POST', '/_fake/settings', {'ssh_silent': 1})
        mute = ec2.run_instances(ImageId='ami-0end', MinCount=1,
                                 MaxCount=1)['Instances'][0]['InstanceId']
        mute_addr = self.wait_states([mute], 'running')[0]['PublicIpAddress']
        mute_conn = self.assertSilent(mute_addr)
        self.wait_states(ids, 'running')
        self.state()
        listed = subprocess.run(['bash', '-c', 'source "$1" && testhosts_pids "$2"', '_',
                                 TESTHOSTS, self.hosts], capture_output=True, text=True,
                                check=True).stdout.split()
        self.all_pids.update(int(p) for p in listed)
        self.assertGreaterEqual(len([p for p in self.all_pids if not pid_gone(p)]), 3)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(60), 0)
        left = [p for p in self.all_pids if not pid_gone(p)]
        self.assertEqual(left, [])
        listed = subprocess.run(['bash', '-c', 'source "$1" && testhosts_pids "$2"', '_',
                                 TESTHOSTS, self.hosts], capture_output=True, text=True,
                                check=True).stdout.split()
        self.assertEqual(listed, [])
        self.assertFalse(os.path.exists(os.path.join(self.dir, 'port')))
        self.assertClosed(mute_addr, [mute_conn])


if __name__ == '__main__':
    unittest.main()
