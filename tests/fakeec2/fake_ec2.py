#!/usr/bin/python3
# tests/fakeec2/fake_ec2.py: a fake EC2 Query API endpoint (API 2016-11-15) for the test
# suites: SigV4 checked with botocore's signer, key pairs, placement groups and instances
# in memory, each running instance a real sshd test host (tests/sshd/testhosts.bash) or,
# under the ssh_silent setting, a port 22 that accepts and never answers.
"""A fake EC2 endpoint.

    fake_ec2.py --dir DIR [--port 0] [--region us-east-1]
                [--credentials AKID:SECRET[:SESSIONTOKEN]]... [--net 127.0.2] [--first 10]
                [--delay-ms N] [--regions N] [--fail-pricing CODE] [--hang ACTION]...

The catalog options (each also read from the environment variable in brackets):
    --delay-ms N         every signed call waits N ms before it is answered
                         [FAKE_EC2_DELAY_MS]
    --regions N          only the first N regions are enabled (see fake_catalog.py for
                         the order and the fixture's rules) [FAKE_EC2_REGIONS]
    --fail-pricing CODE  every GetProducts is answered HTTP 400 with that error, e.g.
                         AccessDeniedException [FAKE_EC2_FAIL_PRICING]
    --hang ACTION        every call of ACTION (DescribeRegions, GetProducts...) is held
                         for an hour, as a call that never answers (repeatable)
                         [FAKE_EC2_HANG: space-separated actions]

Listens on 127.0.0.1:PORT; once listening, DIR/port holds the port and DIR/pid the pid.
DIR/requests.log gets one line per request, "ACTION HTTPSTATUS CODE-or-OK". SIGTERM or
SIGINT: every sshd it started is killed, then it exits 0.

EC2 actions (POST /, form body, SigV4-signed): ImportKeyPair, DeleteKeyPair,
DescribeKeyPairs, CreatePlacementGroup, DeletePlacementGroup, DescribePlacementGroups,
DescribeVpcs, DescribeSubnets, CreateSecurityGroup, AuthorizeSecurityGroupIngress,
DescribeSecurityGroups, DeleteSecurityGroup, DescribeImages, RunInstances,
DescribeInstances, StopInstances, StartInstances, TerminateInstances, and for the
catalog DescribeRegions, DescribeInstanceTypes, DescribeInstanceTypeOfferings (location
types region and availability-zone) and DescribeSpotPriceHistory, paginated with
MaxResults and NextToken (small default pages, the real API's maxima).

Regions: an EC2 call is answered for the region of its signature's scope (any region of
catalog/data/regions.csv, or --region): instances, key pairs and placement groups are
each region's own; a region that is not enabled (--regions) answers OptInRequired.

VPCs: every region has the default VPC vpc-0default and vpc-0cclfs, the VPC of the one
subnet the fake knows, subnet-0cclfs. Security groups are each region's own; sg-0cclfs
(in vpc-0cclfs) exists from the start, as one the user made. DescribeSecurityGroups
filters by group-name, group-id, vpc-id, tag:KEY and tag-key. DeleteSecurityGroup answers
DependencyViolation while an instance that is not terminated uses the group, and for
sg_release_ms after the last one turned terminated; RunInstances answers
InvalidGroup.NotFound for a SecurityGroupId.N that does not exist. The state's
"security_groups" lists the groups made through the API (id, name, description, vpc_id,
region, tags, rules: protocol, from_port, to_port and cidr or group).

DryRun=true (any EC2 action): the call is counted, logged and checked as far as the action
goes before it would change anything (signature, parameters, the image, key pair, groups,
zone and architecture of RunInstances, the instances of Stop/Start/Terminate...), then
answered HTTP 412 DryRunOperation "Request would have succeeded, but DryRun flag is
set." with nothing done; faults apply to it (before the checks), the capacity setting does
not. The state counts such calls per action in "dry_runs" (as well as in "calls").

deny (setting): a list of action names; every call of them, dry run or not, is answered
HTTP 403 UnauthorizedOperation "You are not authorized to perform this operation. User:
arn:aws:iam::123456789012:user/cclfs is not authorized to perform: ec2:ACTION on
resource: arn:aws:ec2:REGION:123456789012:* because no identity-based policy allows the
ec2:ACTION action. Encoded authorization failure message: BLOB" (after the signature and
before faults); a JSON action (GetParameter, GetProducts) in it is answered HTTP 400
{"__type": "AccessDeniedException", "message": "User: ... is not authorized to perform:
ssm:GetParameter on resource: PARAMETER-ARN because no identity-based policy allows the
ssm:GetParameter action"}.

Images: the public SSM parameters of PUBLIC_IMAGES (Amazon Linux 2023, Ubuntu 24.04 and
22.04, Debian 12; x86_64/amd64 and arm64) name in each region an image "ami-0" + 16 hex
digits of a SHA-256 of region and name, of the parameter's architecture and image name.
Any other id exists (in every region) as a user image of 123456789012, named as its id,
arm64 when the id contains "arm", x86_64 otherwise; an id starting with ami-bad does not
exist: InvalidAMIID.NotFound "The image id '[ID]' does not exist" (DescribeImages and
RunInstances; DescribeImages answers InvalidAMIID.Malformed for an id not like ami-X).
DescribeImages takes ImageId.N (without: the region's public images), Owner.N (self,
amazon or an account id) and Filter.N on name, architecture, image-id, owner-id, state,
image-type, is-public, root-device-type, virtualization-type, platform-details (other
filter names are not checked); each image has imageId, imageLocation, imageState
available, imageOwnerId, isPublic true, architecture, imageType machine, name,
creationDate, rootDeviceType ebs, rootDeviceName /dev/xvda, virtualizationType hvm,
platformDetails Linux/UNIX.

RunInstances and the catalog (fake_catalog.Launchables, read at the first launch):
  - architecture: the image's must be the instance type's (types.csv; a type it does not
    know is x86_64), else InvalidParameterValue "The architecture 'TYPE-ARCH' of the
    specified instance type does not match the architecture 'AMI-ARCH' of the specified
    AMI. Specify an instance type and an AMI that have matching architectures, and try
    again. You can use 'describe-instance-types' or 'describe-images' to discover the
    architecture of the instance type or AMI." An instance's architecture is its image's.
  - zone (placement/availabilityZone, state "zone"): Placement.AvailabilityZone; without
    it the subnet's (subnet-0cclfs is in REGION+"a"), else the first zone (offers.csv
    order) where the region offers the type, else REGION+"a". A zone the region does not
    have (offers.csv's zones; REGION+a..c for a region it does not know):
    InvalidParameterValue "Invalid availability zone: [ZONE]". A named zone where the
    region does not offer a type of types.csv: Unsupported "Your requested instance type
    (TYPE) is not supported in your requested Availability Zone (ZONE). Please retry your
    request by not specifying an Availability Zone or choosing ZONES." (the zones that
    offer it, comma-separated).
  - capacity (setting): a list of {"zone", "instance_type", "market", "code"} (each of the
    first three "*" when left out; market "on-demand", "spot" or "*"; code
    InsufficientInstanceCapacity (default), InsufficientHostCapacity or
    SpotMaxPriceTooLow). A RunInstances (not a dry run, not a repeated client token) whose
    zone, type and market match an entry launches nothing and is answered: for
    InsufficientInstanceCapacity on-demand HTTP 500 "We currently do not have sufficient
    capacity in the Availability Zone you requested (ZONE). Our system will be working on
    provisioning additional capacity. You can currently get TYPE capacity by not specifying
    an Availability Zone in your request or choosing ZONES." (the zones offering the type
    that no entry blocks; the last sentence is left out when there are none), for spot
    HTTP 500 "There is no Spot capacity available that matches your request.";
    InsufficientHostCapacity HTTP 500 "There is not enough capacity to fulfill your
    Dedicated Host request."; SpotMaxPriceTooLow HTTP 400 "Your Spot request price of
    MAXPRICE is lower than the minimum required Spot request fulfillment price."
  - spot: InstanceMarketOptions.MarketType=spot, SpotOptions.SpotInstanceType one-time
    (default) and SpotOptions.InstanceInterruptionBehavior terminate (default) launch spot
    instances: instanceLifecycle "spot" and spotInstanceRequestId "sir-" + 8 hex digits
    in the answers, "market": "spot" in the state ("on-demand" otherwise). Refused:
    persistent + terminate and one-time + stop/hibernate (InvalidParameterCombination), a
    value other than these (InvalidParameterValue), persistent + stop/hibernate
    (InvalidParameterValue: not served), SpotOptions without MarketType spot
    (InvalidParameterCombination), a MaxPrice that is not a decimal number.
    StopInstances of a spot instance: UnsupportedOperation (one-time requests).
  - addresses: a launch (or start) takes the lowest slot never given out, then the lowest
    freed one: a new instance gets a new address while there is one.

DescribeInstances filters: tag:KEY, tag-key, instance-state-name, instance-id, client-token,
reservation-id, availability-zone, instance-lifecycle (spot), architecture,
instance-type, image-id.

stateReason: TerminateInstances sets Client.UserInitiatedShutdown ("Client.
UserInitiatedShutdown: User initiated shutdown", stateTransitionReason "User initiated
(YYYY-MM-DD HH:MM:SS GMT)"); a spot reclaim Server.SpotInstanceTermination
("Server.SpotInstanceTermination: Spot instance termination", "Service initiated (...)");
a host that did not come up Server.InternalError. The state lists "state_reason" (the
message) and "state_reason_code".

SSM on the same port: a POST with X-Amz-Target AmazonSSM.GetParameter (JSON 1.1, SigV4
for service "ssm" in any region the fake knows; a region not enabled answers
UnrecognizedClientException), {"Name": NAME}: {"Parameter": {"Name", "Type": "String",
"Value": IMAGE-ID, "Version": 1, "LastModifiedDate": epoch seconds, "ARN":
"arn:aws:ssm:REGION::parameter" + NAME, "DataType": "text"}}; an unknown name HTTP 400
{"__type": "ParameterNotFound", "message": ""}. Faults, deny, the call counts and
requests.log take it as action GetParameter.

The AWS Price List Query API on the same port: a POST with X-Amz-Target
AWSPriceListService.GetProducts (JSON 1.1, SigV4 for service "pricing" in us-east-1),
ServiceCode AmazonEC2, TERM_MATCH filters, PriceList of JSON strings, NextToken paging
(MaxResults 1..100, default 20).

Control endpoint (same port, not signed):
    POST   /_fake/faults       JSON list of {"action", "code", "status", "message",
                               "count", "skip", "delay_ms", "delay_after"}; appended to
                               the faults (see Fault)
    DELETE /_fake/faults       clears them
    POST   /_fake/settings     JSON {"latency_ms", "pending_polls", "stopping_polls",
                               "page_size", "ssh_silent", "sg_release_ms" (default 200),
                               "deny" (action names), "capacity" (entries, see above)}
    POST   /_fake/reclaim      JSON {"instance_id": ID} or {"instance_ids": [IDS]}: EC2
                               takes spot instances back: each turns shutting-down at
                               once, its sshd (or silent port) stopped as
                               TerminateInstances does, and terminated at the next
                               DescribeInstances or after about a second. 200
                               {"reclaimed": [IDS]}; 400 {"error"} for an unknown
                               instance, one that is not spot, or one shutting down or
                               terminated (then none is reclaimed)
    GET    /_fake/state        JSON: instances (each with "zone", "market",
                               "architecture", "spot_request_id"), key pairs, placement
                               groups, call counts (also per action and region:
                               "calls_by_region"; DryRun calls per action: "dry_runs"),
                               launches per client token, and "catalog": the enabled
                               regions, the items each paginated call has per region
                               ("items") and the page maxima ("page_max")
    POST   /_fake/reset-calls  zeroes the call counts (and "dry_runs")

Instance k's sshd listens on NET.K:22 (a free slot K from --first up), accepting the
client key of DIR/testhosts (ssh -F DIR/testhosts/ssh_config root@ADDRESS) and the
public key of the instance's key pair.

ssh_silent (0 or 1, default 0): the instances RunInstances launches while it is 1 get no
sshd. In its place, a listener of this process on NET.K:22 accepts connections and never
sends a byte (what it receives is read and dropped), as an instance whose sshd hangs or
whose security group drops port 22 would: a client's connect succeeds and it then waits
for the SSH banner until its own timeout. Such an instance turns running as the others
do, keeps being silent after a stop and start (on its new address), and StopInstances
and TerminateInstances close its listener and every connection it accepted; SIGTERM
closes them all. It has no host directory and no sshd_pid; /_fake/state lists it with
"ssh_silent": true.
"""

import argparse
import base64
import binascii
import datetime
import hashlib
import hmac
import json
import os
import re
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

import fake_catalog

API_VERSION = '2016-11-15'
XMLNS = 'http://ec2.amazonaws.com/doc/2016-11-15/'
XML_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'
OWNER_ID = '123456789012'
DEFAULT_CREDENTIALS = 'AKIAFAKEEC2EXAMPLE:fake-ec2-secret-key'
TESTHOSTS_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'sshd', 'testhosts.bash')
MAX_CONCURRENT_LAUNCHES = 8
MAX_BODY = 1 << 20
CLOCK_SKEW = 15 * 60  # seconds X-Amz-Date may be off

STATE_CODES = {'pending': 0, 'running': 16, 'shutting-down': 32, 'terminated': 48,
               'stopping': 64, 'stopped': 80}
TRANSITIONAL = ('pending', 'stopping', 'shutting-down')

# Status and message of the codes a fault may name without saying them.
# The VPCs of every region: a default one, and the VPC of the subnets the fake knows.
DEFAULT_VPC = 'vpc-0default'
SUBNETS = {'subnet-0cclfs': 'vpc-0cclfs'}
PRESET_SG = 'sg-0cclfs'

FAULT_DEFAULTS = {
    'DependencyViolation': (400, 'resource has a dependent object'),
    'RequestLimitExceeded': (503, 'Request limit exceeded.'),
    'Unavailable': (503, 'The server is overloaded and can\'t handle the request.'),
    'InternalError': (500, 'An internal error has occurred.'),
    'InsufficientInstanceCapacity': (
        500, 'We currently do not have sufficient capacity in the Availability Zone you '
             'requested. Our system will be working on provisioning additional capacity.'),
    'UnauthorizedOperation': (403, 'You are not authorized to perform this operation.'),
    'AccessDeniedException': (400, 'User: arn:aws:iam::123456789012:user/cclfs is not '
                                   'authorized to perform: pricing:GetProducts'),
    'ThrottlingException': (400, 'Rate exceeded'),
}
PRICING_TARGET = 'AWSPriceListService.'
PRICING_REGION = 'us-east-1'
SSM_TARGET = 'AmazonSSM.'
# The public SSM parameters of the distributions' latest images, in every region:
# name -> (architecture, image name, owner). Their image ids are region_ami(region, name).
SSM_PREFIX = '/aws/service/'
OWNERS = {'amazon': '137112412989', 'canonical': '099720109477', 'debian': '136693071363'}
PUBLIC_IMAGES = {}
for _arch, _deb in (('x86_64', 'amd64'), ('arm64', 'arm64')):
    PUBLIC_IMAGES.update({
        SSM_PREFIX + 'ami-amazon-linux-latest/al2023-ami-kernel-default-' + _arch: (
            _arch, 'al2023-ami-2023.6.20241111.0-kernel-6.1-' + _arch, 'amazon'),
        SSM_PREFIX + 'canonical/ubuntu/server/24.04/stable/current/%s/hvm/ebs-gp3/ami-id'
        % _deb: (_arch, 'ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-%s-server-20241109'
                 % _deb, 'canonical'),
        SSM_PREFIX + 'canonical/ubuntu/server/22.04/stable/current/%s/hvm/ebs-gp3/ami-id'
        % _deb: (_arch, 'ubuntu/images/hvm-ssd-gp3/ubuntu-jammy-22.04-%s-server-20241109'
                 % _deb, 'canonical'),
        SSM_PREFIX + 'debian/release/12/latest/' + _deb: (
            _arch, 'debian-12-%s-20241110-1927' % _deb, 'debian'),
    })
SSM_MODIFIED = 1731283200  # LastModifiedDate of every public parameter (2024-11-11)
IMAGE_CREATED = '2024-11-11T00:00:00.000Z'
DRY_RUN_MESSAGE = 'Request would have succeeded, but DryRun flag is set.'
IAM_USER = 'arn:aws:iam::%s:user/cclfs' % OWNER_ID
SPOT_REASON = ('Server.SpotInstanceTermination',
               'Server.SpotInstanceTermination: Spot instance termination')
USER_REASON = ('Client.UserInitiatedShutdown',
               'Client.UserInitiatedShutdown: User initiated shutdown')
CAPACITY_CODES = ('InsufficientInstanceCapacity', 'InsufficientHostCapacity',
                  'SpotMaxPriceTooLow')
SPOT_RECLAIM_S = 1.0  # a reclaimed instance is terminated this long after at the latest
# Default and largest page of each paginated call (the defaults small, so that a client
# without MaxResults pages; the maxima the real API's).
PAGES = {'DescribeInstanceTypes': (20, 100), 'DescribeInstanceTypeOfferings': (200, 1000),
         'DescribeSpotPriceHistory': (200, 1000), 'GetProducts': (20, 100)}
HANG_MS = 3600 * 1000

PUBKEY_TYPES = ('ssh-ed25519', 'ssh-rsa', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384',
                'ecdsa-sha2-nistp521')


class ApiError(Exception):
    """An EC2 error answer: HTTP status, error code, message."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def bad_param(message):
    return ApiError(400, 'InvalidParameterValue', message)


def gmt_now():
    """The time in a stateTransitionReason."""
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S GMT')


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.000Z')


def hex_id(prefix):
    return prefix + secrets.token_hex(9)[:17]


def region_ami(region, name):
    """The image id of public parameter NAME in REGION (deterministic)."""
    digest = hashlib.sha256(('%s\0%s' % (region, name)).encode()).hexdigest()
    return 'ami-0' + digest[:16]


def true_param(params, name):
    return (params.get(name) or '').lower() == 'true'


def deny_message(service, action, resource):
    """The message of an action a policy does not allow (EC2 adds an encoded blob)."""
    text = ('User: %s is not authorized to perform: %s:%s on resource: %s because no '
            'identity-based policy allows the %s:%s action'
            % (IAM_USER, service, action, resource, service, action))
    if service != 'ec2':
        return text
    blob = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode('ascii')
    return ('You are not authorized to perform this operation. %s. Encoded authorization '
            'failure message: %s' % (text, blob))


def wildcard_match(pattern, value):
    """EC2 filter values: '*' any run of characters, '?' one character."""
    rx = ''.join('.*' if c == '*' else '.' if c == '?' else re.escape(c) for c in pattern)
    return re.fullmatch(rx, value, re.S) is not None


# ------------------------------------------------------------------ request parameters

def indexed(params, prefix):
    """Values of PREFIX.1, PREFIX.2, ... in index order."""
    found = []
    rx = re.compile(re.escape(prefix) + r'\.(\d+)$')
    for name, value in params.items():
        m = rx.match(name)
        if m:
            found.append((int(m.group(1)), value))
    return [v for _, v in sorted(found)]


def indexed_groups(params, prefix):
    """{N: {rest: value}} for PREFIX.N.rest parameters, in index order."""
    groups = {}
    rx = re.compile(re.escape(prefix) + r'\.(\d+)\.(.+)$')
    for name, value in params.items():
        m = rx.match(name)
        if m:
            groups.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [groups[n] for n in sorted(groups)]


def int_param(params, name, default=None, low=None, high=None):
    raw = params.get(name)
    if raw is None or raw == '':
        if default is None:
            raise ApiError(400, 'MissingParameter',
                           'The request must contain the parameter %s' % name)
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_param('Value (%s) for parameter %s is invalid. Expected an integer.'
                        % (raw, name)) from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise bad_param('Value (%s) for parameter %s is invalid. Expected a value from %s '
                        'to %s.' % (raw, name, low, high))
    return value


def market_params(params):
    """The market of a RunInstances request, 'on-demand' or 'spot' (one-time Spot
    requests whose instances terminate are the ones served)."""
    prefix = 'InstanceMarketOptions.SpotOptions.'
    spot = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
    market = params.get('InstanceMarketOptions.MarketType') or None
    if market is None:
        if spot:
            raise ApiError(400, 'InvalidParameterCombination',
                           'SpotOptions can only be specified with MarketType spot')
        return 'on-demand'
    if market != 'spot':
        raise bad_param("Value (%s) for parameter MarketType is invalid. Expected: 'spot'."
                        % market)
    kind = spot.get('SpotInstanceType') or 'one-time'
    behavior = spot.get('InstanceInterruptionBehavior') or 'terminate'
    if kind not in ('one-time', 'persistent'):
        raise bad_param("Value (%s) for parameter SpotInstanceType is invalid. Expected: "
                        "'one-time' or 'persistent'." % kind)
    if behavior not in ('terminate', 'stop', 'hibernate'):
        raise bad_param("Value (%s) for parameter InstanceInterruptionBehavior is invalid. "
                        "Expected: 'terminate', 'stop' or 'hibernate'." % behavior)
    if kind == 'persistent' and behavior == 'terminate':
        raise ApiError(400, 'InvalidParameterCombination',
                       'For RunInstances, persistent Spot Instance requests are only '
                       'supported when the instance interruption behavior is either '
                       'hibernate or stop.')
    if kind == 'one-time' and behavior != 'terminate':
        raise ApiError(400, 'InvalidParameterCombination',
                       "The interruption behavior '%s' is supported only for persistent "
                       "Spot Instance requests." % behavior)
    if kind == 'persistent':
        raise bad_param('Persistent Spot Instance requests are not served by this endpoint: '
                        'one-time requests whose instances terminate only.')
    price = spot.get('MaxPrice')
    if price is not None and not re.fullmatch(r'\d+(\.\d+)?', price):
        raise bad_param('Value (%s) for parameter MaxPrice is invalid.' % price)
    return 'spot'


def required(params, name):
    value = params.get(name)
    if value is None or value == '':
        raise ApiError(400, 'MissingParameter',
                       'The request must contain the parameter %s' % name)
    return value


# ------------------------------------------------------------------ XML

def sub(parent, tag, text=None):
    e = ET.SubElement(parent, tag)
    if text is not None:
        e.text = str(text)
    return e


def state_xml(parent, tag, state):
    e = sub(parent, tag)
    sub(e, 'code', STATE_CODES[state])
    sub(e, 'name', state)
    return e


def success_body(action, request_id, fill):
    root = ET.Element(action + 'Response', {'xmlns': XMLNS})
    sub(root, 'requestId', request_id)
    fill(root)
    return (XML_DECL + ET.tostring(root, encoding='unicode')).encode('utf-8')


def error_body(code, message, request_id):
    root = ET.Element('Response')
    err = sub(sub(root, 'Errors'), 'Error')
    sub(err, 'Code', code)
    sub(err, 'Message', message)
    sub(root, 'RequestID', request_id)
    return (XML_DECL + ET.tostring(root, encoding='unicode')).encode('utf-8')


# ------------------------------------------------------------------ SigV4

class ReceivedHeadersSigV4(SigV4Auth):
    """botocore's SigV4 signer over exactly the headers it is given: they are the ones
    the client listed in SignedHeaders (botocore itself would leave out a few, such as
    user-agent, that a client may still sign)."""

    def headers_to_sign(self, request):
        headers = HTTPHeaders()
        for name, value in request.headers.items():
            headers[name.lower()] = value
        return headers


def parse_authorization(value):
    m = re.match(r'AWS4-HMAC-SHA256\s+(.*)$', value.strip(), re.S)
    if not m:
        raise ApiError(400, 'IncompleteSignature',
                       'Authorization header requires the AWS4-HMAC-SHA256 algorithm.')
    fields = {}
    for part in m.group(1).split(','):
        name, eq, val = part.strip().partition('=')
        if eq:
            fields[name.strip()] = val.strip()
    for name in ('Credential', 'SignedHeaders', 'Signature'):
        if not fields.get(name):
            raise ApiError(400, 'IncompleteSignature',
                           "Authorization header requires '%s' parameter." % name)
    return fields


# ------------------------------------------------------------------ the model

class Instance:
    def __init__(self, seq, reservation_id, launch_index, p):
        self.seq = seq
        self.id = hex_id('i-')
        self.reservation_id = reservation_id
        self.launch_index = launch_index
        self.image_id = p['image_id']
        self.instance_type = p['instance_type']
        self.key_name = p['key_name']
        self.key_material = p['key_material']
        self.subnet_id = p['subnet_id']
        self.security_group_ids = list(p['security_group_ids'])
        self.placement_group = p['placement_group']
        self.client_token = p['client_token']
        self.tags = dict(p['tags'])
        self.volume_tags = dict(p['volume_tags'])
        self.state = 'pending'
        self.terminated_at = None  # when it turned terminated (its groups' release)
        self.polls = 0           # DescribeInstances calls seen in this transitional state
        self.ready = False       # its sshd listens (pending -> running needs it)
        self.down = True         # its sshd is known dead (stopping/shutting-down need it)
        self.slot = None         # K of its address NET.K
        self.dir_slot = None     # K of the host directory DIR/testhosts/hostK it owns
        self.launch_time = now_iso()
        self.sshd_pid = None
        self.silent = False      # no sshd: a SilentPort on its address (ssh_silent)
        self.silent_port = None  # that SilentPort while it listens
        self.generation = 0      # bumped by every stop/terminate: stale launches give up
        self.ops_lock = threading.Lock()  # one sshd operation at a time
        self.state_reason = None  # (code, message) of stateReason
        self.transition = None   # stateTransitionReason text
        self.region = None       # where it was launched (its RunInstances' scope)
        self.zone = p['zone']
        self.architecture = p['architecture']
        self.market = p['market']  # 'on-demand' or 'spot'
        self.spot_request_id = ('sir-' + secrets.token_hex(4)) if self.market == 'spot' \
            else None
        self.reclaimed = False   # a spot reclaim: terminated at the next poll


class SilentPort:
    """A TCP listener on ADDRESS:PORT, served by a thread of this process, that accepts
    every connection and never sends a byte; what a client sends is read and dropped, a
    client that closes is let go. close() closes the listener and every connection and
    returns once the thread has ended: nothing is left behind."""

    def __init__(self, address, port=22):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
            sock.listen(64)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.address = address
        self.sock = sock
        self.conns = set()
        self.lock = threading.Lock()
        self.closed = False
        self.wake_r, self.wake_w = os.pipe()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.sock, selectors.EVENT_READ, 'listen')
        self.sel.register(self.wake_r, selectors.EVENT_READ, 'wake')
        self.thread = threading.Thread(target=self.serve, daemon=True,
                                       name='silent %s:%d' % (address, port))
        self.thread.start()

    def serve(self):
        while True:
            for key, _ in self.sel.select():
                if key.data == 'wake':
                    return
                if key.data == 'listen':
                    try:
                        conn, _ = self.sock.accept()
                    except OSError:
                        continue
                    conn.setblocking(False)
                    self.conns.add(conn)
                    self.sel.register(conn, selectors.EVENT_READ, 'conn')
                    continue
                conn = key.fileobj
                try:
                    data = conn.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b''
                if not data:
                    self.sel.unregister(conn)
                    self.conns.discard(conn)
                    conn.close()

    def close(self):
        with self.lock:
            if self.closed:
                return
            self.closed = True
        os.write(self.wake_w, b'x')
        self.thread.join()
        for conn in self.conns:
            conn.close()
        self.conns = set()
        self.sel.close()
        self.sock.close()
        os.close(self.wake_r)
        os.close(self.wake_w)


class Fault:
    """An injected failure or delay. A signed request of ACTION ("*": any) that passes
    the checks is first let through SKIP times, then answered COUNT times (default 1,
    negative: for ever) with the error CODE (HTTP STATUS, MESSAGE; defaults from
    FAULT_DEFAULTS), after DELAY_MS. CODE "" answers STATUS with a proxy's HTML page
    instead of an EC2 error document. Without a code it is only delayed: before the action
    is carried out, or with DELAY_AFTER true after it (the work is done, the answer late,
    as when a client times out on a request that succeeded)."""
    FIELDS = ('action', 'code', 'status', 'message', 'count', 'skip', 'delay_ms',
              'delay_after')

    def __init__(self, spec):
        if not isinstance(spec, dict):
            raise ValueError('a fault is a JSON object')
        unknown = set(spec) - set(self.FIELDS)
        if unknown:
            raise ValueError('unknown fault fields: %s' % ', '.join(sorted(unknown)))
        self.action = spec.get('action', '*')
        if not isinstance(self.action, str) or not self.action:
            raise ValueError('"action" must be an action name or "*"')
        self.code = spec.get('code')
        if self.code is not None and not isinstance(self.code, str):
            raise ValueError('"code" must be a string')
        dstatus, dmessage = FAULT_DEFAULTS.get(
            self.code, (502, 'Bad Gateway') if self.code == '' else (400, 'Injected fault.'))
        self.status = spec.get('status', dstatus)
        self.message = spec.get('message', dmessage)
        self.remaining = spec.get('count', 1)   # negative: for ever
        self.skip = spec.get('skip', 0)
        self.delay_ms = spec.get('delay_ms', 0)
        self.delay_after = spec.get('delay_after', False)
        if not isinstance(self.delay_after, bool):
            raise ValueError('"delay_after" must be true or false')
        if self.delay_after and self.code is not None:
            raise ValueError('"delay_after" is for faults without a "code"')
        for name in ('status', 'remaining', 'skip', 'delay_ms'):
            if not isinstance(getattr(self, name), int):
                raise ValueError('"%s" must be an integer' % name)
        if self.code is None and self.delay_ms <= 0:
            raise ValueError('a fault needs a "code" or a "delay_ms"')

    def as_json(self):
        return {'action': self.action, 'code': self.code, 'status': self.status,
                'message': self.message, 'count': self.remaining, 'skip': self.skip,
                'delay_ms': self.delay_ms, 'delay_after': self.delay_after}


class FakeEC2:
    def __init__(self, args):
        self.dir = os.path.abspath(args.dir)
        self.hosts_dir = os.path.join(self.dir, 'testhosts')
        self.region = args.region
        self.net = args.net
        self.first = args.first
        self.script = os.path.abspath(args.testhosts)
        self.credentials = {}
        for spec in args.credentials or [DEFAULT_CREDENTIALS]:
            parts = spec.split(':', 2)
            if len(parts) < 2 or not parts[0] or not parts[1]:
                raise SystemExit('--credentials: expected AKID:SECRET[:TOKEN], got %r' % spec)
            self.credentials[parts[0]] = (parts[1], parts[2] if len(parts) == 3 else None)

        self.lock = threading.Lock()
        self.instances = []          # launch order
        self.used_slots = set()      # every slot free_slots gave out
        self.by_id = {}
        self.reservations = {}       # id -> [instance ids]
        self.tokens = {}             # client token -> {'params', 'reservation', 'launches'}
        self.key_pairs_of = {}       # region -> {name -> dict} (insertion order)
        self.groups_of = {}          # region -> {name -> dict}
        self.security_groups_of = {}  # region -> {group id -> dict} (insertion order)
        self.calls = {}
        self.calls_by_region = {}    # action -> {scope region: count}
        self.faults = []
        self.dry_runs = {}           # action -> DryRun=true calls
        self.settings = {'latency_ms': args.delay_ms, 'pending_polls': 1, 'stopping_polls': 1,
                         'page_size': None, 'ssh_silent': 0, 'sg_release_ms': 200,
                         'deny': [], 'capacity': []}
        self._launchables = None     # fake_catalog.Launchables, read at the first launch
        # The catalog is built at its first use (the suites that never ask for it do not
        # pay for it); the regions are known from the start.
        self.catalog_regions = fake_catalog.read_regions()
        self.catalog_enabled = self.catalog_regions[:args.regions or None]
        self._catalog = None
        self.catalog_lock = threading.Lock()
        self.known_regions = set(self.catalog_regions) | {self.region}
        self.enabled_regions = set(self.catalog_enabled) | {self.region}
        self.public_ids = {region_ami(r, n): n for r in self.known_regions
                           for n in PUBLIC_IMAGES}  # image id -> its SSM parameter
        self.tls = threading.local()  # the region of the request being answered
        if args.fail_pricing:
            self.faults.append(Fault({'action': 'GetProducts', 'code': args.fail_pricing,
                                      'status': 400, 'count': -1}))
        for action in args.hang or []:
            self.faults.append(Fault({'action': action, 'delay_ms': HANG_MS, 'count': -1}))
        self.shutting_down = False
        self.launch_sem = threading.Semaphore(MAX_CONCURRENT_LAUNCHES)
        self.jobs = set()            # sshd threads in flight
        self.log_lock = threading.Lock()
        self.log = open(os.path.join(self.dir, 'requests.log'), 'a', buffering=1)

    # ------------------------------------------------------------ regions

    @property
    def catalog(self):
        with self.catalog_lock:
            if self._catalog is None:
                self._catalog = fake_catalog.Catalog(enabled=len(self.catalog_enabled))
            return self._catalog

    @property
    def launchables(self):
        with self.catalog_lock:
            if self._launchables is None:
                self._launchables = fake_catalog.Launchables()
            return self._launchables

    def cur_region(self):
        """The region of the request being answered (its signature's scope)."""
        return getattr(self.tls, 'region', None) or self.region

    @property
    def key_pairs(self):
        return self.key_pairs_of.setdefault(self.cur_region(), {})

    @property
    def groups(self):
        return self.groups_of.setdefault(self.cur_region(), {})

    @property
    def security_groups(self):
        """The region's security groups; sg-0cclfs (in vpc-0cclfs, the VPC of
        subnet-0cclfs) exists from the start, as a group the user made would."""
        region = self.cur_region()
        if region not in self.security_groups_of:
            self.security_groups_of[region] = {PRESET_SG: {
                'id': PRESET_SG, 'name': 'cclfs-test', 'description': 'made by the user',
                'vpc_id': SUBNETS['subnet-0cclfs'], 'tags': {}, 'rules': []}}
        return self.security_groups_of[region]

    # ------------------------------------------------------------ sshd test hosts

    def bash(self, function, *args):
        """Run a function of testhosts.bash; returns (ok, stderr)."""
        env = dict(os.environ, TESTHOSTS_NET=self.net,
                   TESTHOSTS_OWN_LOGIN='1')
        proc = subprocess.run(
            ['bash', '-c', 'source "$1" || exit 1; shift; "$@"', 'fake-ec2', self.script,
             function] + [str(a) for a in args],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.stderr.write('fake_ec2: %s %s failed (%d): %s\n' % (
                function, ' '.join(str(a) for a in args), proc.returncode, proc.stderr))
        return proc.returncode == 0, proc.stderr.strip()

    def host_dir(self, slot):
        return os.path.join(self.hosts_dir, 'host%d' % slot)

    def address(self, slot):
        return None if slot is None else '%s.%d' % (self.net, slot)

    def prepare_hosts(self):
        os.makedirs(self.hosts_dir, exist_ok=True)
        stale = [n for n in os.listdir(self.hosts_dir) if re.fullmatch(r'host\d+', n)]
        if stale:
            # A previous run in this DIR: its daemons and directories go.
            self.bash('testhosts_stop', self.hosts_dir)
            for name in stale:
                self.retire_dir(os.path.join(self.hosts_dir, name), 'stale-' + name)
        ok, err = self.bash('testhosts_init', self.hosts_dir)
        if not ok:
            raise SystemExit('fake_ec2: testhosts_init failed: ' + err)

    def retire_dir(self, path, name):
        """Move a dead host's directory out of the host namespace (kept for its log)."""
        if not os.path.isdir(path):
            return
        base = os.path.join(self.hosts_dir, 'terminated')
        os.makedirs(base, exist_ok=True)
        dest, n = os.path.join(base, name), 1
        while os.path.exists(dest):
            n += 1
            dest = os.path.join(base, '%s.%d' % (name, n))
        os.rename(path, dest)

    def listening_slots(self):
        """K of every NET.K:22 some process listens on (another user of the /24)."""
        a, b, c = (int(x) for x in self.net.split('.'))
        suffix = '%02X%02X%02X' % (c, b, a)
        busy = set()
        try:
            with open('/proc/net/tcp') as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, st = fields[1], fields[3]
                    if st == '0A' and local.endswith(suffix + ':0016'):
                        busy.add(int(local[:2], 16))
        except OSError:
            pass
        return busy

    def free_slots(self, count):
        """Up to COUNT free slots (caller holds the lock): no instance's address or host
        directory, nothing listening on NET.K:22; the lowest never given out first, then
        the lowest given out before (a new instance gets a new address while there is
        one, as in EC2). The slots returned count as given out."""
        taken = set()
        for inst in self.instances:
            taken.update(s for s in (inst.slot, inst.dir_slot) if s is not None)
        taken |= self.listening_slots()
        free = [k for k in range(self.first, 255)
                if k not in taken and not os.path.exists(self.host_dir(k))]
        free = sorted(free, key=lambda k: k in self.used_slots)[:count]
        self.used_slots.update(free)
        return free

    def spawn(self, target, *args):
        t = threading.Thread(target=self._job, args=(target,) + args, daemon=True)
        with self.lock:
            self.jobs.add(t)
        t.start()

    def _job(self, target, *args):
        try:
            target(*args)
        except Exception as e:  # a failed job must not take the server down
            sys.stderr.write('fake_ec2: %s: %r\n' % (target.__name__, e))
        finally:
            with self.lock:
                self.jobs.discard(threading.current_thread())

    def launch_job(self, inst, gen):
        """Bring the instance's sshd up on NET.slot (from its old directory, if any)."""
        with self.launch_sem, inst.ops_lock:
            with self.lock:
                if inst.generation != gen or self.shutting_down:
                    return
                src, dst, key_line = inst.dir_slot, inst.slot, inst.key_material
                if inst.silent:
                    return self.launch_silent(inst, gen, dst)
                if src is None:
                    inst.dir_slot = dst
            dst_dir = self.host_dir(dst)
            ok, err = True, ''
            try:
                if src is not None and os.path.isfile(
                        os.path.join(self.host_dir(src), 'sshd_config')):
                    ok, err = self.bash('testhosts_move', self.hosts_dir, src, dst)
                else:
                    if src is not None and src != dst and os.path.isdir(self.host_dir(src)):
                        os.rename(self.host_dir(src), dst_dir)
                    os.makedirs(dst_dir, exist_ok=True)
                    keys = os.path.join(dst_dir, 'authorized_keys')
                    if key_line:
                        with open(keys, 'w') as f:
                            f.write(key_line + '\n')
                    elif os.path.exists(keys):
                        os.unlink(keys)
                    ok, err = self.bash('testhosts_start', self.hosts_dir, 1, dst)
            except OSError as e:
                ok, err = False, str(e)
            pid = None
            try:
                with open(os.path.join(dst_dir, 'sshd.pid')) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                pass
            with self.lock:
                if src is not None and src != dst and not os.path.exists(self.host_dir(src)):
                    inst.dir_slot = dst
                if pid is not None:
                    inst.sshd_pid = pid
                if inst.generation != gen:
                    return  # stopped or terminated meanwhile: the stopper kills it next
                if ok:
                    inst.ready = True
                    inst.down = False
                    return
                # The host did not come up: the instance fails as EC2 ones can.
                inst.generation += 1
                inst.state = 'terminated'
                inst.state_reason = ('Server.InternalError',
                                     'Server.InternalError: sshd did not start: ' + err)
            self.kill_and_retire(inst, locked_ops=True)

    def launch_silent(self, inst, gen, slot):
        """Bring up the SilentPort of an ssh_silent instance on NET.slot (caller holds
        inst.ops_lock and self.lock)."""
        try:
            port = SilentPort(self.address(slot))
        except OSError as e:
            inst.generation += 1
            inst.state = 'terminated'
            inst.state_reason = ('Server.InternalError',
                                 'Server.InternalError: port 22 did not open: %s' % e)
            inst.slot = None
            return
        # Stopped or terminated meanwhile: the stopper, waiting for ops_lock, closes it
        # next, as it kills an sshd; shutdown() closes those left at exit.
        inst.silent_port = port
        if inst.generation == gen:
            inst.ready = True
            inst.down = False

    def kill_sshd(self, inst):
        """Kill the instance's sshd (listener and sessions) or close its SilentPort;
        caller holds inst.ops_lock."""
        with self.lock:
            slot = inst.dir_slot
            port, inst.silent_port = inst.silent_port, None
        if port is not None:
            port.close()
        if slot is not None and os.path.isfile(os.path.join(self.host_dir(slot), 'sshd_config')):
            self.bash('testhosts_kill', self.hosts_dir, slot)
        with self.lock:
            inst.down = True

    def kill_and_retire(self, inst, locked_ops=False):
        """Terminated: sshd killed, host directory moved away, slots freed."""
        if not locked_ops:
            inst.ops_lock.acquire()
        try:
            self.kill_sshd(inst)
            with self.lock:
                slot = inst.dir_slot
            if slot is not None:
                self.retire_dir(self.host_dir(slot), inst.id)
            with self.lock:
                inst.dir_slot = None
                inst.slot = None
        finally:
            if not locked_ops:
                inst.ops_lock.release()

    def stop_sshds(self, victims, terminate):
        """Kill (and for terminate retire) several instances' sshds in parallel; returns
        when all are done."""
        def one(inst):
            if terminate:
                self.kill_and_retire(inst)
            else:
                with inst.ops_lock:
                    self.kill_sshd(inst)
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in victims]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def shutdown(self):
        with self.lock:
            self.shutting_down = True
            jobs = list(self.jobs)
        deadline = time.monotonic() + 60
        for t in jobs:
            t.join(max(0.1, deadline - time.monotonic()))
        with self.lock:
            ports = [i.silent_port for i in self.instances if i.silent_port is not None]
            for inst in self.instances:
                inst.silent_port = None
        for port in ports:
            port.close()
        self.bash('testhosts_stop', self.hosts_dir)

    # ------------------------------------------------------------ request handling

    def count_call(self, action, dry=False):
        with self.lock:
            self.calls[action] = self.calls.get(action, 0) + 1
            if dry:
                self.dry_runs[action] = self.dry_runs.get(action, 0) + 1

    def not_dry(self):
        """A DryRun=true call whose checks passed: answered DryRunOperation before
        anything is changed."""
        if getattr(self.tls, 'dry_run', False):
            raise ApiError(412, 'DryRunOperation', DRY_RUN_MESSAGE)

    def count_region(self, action, region):
        with self.lock:
            per = self.calls_by_region.setdefault(action, {})
            per[region] = per.get(region, 0) + 1

    def write_log(self, action, status, code):
        with self.log_lock:
            self.log.write('%s %d %s\n' % (action or '-', status, code or 'OK'))

    def check_signature(self, handler, host, body, want='ec2'):
        """Verify the request's SigV4 signature for service WANT; returns the region of its
        scope (any region the fake knows for ec2 and ssm, us-east-1 for pricing)."""
        h = handler.headers
        auths = h.get_all('Authorization') or []
        if not auths:
            raise ApiError(401, 'MissingAuthenticationToken',
                           'Request is missing Authentication Token')
        if len(auths) > 1:
            raise ApiError(400, 'InvalidParameter', 'Authorization sent twice')
        fields = parse_authorization(auths[0])
        scope = fields['Credential'].split('/')
        if len(scope) != 5:
            raise ApiError(400, 'IncompleteSignature',
                           "Credential must be AKID/DATE/REGION/SERVICE/aws4_request, got '%s'"
                           % fields['Credential'])
        akid, scope_date, region, service, terminator = scope
        if akid not in self.credentials:
            raise ApiError(401, 'AuthFailure',
                           'AWS was not able to validate the provided access credentials')
        secret, token = self.credentials[akid]
        if region not in (self.known_regions if want != 'pricing' else (PRICING_REGION,)):
            raise ApiError(403, 'SignatureDoesNotMatch',
                           "Credential should be scoped to a valid region: this endpoint "
                           "serves %s, not '%s'."
                           % ("the regions of regions.csv and '%s'" % self.region
                              if want != 'pricing' else "'%s'" % PRICING_REGION, region))
        if service != want:
            raise ApiError(403, 'SignatureDoesNotMatch',
                           "Credential should be scoped to correct service: '%s', not '%s'."
                           % (want, service))
        if terminator != 'aws4_request':
            raise ApiError(403, 'SignatureDoesNotMatch',
                           "Credential should be scoped with a valid terminator: "
                           "'aws4_request', not '%s'." % terminator)
        dates = h.get_all('X-Amz-Date') or []
        if len(dates) > 1:
            raise ApiError(400, 'InvalidParameter', 'X-Amz-Date sent twice')
        if not dates:
            raise ApiError(400, 'IncompleteSignature', 'The X-Amz-Date header is missing')
        amz_date = dates[0].strip()
        try:
            when = datetime.datetime.strptime(amz_date, '%Y%m%dT%H%M%SZ').replace(
                tzinfo=datetime.timezone.utc)
        except ValueError:
            raise ApiError(400, 'IncompleteSignature',
                           "X-Amz-Date '%s' is not of the form YYYYMMDDTHHMMSSZ" % amz_date
                           ) from None
        skew = abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds())
        if skew > CLOCK_SKEW:
            raise ApiError(400, 'RequestExpired',
                           'Request has expired: X-Amz-Date %s is %d s from the server time'
                           % (amz_date, skew))
        if scope_date != amz_date[:8]:
            raise ApiError(403, 'SignatureDoesNotMatch',
                           "Credential scope date '%s' is not the date of X-Amz-Date '%s'."
                           % (scope_date, amz_date))
        signed = fields['SignedHeaders'].split(';')
        if any(not n or n != n.strip().lower() for n in signed):
            raise ApiError(403, 'SignatureDoesNotMatch',
                           "SignedHeaders must be lower-case names separated by ';': '%s'"
                           % fields['SignedHeaders'])
        for needed in ('host', 'x-amz-date'):
            if needed not in signed:
                raise ApiError(403, 'SignatureDoesNotMatch',
                               "'%s' must be among the SignedHeaders." % needed)
        for name in signed:
            if not h.get_all(name):
                raise ApiError(403, 'SignatureDoesNotMatch',
                               "Signed header '%s' is not in the request." % name)
        tokens = h.get_all('X-Amz-Security-Token') or []
        if token is not None:
            if len(tokens) != 1 or tokens[0].strip() != token:
                raise ApiError(401, 'AuthFailure',
                               'The security token included in the request is %s.'
                               % ('missing' if not tokens else 'invalid'))
            if 'x-amz-security-token' not in signed:
                raise ApiError(403, 'SignatureDoesNotMatch',
                               "'x-amz-security-token' must be among the SignedHeaders.")
        elif tokens:
            raise ApiError(401, 'AuthFailure',
                           'The credential %s has no session token; X-Amz-Security-Token '
                           'must not be sent.' % akid)
        content_sha = h.get_all('X-Amz-Content-SHA256') or []
        if content_sha and content_sha[0].strip() != hashlib.sha256(body).hexdigest():
            raise ApiError(400, 'XAmzContentSHA256Mismatch',
                           'X-Amz-Content-SHA256 is not the SHA-256 of the body.')

        request = AWSRequest(method=handler.command, url='http://%s/' % host, data=body)
        for name in signed:
            for value in h.get_all(name):
                request.headers[name] = value
        request.context['timestamp'] = amz_date
        signer = ReceivedHeadersSigV4(Credentials(akid, secret, token), want, region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, fields['Signature'].lower()):
            raise ApiError(403, 'SignatureDoesNotMatch',
                           'The request signature we calculated does not match the signature '
                           'you provided. Check your AWS Secret Access Key and signing method. '
                           'Consult the service documentation for details.')
        return region

    def take_fault(self, action):
        with self.lock:
            chosen = None
            for f in self.faults:
                if f.action not in ('*', action) or f.remaining == 0:
                    continue
                if f.skip > 0:
                    f.skip -= 1
                    continue
                if chosen is None:
                    chosen = f
            if chosen is not None and chosen.remaining > 0:
                chosen.remaining -= 1
            return chosen

    def apply_fault(self, action):
        """The fault for this call, if any, carried out up to the action: (fault, None), or
        (fault, HTML page) for a proxy's answer; raises its ApiError."""
        fault = self.take_fault(action)
        if fault is None:
            return None, None
        if fault.delay_ms > 0 and not fault.delay_after:
            time.sleep(fault.delay_ms / 1000.0)
        if fault.code == '':
            # What a proxy in front of the endpoint might answer.
            page = ('<html><head><title>%d</title></head><body><h1>%d</h1>'
                    '<p>%s</p></body></html>\n' % (fault.status, fault.status, fault.message))
            return fault, page.encode('utf-8')
        if fault.code is not None:
            raise ApiError(fault.status, fault.code, fault.message)
        return fault, None

    def handle_json(self, handler, host, body):
        """One AWS JSON 1.1 request, routed by X-Amz-Target: the Price List Query API
        (AWSPriceListService.*) or SSM (AmazonSSM.*); returns (action, status,
        code-or-None, JSON body)."""
        target = handler.headers.get('X-Amz-Target') or ''
        prefix, service = ((SSM_TARGET, 'ssm') if target.startswith(SSM_TARGET)
                           else (PRICING_TARGET, 'pricing'))
        action = target[len(prefix):] if target.startswith(prefix) else target
        known = {'pricing': ('GetProducts',), 'ssm': ('GetParameter',)}[service]
        self.tls.region = None
        try:
            if handler.command != 'POST' or urllib.parse.urlsplit(handler.path).path != '/':
                raise ApiError(400, 'SerializationException', 'POST / only')
            ctype = (handler.headers.get('Content-Type') or '').split(';')[0].strip().lower()
            if ctype != 'application/x-amz-json-1.1':
                raise ApiError(400, 'SerializationException',
                               "Content-Type must be application/x-amz-json-1.1, not '%s'"
                               % ctype)
            self.count_call(action)
            region = self.check_signature(handler, host, body, want=service)
            self.tls.region = region
            self.count_region(action, region)
            latency = self.settings['latency_ms']
            if latency:
                time.sleep(latency / 1000.0)
            if action not in known or not target.startswith(prefix):
                raise ApiError(400, 'UnknownOperationException',
                               'Unknown operation %s' % target)
            if region not in self.enabled_regions:
                raise ApiError(400, 'UnrecognizedClientException',
                               'The security token included in the request is invalid.')
            try:
                req = json.loads(body.decode('utf-8'))
            except (UnicodeDecodeError, ValueError):
                raise ApiError(400, 'SerializationException', 'The body is not JSON') from None
            if not isinstance(req, dict):
                raise ApiError(400, 'SerializationException', 'The body is not a JSON object')
            if action in self.settings['deny']:
                resource = (self.parameter_arn(region, str(req.get('Name')))
                            if service == 'ssm' else '*')
                raise ApiError(400, 'AccessDeniedException',
                               deny_message(service, action, resource))
            fault, _ = self.apply_fault(action)
            out = self.get_products(req) if service == 'pricing' else self.get_parameter(req)
            if fault is not None and fault.delay_after:
                time.sleep(fault.delay_ms / 1000.0)
            return action, 200, None, json.dumps(out).encode('utf-8')
        except ApiError as e:
            return action or None, e.status, e.code, json.dumps(
                {'__type': e.code, 'message' if service == 'ssm' else 'Message': e.message}
            ).encode('utf-8')

    # ------------------------------------------------------------ SSM public parameters

    @staticmethod
    def parameter_arn(region, name):
        return 'arn:aws:ssm:%s::parameter%s' % (region, name)

    def get_parameter(self, req):
        name = req.get('Name')
        if not isinstance(name, str) or not name:
            raise ApiError(400, 'ValidationException',
                           "1 validation error detected: Value null at 'name' failed to "
                           "satisfy constraint: Member must not be null")
        if name not in PUBLIC_IMAGES:
            raise ApiError(400, 'ParameterNotFound', '')
        region = self.cur_region()
        return {'Parameter': {
            'Name': name, 'Type': 'String', 'Value': region_ami(region, name), 'Version': 1,
            'LastModifiedDate': SSM_MODIFIED, 'ARN': self.parameter_arn(region, name),
            'DataType': 'text'}}

    # ------------------------------------------------------------ the catalog

    def catalog_state(self):
        c = self.catalog
        items = {'DescribeInstanceTypes': len(c.type_names)}
        for r in c.enabled:
            n_products = sum(1 for t, _ in c.offers[r] if (t, r) in c.prices)
            for action, n in (('DescribeInstanceTypeOfferings:region', len(c.offers[r])),
                              ('DescribeInstanceTypeOfferings:availability-zone',
                               len(c.zone_offerings(r))),
                              ('DescribeSpotPriceHistory:Linux/UNIX',
                               sum(1 for e in c.spot[r] if e[2] == 'Linux/UNIX')),
                              ('GetProducts:Linux', n_products)):
                items.setdefault(action, {})[r] = n
        return {'regions': list(c.regions), 'enabled': list(c.enabled),
                'factor': dict(c.factor), 'items': items,
                'page_max': {a: v[1] for a, v in PAGES.items()},
                'page_default': {a: v[0] for a, v in PAGES.items()}}

    def paginate(self, action, key, items, max_results, token):
        """(page, next token or None) of ITEMS for a query whose parameters KEY names."""
        default, _ = PAGES[action]
        n = default if max_results is None else max_results
        offset = 0
        if token:
            try:
                t = json.loads(base64.urlsafe_b64decode(token.encode('ascii')))
                offset, tkey = int(t['o']), t['k']
            except (ValueError, KeyError, TypeError, binascii.Error, UnicodeEncodeError):
                tkey = None
            if tkey != key or not 0 <= offset <= len(items):
                raise ApiError(400, 'InvalidNextTokenException' if action == 'GetProducts'
                               else 'InvalidPaginationToken',
                               "Invalid NextToken '%s'" % token)
        page = items[offset:offset + n]
        more = offset + n < len(items)
        nxt = base64.urlsafe_b64encode(json.dumps(
            {'o': offset + n, 'k': key}).encode()).decode('ascii') if more else None
        return page, nxt

    def ec2_max_results(self, params, action, low):
        _, high = PAGES[action]
        if not params.get('MaxResults'):
            return None
        return int_param(params, 'MaxResults', low=low, high=high)

    @staticmethod
    def ec2_filters(params, allowed):
        """[(name, [values])] of Filter.N, each name one of ALLOWED."""
        out = []
        for f in indexed_groups(params, 'Filter'):
            name = f.get('Name')
            if name not in allowed:
                raise ApiError(400, 'InvalidParameterValue',
                               "The filter '%s' is invalid" % name)
            out.append((name, indexed(f, 'Value')))
        return out

    @staticmethod
    def raw_body(action, rid, set_name, items, token):
        """A response document around pre-rendered <item>s."""
        return (XML_DECL + '<%sResponse xmlns="%s"><requestId>%s</requestId><%s>%s</%s>%s'
                '</%sResponse>' % (action, XMLNS, rid, set_name, ''.join(items), set_name,
                                   '<nextToken>%s</nextToken>' % token if token else '',
                                   action)).encode('utf-8')

    @staticmethod
    def query_key(action, region, *parts):
        return '%s/%s/%08x' % (action, region, binascii.crc32(
            json.dumps(parts, sort_keys=True).encode()))

    def do_DescribeRegions(self, params, rid):
        names = indexed(params, 'RegionName')
        every = (params.get('AllRegions') or '').lower() == 'true'
        filters = self.ec2_filters(params, ('region-name', 'opt-in-status', 'endpoint'))
        regions = list(self.catalog_regions)
        if self.region not in regions:
            regions.insert(0, self.region)
        missing = [n for n in names if n not in regions]
        if missing:
            raise ApiError(400, 'InvalidParameterValue', "Invalid region: %s" % missing[0])
        items = []
        for r in regions:
            status = ('opt-in-not-required' if r in self.enabled_regions else 'not-opted-in')
            fields = {'region-name': r, 'opt-in-status': status,
                      'endpoint': 'ec2.%s.amazonaws.com' % r}
            if names and r not in names:
                continue
            if not names and not every and status == 'not-opted-in':
                continue
            if not all(any(wildcard_match(v, fields[n]) for v in vals) for n, vals in filters):
                continue
            items.append(fake_catalog.to_xml('item', {'regionName': r,
                                                      'regionEndpoint': fields['endpoint'],
                                                      'optInStatus': status}))
        return self.raw_body('DescribeRegions', rid, 'regionInfo', items, None)

    def do_DescribeInstanceTypes(self, params, rid):
        action = 'DescribeInstanceTypes'
        names = indexed(params, 'InstanceType')
        filters = self.ec2_filters(params, ('instance-type',))
        if names and params.get('MaxResults'):
            raise ApiError(400, 'InvalidParameterCombination',
                           'MaxResults cannot be used with InstanceTypes')
        unknown = [n for n in names if n not in self.catalog.types]
        if unknown:
            raise ApiError(400, 'InvalidInstanceType',
                           "The following supplied instance types do not exist: [%s]"
                           % ', '.join(unknown))
        items = [x for n, x in self.catalog.type_xml
                 if (not names or n in names)
                 and all(any(wildcard_match(v, n) for v in vals) for _, vals in filters)]
        key = self.query_key(action, '*', names, filters)
        page, token = self.paginate(action, key, items, self.ec2_max_results(params, action, 5),
                                    params.get('NextToken'))
        return self.raw_body(action, rid, 'instanceTypeSet', page, token)

    def do_DescribeInstanceTypeOfferings(self, params, rid):
        action = 'DescribeInstanceTypeOfferings'
        region = self.cur_region()
        lt = params.get('LocationType') or 'region'
        if lt not in ('region', 'availability-zone', 'availability-zone-id'):
            raise bad_param("Value (%s) for parameter locationType is invalid." % lt)
        if lt == 'availability-zone-id':
            raise bad_param('The fake serves LocationType region and availability-zone only')
        filters = self.ec2_filters(params, ('instance-type', 'location'))
        items = [x for t, loc, x in self.catalog.offering_items(region, lt)
                 if all(any(wildcard_match(v, t if n == 'instance-type' else loc)
                            for v in vals) for n, vals in filters)]
        key = self.query_key(action, region, lt, filters)
        page, token = self.paginate(action, key, items, self.ec2_max_results(params, action, 5),
                                    params.get('NextToken'))
        return self.raw_body(action, rid, 'instanceTypeOfferingSet', page, token)

    def do_DescribeSpotPriceHistory(self, params, rid):
        action = 'DescribeSpotPriceHistory'
        region = self.cur_region()
        for name in ('StartTime', 'EndTime'):
            if params.get(name):
                try:
                    datetime.datetime.fromisoformat(params[name].replace('Z', '+00:00'))
                except ValueError:
                    raise bad_param("Value (%s) for parameter %s is invalid."
                                    % (params[name], name)) from None
        products = indexed(params, 'ProductDescription')
        types = indexed(params, 'InstanceType')
        zone = params.get('AvailabilityZone')
        filters = self.ec2_filters(params, ('product-description', 'instance-type',
                                            'availability-zone'))
        field = {'product-description': 2, 'instance-type': 0, 'availability-zone': 1}
        items = []
        for e in self.catalog.spot_items(region):
            if products and e[2] not in products or types and e[0] not in types:
                continue
            if zone and e[1] != zone:
                continue
            if all(any(wildcard_match(v, e[field[n]]) for v in vals) for n, vals in filters):
                items.append(e[3])
        key = self.query_key(action, region, products, types, zone, filters)
        page, token = self.paginate(action, key, items, self.ec2_max_results(params, action, 1),
                                    params.get('NextToken'))
        return self.raw_body(action, rid, 'spotPriceHistorySet', page, token)

    def get_products(self, req):
        action = 'GetProducts'
        service = req.get('ServiceCode')
        if not service:
            raise ApiError(400, 'InvalidParameterException', 'ServiceCode is required')
        if service != 'AmazonEC2':
            raise ApiError(400, 'NotFoundException', 'The service %s is not served' % service)
        if req.get('FormatVersion', 'aws_v1') != 'aws_v1':
            raise ApiError(400, 'InvalidParameterException', 'FormatVersion must be aws_v1')
        filters = []
        for f in req.get('Filters') or []:
            if not isinstance(f, dict) or f.get('Type') != 'TERM_MATCH' or not f.get('Field'):
                raise ApiError(400, 'InvalidParameterException',
                               'A filter needs Type TERM_MATCH, a Field and a Value: %r' % f)
            filters.append((f['Field'], str(f.get('Value', ''))))
        regions = [v for n, v in filters if n == 'regionCode'] or self.catalog.enabled
        max_results = req.get('MaxResults')
        if max_results is not None and (not isinstance(max_results, int)
                                        or not 1 <= max_results <= PAGES[action][1]):
            raise ApiError(400, 'InvalidParameterException',
                           'MaxResults must be within 1..%d' % PAGES[action][1])
        items = []
        for r in regions:
            if r not in self.catalog.offers:
                continue
            items.extend(text for attrs, text in self.catalog.product_items(r)
                         if all(attrs.get(n) == v for n, v in filters))
        key = self.query_key(action, '*', filters)
        page, token = self.paginate(action, key, items, max_results, req.get('NextToken'))
        out = {'FormatVersion': 'aws_v1', 'PriceList': page}
        if token:
            out['NextToken'] = token
        return out

    def handle_api(self, handler, host, body):
        """One EC2 request; returns (action, status, code-or-None, body): an EC2 XML
        document, or HTML when the code is '-'."""
        request_id = str(uuid.uuid4())
        action = None
        self.tls.region = None
        self.tls.dry_run = False
        try:
            if handler.command != 'POST':
                raise ApiError(400, 'InvalidParameter',
                               'Only POST requests are served, not %s' % handler.command)
            split = urllib.parse.urlsplit(handler.path)
            if split.path != '/':
                raise ApiError(400, 'InvalidParameter', "The path must be '/', not '%s'"
                               % split.path)
            if split.query:
                raise ApiError(400, 'InvalidParameter',
                               'Parameters go in the body, not in the query string')
            ctype = (handler.headers.get('Content-Type') or '').split(';')[0].strip().lower()
            if ctype != 'application/x-www-form-urlencoded':
                raise ApiError(400, 'InvalidParameter',
                               "Content-Type must be application/x-www-form-urlencoded, not "
                               "'%s'" % handler.headers.get('Content-Type', ''))
            try:
                pairs = urllib.parse.parse_qsl(body.decode('utf-8'), keep_blank_values=True,
                                               strict_parsing=bool(body), errors='strict')
            except (UnicodeDecodeError, ValueError):
                raise ApiError(400, 'InvalidParameter',
                               'The body is not a valid form encoding') from None
            params = {}
            for name, value in pairs:
                if name in params:
                    raise ApiError(400, 'InvalidParameter', 'Parameter %s sent twice' % name)
                params[name] = value
            action = params.get('Action') or None
            if action:
                self.count_call(action, dry=true_param(params, 'DryRun'))
            region = self.check_signature(handler, host, body)
            self.tls.region = region
            if action:
                self.count_region(action, region)
            latency = self.settings['latency_ms']
            if latency:
                time.sleep(latency / 1000.0)
            if region not in self.enabled_regions:
                raise ApiError(401, 'OptInRequired',
                               'You are not subscribed to this service in %s. Please go to '
                               'http://aws.amazon.com to subscribe.' % region)
            if params.get('Version') != API_VERSION:
                if 'Version' not in params:
                    raise ApiError(400, 'MissingParameter',
                                   'The request must contain the parameter Version')
                raise ApiError(400, 'InvalidParameterValue',
                               "Version '%s' is not served (only %s)"
                               % (params['Version'], API_VERSION))
            if not action:
                raise ApiError(400, 'MissingAction',
                               'The request must contain the parameter Action')
            method = getattr(self, 'do_' + action, None)
            if method is None or not action[:1].isupper():
                raise ApiError(400, 'InvalidAction',
                               'The action %s is not valid for this web service.' % action)
            if action in self.settings['deny']:
                raise ApiError(403, 'UnauthorizedOperation', deny_message(
                    'ec2', action, 'arn:aws:ec2:%s:%s:*' % (region, OWNER_ID)))
            fault, page = self.apply_fault(action)
            if page is not None:
                return action, fault.status, '-', page
            self.tls.dry_run = true_param(params, 'DryRun')
            xml = method(params, request_id)
            self.not_dry()  # the actions that change nothing are checked in full
            if fault is not None and fault.delay_after:
                time.sleep(fault.delay_ms / 1000.0)
            return action, 200, None, xml
        except ApiError as e:
            return action, e.status, e.code, error_body(e.code, e.message, request_id)

    # ------------------------------------------------------------ key pairs

    def do_ImportKeyPair(self, params, rid):
        name = required(params, 'KeyName')
        material = required(params, 'PublicKeyMaterial')
        try:
            line = base64.b64decode(material, validate=True).decode('ascii').strip()
            fields = line.split()
            blob = base64.b64decode(fields[1], validate=True)
            if fields[0] not in PUBKEY_TYPES or len(blob) < 4:
                raise ValueError(fields[0])
            n = int.from_bytes(blob[:4], 'big')
            if blob[4:4 + n].decode('ascii') != fields[0]:
                raise ValueError('key type mismatch')
        except (binascii.Error, UnicodeDecodeError, ValueError, IndexError):
            raise ApiError(400, 'InvalidKey.Format',
                           'Key is not in valid OpenSSH public key format') from None
        digest = hashlib.md5(blob).hexdigest()
        fingerprint = ':'.join(digest[i:i + 2] for i in range(0, len(digest), 2))
        with self.lock:
            if name in self.key_pairs:
                raise ApiError(400, 'InvalidKeyPair.Duplicate',
                               "The keypair '%s' already exists." % name)
            self.not_dry()
            kp = {'name': name, 'fingerprint': fingerprint, 'id': hex_id('key-'),
                  'type': 'ed25519' if fields[0] == 'ssh-ed25519' else 'rsa',
                  'material': ' '.join(fields[:2])}
            self.key_pairs[name] = kp

        def fill(root):
            sub(root, 'keyName', name)
            sub(root, 'keyFingerprint', fingerprint)
            sub(root, 'keyPairId', kp['id'])
        return success_body('ImportKeyPair', rid, fill)

    def do_DeleteKeyPair(self, params, rid):
        name = params.get('KeyName')
        kp_id = params.get('KeyPairId')
        if not name and not kp_id:
            raise ApiError(400, 'MissingParameter',
                           'The request must contain the parameter KeyName or KeyPairId')
        self.not_dry()
        with self.lock:
            for kp in list(self.key_pairs.values()):
                if kp['name'] == name or kp['id'] == kp_id:
                    del self.key_pairs[kp['name']]
        return success_body('DeleteKeyPair', rid, lambda root: sub(root, 'return', 'true'))

    def do_DescribeKeyPairs(self, params, rid):
        names = indexed(params, 'KeyName')
        with self.lock:
            missing = [n for n in names if n not in self.key_pairs]
            if missing:
                raise ApiError(400, 'InvalidKeyPair.NotFound',
                               "The key pair '%s' does not exist" % missing[0])
            pairs = [dict(kp) for kp in self.key_pairs.values()
                     if not names or kp['name'] in names]

        def fill(root):
            key_set = sub(root, 'keySet')
            for kp in pairs:
                item = sub(key_set, 'item')
                sub(item, 'keyPairId', kp['id'])
                sub(item, 'keyName', kp['name'])
                sub(item, 'keyFingerprint', kp['fingerprint'])
                sub(item, 'keyType', kp['type'])
        return success_body('DescribeKeyPairs', rid, fill)

    # ------------------------------------------------------------ placement groups

    def do_CreatePlacementGroup(self, params, rid):
        name = required(params, 'GroupName')
        strategy = params.get('Strategy') or 'cluster'
        if strategy not in ('cluster', 'spread', 'partition'):
            raise bad_param("Value (%s) for parameter strategy is invalid. Expected: "
                            "'cluster', 'spread' or 'partition'." % strategy)
        with self.lock:
            if name in self.groups:
                raise ApiError(400, 'InvalidPlacementGroup.Duplicate',
                               "The placement group '%s' already exists." % name)
            self.not_dry()
            group = {'name': name, 'strategy': strategy, 'id': hex_id('pg-')}
            self.groups[name] = group

        def fill(root):
            sub(root, 'return', 'true')
            pg = sub(root, 'placementGroup')
            sub(pg, 'groupName', name)
            sub(pg, 'state', 'available')
            sub(pg, 'strategy', strategy)
            sub(pg, 'groupId', group['id'])
        return success_body('CreatePlacementGroup', rid, fill)

    def do_DeletePlacementGroup(self, params, rid):
        name = required(params, 'GroupName')
        with self.lock:
            if name not in self.groups:
                raise ApiError(400, 'InvalidPlacementGroup.Unknown',
                               "The Placement Group '%s' is unknown." % name)
            users = [i.id for i in self.instances
                     if i.placement_group == name and i.state != 'terminated']
            if users:
                raise ApiError(400, 'InvalidPlacementGroup.InUse',
                               "There are instances in the placement group '%s': %s"
                               % (name, ', '.join(users)))
            self.not_dry()
            del self.groups[name]
        return success_body('DeletePlacementGroup', rid,
                            lambda root: sub(root, 'return', 'true'))

    def do_DescribePlacementGroups(self, params, rid):
        names = indexed(params, 'GroupName')
        with self.lock:
            missing = [n for n in names if n not in self.groups]
            if missing:
                raise ApiError(400, 'InvalidPlacementGroup.Unknown',
                               "The Placement Group '%s' is unknown." % missing[0])
            groups = [dict(g) for g in self.groups.values() if not names or g['name'] in names]

        def fill(root):
            pg_set = sub(root, 'placementGroupSet')
            for g in groups:
                item = sub(pg_set, 'item')
                sub(item, 'groupName', g['name'])
                sub(item, 'state', 'available')
                sub(item, 'strategy', g['strategy'])
                sub(item, 'groupId', g['id'])
        return success_body('DescribePlacementGroups', rid, fill)

    # ------------------------------------------------------------ VPCs, subnets, security groups

    def do_DescribeVpcs(self, params, rid):
        filters = self.ec2_filters(params, ('is-default', 'isDefault', 'vpc-id'))
        vpcs = [(DEFAULT_VPC, 'true')] + [(v, 'false') for v in sorted(set(SUBNETS.values()))]
        for name, values in filters:
            key = 0 if name == 'vpc-id' else 1
            vpcs = [v for v in vpcs if v[key] in values]

        def fill(root):
            vpc_set = sub(root, 'vpcSet')
            for vpc_id, default in vpcs:
                item = sub(vpc_set, 'item')
                sub(item, 'vpcId', vpc_id)
                sub(item, 'state', 'available')
                sub(item, 'isDefault', default)
        return success_body('DescribeVpcs', rid, fill)

    def do_DescribeSubnets(self, params, rid):
        ids = indexed(params, 'SubnetId')
        missing = [i for i in ids if i not in SUBNETS]
        if missing:
            raise ApiError(400, 'InvalidSubnetID.NotFound',
                           "The subnet ID '%s' does not exist" % missing[0])

        def fill(root):
            subnet_set = sub(root, 'subnetSet')
            for sid, vpc in SUBNETS.items():
                if not ids or sid in ids:
                    item = sub(subnet_set, 'item')
                    sub(item, 'subnetId', sid)
                    sub(item, 'vpcId', vpc)
                    sub(item, 'state', 'available')
        return success_body('DescribeSubnets', rid, fill)

    def sg_lookup(self, params):
        """The group of GroupId (or GroupName, in the default VPC); lock held."""
        gid, name = params.get('GroupId'), params.get('GroupName')
        for g in self.security_groups.values():
            if (gid and g['id'] == gid) or (not gid and name and g['name'] == name
                                              and g['vpc_id'] == DEFAULT_VPC):
                return g
        if not gid and not name:
            raise ApiError(400, 'MissingParameter',
                           'The request must contain the parameter GroupName or GroupId')
        raise ApiError(400, 'InvalidGroup.NotFound',
                       "The security group '%s' does not exist" % (gid or name))

    def do_CreateSecurityGroup(self, params, rid):
        name = required(params, 'GroupName')
        description = required(params, 'GroupDescription')
        vpc = params.get('VpcId') or DEFAULT_VPC
        if vpc != DEFAULT_VPC and vpc not in SUBNETS.values():
            raise ApiError(400, 'InvalidVpcID.NotFound', "The vpc ID '%s' does not exist" % vpc)
        tags = {}
        for spec in indexed_groups(params, 'TagSpecification'):
            if spec.get('ResourceType') != 'security-group':
                raise bad_param("'%s' is not a valid taggable resource type for this "
                                "operation." % spec.get('ResourceType'))
            for t in indexed_groups(spec, 'Tag'):
                tags[t.get('Key', '')] = t.get('Value', '')
        with self.lock:
            if any(g['name'] == name and g['vpc_id'] == vpc
                   for g in self.security_groups.values()):
                raise ApiError(400, 'InvalidGroup.Duplicate',
                               "The security group '%s' already exists for VPC '%s'"
                               % (name, vpc))
            self.not_dry()
            group = {'id': hex_id('sg-'), 'name': name, 'description': description,
                     'vpc_id': vpc, 'tags': tags, 'rules': []}
            self.security_groups[group['id']] = group

        def fill(root):
            sub(root, 'return', 'true')
            sub(root, 'groupId', group['id'])
        return success_body('CreateSecurityGroup', rid, fill)

    def do_AuthorizeSecurityGroupIngress(self, params, rid):
        perms = indexed_groups(params, 'IpPermissions')
        if not perms:
            raise ApiError(400, 'MissingParameter',
                           'The request must contain the parameter IpPermissions')
        with self.lock:
            group = self.sg_lookup(params)
            rules = []
            for perm in perms:
                proto = perm.get('IpProtocol')
                if proto not in ('tcp', 'udp', 'icmp', '-1'):
                    raise bad_param("Invalid value '%s' for IP protocol." % proto)
                ports = (None, None) if proto == '-1' else (
                    int_param(perm, 'FromPort'), int_param(perm, 'ToPort'))
                sources = ([{'cidr': r.get('CidrIp')} for r in indexed_groups(perm, 'IpRanges')]
                           + [{'group': g.get('GroupId')}
                              for g in indexed_groups(perm, 'Groups')])
                if not sources:
                    raise ApiError(400, 'MissingParameter',
                                   'A rule needs an IP range or a group')
                for src in sources:
                    if 'group' in src and src['group'] not in self.security_groups:
                        raise ApiError(400, 'InvalidGroup.NotFound',
                                       "The security group '%s' does not exist"
                                       % src['group'])
                    rule = {'protocol': proto, 'from_port': ports[0], 'to_port': ports[1]}
                    rule.update(src)
                    if rule in group['rules'] or rule in rules:
                        raise ApiError(400, 'InvalidPermission.Duplicate',
                                       'the specified rule already exists')
                    rules.append(rule)
            self.not_dry()
            group['rules'].extend(rules)
        return success_body('AuthorizeSecurityGroupIngress', rid,
                            lambda root: sub(root, 'return', 'true'))

    def sg_match(self, g, name, values):
        if name.startswith('tag:'):
            got = g['tags'].get(name[4:])
            return got is not None and any(wildcard_match(v, got) for v in values)
        if name == 'tag-key':
            return any(wildcard_match(v, k) for v in values for k in g['tags'])
        field = {'group-name': g['name'], 'group-id': g['id'], 'vpc-id': g['vpc_id']}[name]
        return any(wildcard_match(v, field) for v in values)

    def do_DescribeSecurityGroups(self, params, rid):
        ids = indexed(params, 'GroupId')
        filters = [(f.get('Name', ''), indexed(f, 'Value'))
                   for f in indexed_groups(params, 'Filter')]
        for name, _ in filters:
            if name not in ('group-name', 'group-id', 'vpc-id', 'tag-key') and \
                    not name.startswith('tag:'):
                raise ApiError(400, 'InvalidParameterValue',
                               "The filter '%s' is invalid" % name)
        with self.lock:
            missing = [i for i in ids if i not in self.security_groups]
            if missing:
                raise ApiError(400, 'InvalidGroup.NotFound',
                               "The security group '%s' does not exist" % missing[0])
            groups = [json.loads(json.dumps(g)) for g in self.security_groups.values()
                      if (not ids or g['id'] in ids)
                      and all(self.sg_match(g, n, v) for n, v in filters)]

        def fill(root):
            info = sub(root, 'securityGroupInfo')
            for g in groups:
                item = sub(info, 'item')
                sub(item, 'ownerId', '123456789012')
                sub(item, 'groupId', g['id'])
                sub(item, 'groupName', g['name'])
                sub(item, 'groupDescription', g['description'])
                sub(item, 'vpcId', g['vpc_id'])
                perms = sub(item, 'ipPermissions')
                for r in g['rules']:
                    perm = sub(perms, 'item')
                    sub(perm, 'ipProtocol', r['protocol'])
                    if r['from_port'] is not None:
                        sub(perm, 'fromPort', str(r['from_port']))
                        sub(perm, 'toPort', str(r['to_port']))
                    pairs, ranges = sub(perm, 'groups'), sub(perm, 'ipRanges')
                    if 'group' in r:
                        pair = sub(pairs, 'item')
                        sub(pair, 'userId', '123456789012')
                        sub(pair, 'groupId', r['group'])
                    else:
                        sub(sub(ranges, 'item'), 'cidrIp', r['cidr'])
                tag_set = sub(item, 'tagSet')
                for k, v in g['tags'].items():
                    tag = sub(tag_set, 'item')
                    sub(tag, 'key', k)
                    sub(tag, 'value', v)
        return success_body('DescribeSecurityGroups', rid, fill)

    def do_DeleteSecurityGroup(self, params, rid):
        with self.lock:
            group = self.sg_lookup(params)
            # In use while an instance that is not terminated has it, and for
            # sg_release_ms after the last one terminated (EC2 frees the network
            # interfaces a while after).
            release = self.settings['sg_release_ms'] / 1000.0
            now = time.monotonic()
            users = [i.id for i in self.instances if group['id'] in i.security_group_ids
                     and i.region == self.cur_region()
                     and (i.state != 'terminated' or (i.terminated_at is not None
                                                      and now - i.terminated_at < release))]
            if users:
                raise ApiError(400, 'DependencyViolation',
                               "resource %s has a dependent object" % group['id'])
            self.not_dry()
            del self.security_groups[group['id']]
        return success_body('DeleteSecurityGroup', rid,
                            lambda root: sub(root, 'return', 'true'))

    # ------------------------------------------------------------ images

    def image_info(self, image_id):
        """The image IMAGE_ID (a dict), None for one that does not exist (ami-bad...)."""
        if image_id.startswith('ami-bad'):
            return None
        param = self.public_ids.get(image_id)
        if param is not None:
            arch, name, owner = PUBLIC_IMAGES[param]
            owner_id = OWNERS[owner]
            location = '%s/%s' % ('amazon' if owner == 'amazon' else owner_id, name)
        else:
            arch = 'arm64' if 'arm' in image_id else 'x86_64'
            name, owner_id = image_id, OWNER_ID
            location = '%s/%s' % (owner_id, name)
        return {'image-id': image_id, 'architecture': arch, 'name': name,
                'owner-id': owner_id, 'image-location': location, 'state': 'available',
                'image-type': 'machine', 'is-public': 'true', 'root-device-type': 'ebs',
                'virtualization-type': 'hvm', 'platform-details': 'Linux/UNIX'}

    def do_DescribeImages(self, params, rid):
        ids = indexed(params, 'ImageId')
        aliases = {'self': OWNER_ID, 'amazon': OWNERS['amazon']}
        owners = {aliases.get(o, o) for o in indexed(params, 'Owner')}
        # Filters on the image's fields; other filter names are not checked.
        filters = [(f.get('Name', ''), indexed(f, 'Value'))
                   for f in indexed_groups(params, 'Filter')]
        malformed = [i for i in ids if not re.fullmatch(r'ami-[0-9A-Za-z]+', i)]
        if malformed:
            raise ApiError(400, 'InvalidAMIID.Malformed',
                           'Invalid id: "%s" (expecting "ami-...")' % malformed[0])
        missing = [i for i in ids if i.startswith('ami-bad')]
        if missing:
            raise ApiError(400, 'InvalidAMIID.NotFound',
                           "The image id '[%s]' does not exist" % ', '.join(missing))
        region = self.cur_region()
        images = [self.image_info(i) for i in dict.fromkeys(
            ids or [region_ami(region, n) for n in PUBLIC_IMAGES])]
        images = [im for im in images if (not owners or im['owner-id'] in owners)
                  and all(any(wildcard_match(v, im[n]) for v in vals)
                          for n, vals in filters if n in im)]

        def fill(root):
            images_set = sub(root, 'imagesSet')
            for im in images:
                item = sub(images_set, 'item')
                for tag, field in (('imageId', 'image-id'), ('imageLocation', 'image-location'),
                                   ('imageState', 'state'), ('imageOwnerId', 'owner-id'),
                                   ('isPublic', 'is-public'), ('architecture', 'architecture'),
                                   ('imageType', 'image-type'), ('name', 'name'),
                                   ('rootDeviceType', 'root-device-type')):
                    sub(item, tag, im[field])
                sub(item, 'creationDate', IMAGE_CREATED)
                sub(item, 'rootDeviceName', '/dev/xvda')
                sub(item, 'virtualizationType', im['virtualization-type'])
                sub(item, 'platformDetails', im['platform-details'])
                sub(item, 'usageOperation', 'RunInstances')
                sub(item, 'enaSupport', 'true')
                sub(item, 'hypervisor', 'xen')
        return success_body('DescribeImages', rid, fill)

    # ------------------------------------------------------------ instances

    def instance_xml(self, parent, inst):
        item = sub(parent, 'item')
        sub(item, 'instanceId', inst.id)
        sub(item, 'imageId', inst.image_id)
        state_xml(item, 'instanceState', inst.state)
        addr = self.address(inst.slot) if inst.state != 'terminated' else None
        sub(item, 'privateDnsName',
            'ip-%s.ec2.internal' % addr.replace('.', '-') if addr else None)
        sub(item, 'dnsName')
        sub(item, 'reason', inst.transition or (inst.state_reason[1] if inst.state_reason
                                                 else None))
        if inst.key_name:
            sub(item, 'keyName', inst.key_name)
        sub(item, 'amiLaunchIndex', inst.launch_index)
        sub(item, 'instanceType', inst.instance_type)
        sub(item, 'launchTime', inst.launch_time)
        placement = sub(item, 'placement')
        sub(placement, 'availabilityZone', inst.zone)
        if inst.placement_group:
            sub(placement, 'groupName', inst.placement_group)
        sub(placement, 'tenancy', 'default')
        sub(sub(item, 'monitoring'), 'state', 'disabled')
        if inst.subnet_id:
            sub(item, 'subnetId', inst.subnet_id)
        if addr:
            sub(item, 'privateIpAddress', addr)
        if addr and inst.state == 'running':
            sub(item, 'ipAddress', addr)
        if inst.security_group_ids:
            groups = sub(item, 'groupSet')
            for gid in inst.security_group_ids:
                sub(sub(groups, 'item'), 'groupId', gid)
        if inst.state_reason:
            reason = sub(item, 'stateReason')
            sub(reason, 'code', inst.state_reason[0])
            sub(reason, 'message', inst.state_reason[1])
        sub(item, 'architecture', inst.architecture)
        sub(item, 'rootDeviceType', 'ebs')
        sub(item, 'rootDeviceName', '/dev/xvda')
        if inst.client_token:
            sub(item, 'clientToken', inst.client_token)
        if inst.tags:
            tag_set = sub(item, 'tagSet')
            for k, v in inst.tags.items():
                t = sub(tag_set, 'item')
                sub(t, 'key', k)
                sub(t, 'value', v)
        sub(item, 'virtualizationType', 'hvm')
        sub(item, 'hypervisor', 'xen')
        if inst.market == 'spot':
            sub(item, 'instanceLifecycle', 'spot')
            sub(item, 'spotInstanceRequestId', inst.spot_request_id)

    def reservation_xml(self, parent, rid, instances, tag='item'):
        res = sub(parent, tag) if tag else parent
        sub(res, 'reservationId', rid)
        sub(res, 'ownerId', OWNER_ID)
        sub(res, 'groupSet')
        inst_set = sub(res, 'instancesSet')
        for inst in instances:
            self.instance_xml(inst_set, inst)

    def run_params(self, params):
        """The launch parameters of a RunInstances request (validated later)."""
        tags, volume_tags = {}, {}
        for spec in indexed_groups(params, 'TagSpecification'):
            rtype = spec.get('ResourceType')
            pairs = {}
            for t in indexed_groups({k: v for k, v in spec.items()}, 'Tag'):
                if not t.get('Key'):
                    raise ApiError(400, 'InvalidParameterValue', 'Tag keys must not be empty')
                pairs[t['Key']] = t.get('Value', '')
            if rtype == 'instance':
                tags.update(pairs)
            elif rtype == 'volume':
                volume_tags.update(pairs)
        return {
            'image_id': params.get('ImageId') or '',
            'instance_type': params.get('InstanceType') or 'm1.small',
            'key_name': params.get('KeyName') or None,
            'subnet_id': params.get('SubnetId') or None,
            'security_group_ids': indexed(params, 'SecurityGroupId'),
            'placement_group': params.get('Placement.GroupName') or None,
            'zone': params.get('Placement.AvailabilityZone') or None,
            'market': market_params(params),
            'client_token': params.get('ClientToken') or None,
            'tags': tags,
            'volume_tags': volume_tags,
        }

    def launch_zone(self, p):
        """The zone a launch goes to: Placement.AvailabilityZone, else the subnet's, else
        the first zone offering the type."""
        region, lc = self.cur_region(), self.launchables
        offered = lc.type_zones(region, p['instance_type'])
        zone = p['zone']
        if zone is not None:
            if zone not in lc.zones(region):
                raise bad_param('Invalid availability zone: [%s]' % zone)
            if p['instance_type'] in lc.arch and zone not in offered:
                raise ApiError(400, 'Unsupported',
                               'Your requested instance type (%s) is not supported in your '
                               'requested Availability Zone (%s). Please retry your request '
                               'by not specifying an Availability Zone or choosing %s.'
                               % (p['instance_type'], zone, ', '.join(offered)))
            return zone
        if p['subnet_id'] in SUBNETS:
            return region + 'a'
        return offered[0] if offered else region + 'a'

    def capacity_code(self, zone, instance_type, market):
        """The code of the first capacity entry the launch matches, or None."""
        for e in self.settings['capacity']:
            if all(e.get(k, '*') in ('*', v) for k, v in (
                    ('zone', zone), ('instance_type', instance_type), ('market', market))):
                return e.get('code') or 'InsufficientInstanceCapacity'
        return None

    def capacity_error(self, code, p, params):
        zone, itype, market = p['zone'], p['instance_type'], p['market']
        if code == 'InsufficientHostCapacity':
            return ApiError(500, code, 'There is not enough capacity to fulfill your '
                                       'Dedicated Host request.')
        if code == 'SpotMaxPriceTooLow':
            return ApiError(400, code, 'Your Spot request price of %s is lower than the '
                                       'minimum required Spot request fulfillment price.'
                            % (params.get('InstanceMarketOptions.SpotOptions.MaxPrice')
                               or 'the On-Demand price'))
        if market == 'spot':
            return ApiError(500, code, 'There is no Spot capacity available that matches '
                                       'your request.')
        region = self.cur_region()
        others = [z for z in (self.launchables.type_zones(region, itype)
                              or self.launchables.zones(region))
                  if z != zone and self.capacity_code(z, itype, market) is None]
        message = ('We currently do not have sufficient capacity in the Availability Zone '
                   'you requested (%s). Our system will be working on provisioning additional '
                   'capacity.' % zone)
        if others:
            message += (' You can currently get %s capacity by not specifying an Availability '
                        'Zone in your request or choosing %s.' % (itype, ', '.join(others)))
        return ApiError(500, code, message)

    def do_RunInstances(self, params, rid):
        p = self.run_params(params)
        token = p['client_token']
        launched = []
        with self.lock:
            if token and token in self.tokens:
                seen = self.tokens[token]
                if seen['params'] != params:
                    raise ApiError(400, 'IdempotentParameterMismatch',
                                   'Arguments on this idempotent request are inconsistent '
                                   'with arguments used in previous request(s).')
                self.not_dry()
                res_id = seen['reservation']
                instances = [self.by_id[i] for i in self.reservations[res_id]]
            else:
                image = self.image_info(required(params, 'ImageId'))
                if image is None:
                    raise ApiError(400, 'InvalidAMIID.NotFound',
                                   "The image id '[%s]' does not exist" % params['ImageId'])
                p['architecture'] = image['architecture']
                type_arch = self.launchables.architecture(p['instance_type'])
                if type_arch != image['architecture']:
                    raise bad_param(
                        "The architecture '%s' of the specified instance type does not match "
                        "the architecture '%s' of the specified AMI. Specify an instance type "
                        "and an AMI that have matching architectures, and try again. You can "
                        "use 'describe-instance-types' or 'describe-images' to discover the "
                        "architecture of the instance type or AMI."
                        % (type_arch, image['architecture']))
                min_count = int_param(params, 'MinCount', low=1)
                max_count = int_param(params, 'MaxCount', low=1)
                if min_count > max_count:
                    raise bad_param('MinCount (%d) must not exceed MaxCount (%d)'
                                    % (min_count, max_count))
                if p['key_name'] is not None:
                    if p['key_name'] not in self.key_pairs:
                        raise ApiError(400, 'InvalidKeyPair.NotFound',
                                       "The key pair '%s' does not exist" % p['key_name'])
                    p['key_material'] = self.key_pairs[p['key_name']]['material']
                else:
                    p['key_material'] = None
                if p['placement_group'] is not None and p['placement_group'] not in self.groups:
                    raise ApiError(400, 'InvalidPlacementGroup.Unknown',
                                   "The Placement Group '%s' is unknown." % p['placement_group'])
                for sg in p['security_group_ids']:
                    if sg not in self.security_groups:
                        raise ApiError(400, 'InvalidGroup.NotFound',
                                       "The security group '%s' does not exist" % sg)
                p['zone'] = self.launch_zone(p)
                self.not_dry()
                code = self.capacity_code(p['zone'], p['instance_type'], p['market'])
                if code is not None:
                    raise self.capacity_error(code, p, params)
                slots = self.free_slots(max_count)
                if len(slots) < min_count:
                    code = 'InsufficientInstanceCapacity'
                    raise ApiError(FAULT_DEFAULTS[code][0], code,
                                   'We currently do not have sufficient capacity: %d test '
                                   'host addresses are free, %d wanted.'
                                   % (len(slots), min_count))
                res_id = hex_id('r-')
                instances = []
                for n, slot in enumerate(slots):
                    inst = Instance(len(self.instances), res_id, n, p)
                    inst.region = self.cur_region()
                    inst.slot = slot
                    inst.silent = bool(self.settings['ssh_silent'])
                    self.instances.append(inst)
                    self.by_id[inst.id] = inst
                    instances.append(inst)
                self.reservations[res_id] = [i.id for i in instances]
                if token:
                    self.tokens[token] = {'params': dict(params), 'reservation': res_id,
                                          'launches': 1}
                launched = [(inst, inst.generation) for inst in instances]
            body = success_body('RunInstances', rid,
                                lambda root: self.reservation_xml(root, res_id, instances,
                                                                  tag=None))
        for inst, gen in launched:
            self.spawn(self.launch_job, inst, gen)
        return body

    def advance(self):
        """The transitions a DescribeInstances call makes happen (lock held)."""
        s = self.settings
        for inst in self.instances:
            if inst.state == 'pending' and inst.ready and inst.polls >= s['pending_polls']:
                inst.state, inst.polls = 'running', 0
            elif inst.state == 'stopping' and inst.down and inst.polls >= s['stopping_polls']:
                inst.state, inst.polls = 'stopped', 0
            elif (inst.state == 'shutting-down' and inst.down
                  and (inst.reclaimed or inst.polls >= s['stopping_polls'])):
                self.terminated(inst)

    @staticmethod
    def terminated(inst):
        inst.state, inst.polls = 'terminated', 0
        inst.terminated_at = time.monotonic()

    def filter_match(self, inst, name, values):
        if name.startswith('tag:'):
            key = name[4:]
            return key in inst.tags and any(wildcard_match(v, inst.tags[key]) for v in values)
        if name == 'tag-key':
            return any(wildcard_match(v, k) for v in values for k in inst.tags)
        field = {'instance-state-name': inst.state, 'instance-id': inst.id,
                 'client-token': inst.client_token or '',
                 'reservation-id': inst.reservation_id, 'availability-zone': inst.zone,
                 'instance-lifecycle': 'spot' if inst.market == 'spot' else '',
                 'architecture': inst.architecture, 'instance-type': inst.instance_type,
                 'image-id': inst.image_id}[name]
        return any(wildcard_match(v, field) for v in values)

    def do_DescribeInstances(self, params, rid):
        ids = indexed(params, 'InstanceId')
        filters = []
        for f in indexed_groups(params, 'Filter'):
            name = f.get('Name')
            if not name:
                raise ApiError(400, 'InvalidParameterValue', 'A filter has no Name')
            if not (name.startswith('tag:') or name in (
                    'tag-key', 'instance-state-name', 'instance-id', 'client-token',
                    'reservation-id', 'availability-zone', 'instance-lifecycle',
                    'architecture', 'instance-type', 'image-id')):
                raise ApiError(400, 'InvalidParameterValue',
                               "The filter '%s' is invalid" % name)
            values = indexed(f, 'Value')
            filters.append((name, values))
        max_results = None
        if params.get('MaxResults'):
            if ids:
                raise ApiError(400, 'InvalidParameterCombination',
                               'The parameter instancesSet cannot be used with the parameter '
                               'maxResults')
            max_results = int_param(params, 'MaxResults', low=5, high=1000)
        after = -1
        if params.get('NextToken'):
            try:
                after = int(json.loads(base64.urlsafe_b64decode(
                    params['NextToken'].encode('ascii')))['after'])
            except (ValueError, KeyError, TypeError, binascii.Error, UnicodeEncodeError):
                raise ApiError(400, 'InvalidParameterValue',
                               "Invalid NextToken '%s'" % params['NextToken']) from None
        with self.lock:
            missing = [i for i in ids if i not in self.by_id
                       or self.by_id[i].region != self.cur_region()]
            if missing:
                raise ApiError(400, 'InvalidInstanceID.NotFound',
                               "The instance ID%s '%s' do%s not exist"
                               % ('s' if len(missing) > 1 else '', ', '.join(missing),
                                  '' if len(missing) > 1 else 'es'))
            self.not_dry()
            self.advance()
            page = None if ids else self.settings['page_size']  # ids: never paged
            limit = min(x for x in (max_results, page, 1 << 30) if x)
            region = self.cur_region()
            matched = [i for i in self.instances
                       if i.seq > after and i.region == region and (not ids or i.id in ids)
                       and all(self.filter_match(i, n, v) for n, v in filters)]
            more = len(matched) > limit
            matched = matched[:limit]
            token = None
            if more:
                token = base64.urlsafe_b64encode(json.dumps(
                    {'after': matched[-1].seq}).encode()).decode('ascii')

            def fill(root):
                res_set = sub(root, 'reservationSet')
                group = []
                for inst in matched + [None]:
                    if group and (inst is None or inst.reservation_id != group[0].reservation_id):
                        self.reservation_xml(res_set, group[0].reservation_id, group)
                        group = []
                    if inst is not None:
                        group.append(inst)
                if token:
                    sub(root, 'nextToken', token)
            body = success_body('DescribeInstances', rid, fill)
            for inst in self.instances:
                if inst.state in TRANSITIONAL:
                    inst.polls += 1
        return body

    def lookup(self, params):
        ids = indexed(params, 'InstanceId')
        if not ids:
            raise ApiError(400, 'MissingParameter',
                           'The request must contain the parameter InstanceId')
        missing = [i for i in ids if i not in self.by_id
                   or self.by_id[i].region != self.cur_region()]
        if missing:
            raise ApiError(400, 'InvalidInstanceID.NotFound',
                           "The instance ID '%s' does not exist" % ', '.join(missing))
        seen, out = set(), []
        for i in ids:
            if i not in seen:
                seen.add(i)
                out.append(self.by_id[i])
        return out

    def change_body(self, action, rid, changes):
        def fill(root):
            inst_set = sub(root, 'instancesSet')
            for inst_id, current, previous in changes:
                item = sub(inst_set, 'item')
                sub(item, 'instanceId', inst_id)
                state_xml(item, 'currentState', current)
                state_xml(item, 'previousState', previous)
        return success_body(action, rid, fill)

    def do_StopInstances(self, params, rid):
        with self.lock:
            instances = self.lookup(params)
            for inst in instances:
                if inst.state in ('terminated', 'shutting-down'):
                    raise ApiError(400, 'IncorrectInstanceState',
                                   "This instance '%s' is not in a state from which it can be "
                                   "stopped." % inst.id)
                if inst.market == 'spot':
                    raise ApiError(400, 'UnsupportedOperation',
                                   "You can't stop the Spot Instance '%s' because it is "
                                   "associated with a one-time Spot Instance request. You "
                                   "can only stop Spot Instances associated with persistent "
                                   "Spot Instance requests." % inst.id)
            self.not_dry()
            changes, victims = [], []
            for inst in instances:
                prev = inst.state
                if prev in ('pending', 'running'):
                    inst.state, inst.polls = 'stopping', 0
                    inst.generation += 1
                    inst.ready = False
                    victims.append(inst)
                changes.append((inst.id, inst.state, prev))
        self.stop_sshds(victims, terminate=False)
        return self.change_body('StopInstances', rid, changes)

    def do_StartInstances(self, params, rid):
        launches = []
        with self.lock:
            instances = self.lookup(params)
            for inst in instances:
                if inst.state not in ('pending', 'running', 'stopped'):
                    raise ApiError(400, 'IncorrectInstanceState',
                                   "The instance '%s' is not in a state from which it can be "
                                   "started." % inst.id)
            self.not_dry()
            wanted = [i for i in instances if i.state == 'stopped']
            changes = []
            for inst in instances:
                prev = inst.state
                if inst in wanted:
                    # Another address while one is free (its own is still taken).
                    slots = self.free_slots(1)
                    new = slots[0] if slots else inst.slot
                    inst.slot = new
                    inst.state, inst.polls = 'pending', 0
                    inst.ready = False
                    inst.launch_time = now_iso()
                    inst.generation += 1
                    launches.append((inst, inst.generation))
                changes.append((inst.id, inst.state, prev))
        for inst, gen in launches:
            self.spawn(self.launch_job, inst, gen)
        return self.change_body('StartInstances', rid, changes)

    def do_TerminateInstances(self, params, rid):
        with self.lock:
            instances = self.lookup(params)
            self.not_dry()
            changes, victims = [], []
            for inst in instances:
                prev = inst.state
                if prev not in ('terminated', 'shutting-down'):
                    inst.state, inst.polls = 'shutting-down', 0
                    inst.state_reason = USER_REASON
                    inst.transition = 'User initiated (%s)' % gmt_now()
                    inst.generation += 1
                    inst.ready = False
                    inst.down = False
                    victims.append(inst)
                changes.append((inst.id, inst.state, prev))
        self.stop_sshds(victims, terminate=True)
        return self.change_body('TerminateInstances', rid, changes)

    # ------------------------------------------------------------ control endpoint

    def reclaim(self, data):
        """/_fake/reclaim: EC2 takes spot instances back; (status, JSON)."""
        if not isinstance(data, dict) or not (('instance_id' in data) ^ ('instance_ids' in data)):
            return 400, {'error': 'expected {"instance_id": ID} or {"instance_ids": [IDS]}'}
        ids = data['instance_ids'] if 'instance_ids' in data else [data['instance_id']]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return 400, {'error': 'instance ids are a non-empty list of strings'}
        ids = list(dict.fromkeys(ids))
        with self.lock:
            for i in ids:
                inst = self.by_id.get(i)
                if inst is None:
                    return 400, {'error': 'no such instance: %s' % i}
                if inst.market != 'spot':
                    return 400, {'error': '%s is not a spot instance' % i}
                if inst.state in ('shutting-down', 'terminated'):
                    return 400, {'error': '%s is %s already' % (i, inst.state)}
            victims = [self.by_id[i] for i in ids]
            for inst in victims:
                inst.state, inst.polls = 'shutting-down', 0
                inst.generation += 1
                inst.ready = False
                inst.down = False
                inst.reclaimed = True
                inst.state_reason = SPOT_REASON
                inst.transition = 'Service initiated (%s)' % gmt_now()
        self.stop_sshds(victims, terminate=True)

        def settle():
            with self.lock:
                for inst in victims:
                    if inst.state == 'shutting-down' and inst.down:
                        self.terminated(inst)
        timer = threading.Timer(SPOT_RECLAIM_S, settle)
        timer.daemon = True
        timer.start()
        return 200, {'reclaimed': ids}

    def check_settings(self, data):
        """None, or what is wrong with a /_fake/settings object."""
        if not isinstance(data, dict):
            return 'settings are a JSON object'
        for name, value in data.items():
            if name not in self.settings:
                return 'unknown setting %r' % name
            if name == 'page_size' and value in (None, 0):
                continue
            if name == 'ssh_silent':
                if value not in (0, 1):  # true and false are 1 and 0 too
                    return 'ssh_silent must be 0 or 1'
                continue
            if name == 'deny':
                if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                    return 'deny is a list of action names'
                continue
            if name == 'capacity':
                problem = self.check_capacity(value)
                if problem:
                    return problem
                continue
            if not isinstance(value, int) or value < 0 or (
                    name == 'page_size' and value < 1):
                return '%s must be a non-negative integer' % name
        return None

    @staticmethod
    def check_capacity(value):
        if not isinstance(value, list):
            return 'capacity is a list of {"zone", "instance_type", "market", "code"}'
        for e in value:
            if not isinstance(e, dict) or set(e) - {'zone', 'instance_type', 'market', 'code'}:
                return 'a capacity entry has only "zone", "instance_type", "market", "code"'
            if not all(isinstance(e.get(k, '*'), str) for k in ('zone', 'instance_type')):
                return 'a capacity entry\'s zone and instance_type are strings'
            if e.get('market', '*') not in ('on-demand', 'spot', '*'):
                return 'a capacity entry\'s market is "on-demand", "spot" or "*"'
            if e.get('code', CAPACITY_CODES[0]) not in CAPACITY_CODES:
                return 'a capacity entry\'s code is one of ' + ', '.join(CAPACITY_CODES)
        return None

    def state_json(self):
        with self.lock:
            return {
                'instances': [{
                    'id': i.id, 'state': i.state,
                    'address': self.address(i.slot) if i.state != 'terminated' else None,
                    'tags': dict(i.tags), 'volume_tags': dict(i.volume_tags),
                    'client_token': i.client_token, 'image_id': i.image_id,
                    'instance_type': i.instance_type, 'key_name': i.key_name,
                    'placement_group': i.placement_group, 'subnet_id': i.subnet_id,
                    'security_group_ids': list(i.security_group_ids),
                    'reservation_id': i.reservation_id, 'sshd_pid': i.sshd_pid,
                    'region': i.region,
                    'ssh_silent': i.silent, 'silent_listening': i.silent_port is not None,
                    'host_dir': self.host_dir(i.dir_slot) if i.dir_slot is not None else None,
                    'state_reason': i.state_reason[1] if i.state_reason else None,
                    'state_reason_code': i.state_reason[0] if i.state_reason else None,
                    'zone': i.zone, 'market': i.market, 'architecture': i.architecture,
                    'spot_request_id': i.spot_request_id,
                } for i in self.instances],
                'key_pairs': [n for d in self.key_pairs_of.values() for n in d],
                'placement_groups': [n for d in self.groups_of.values() for n in d],
                'key_pairs_by_region': {r: list(d) for r, d in self.key_pairs_of.items()},
                'placement_groups_by_region': {r: list(d) for r, d in self.groups_of.items()},
                'security_groups': [dict(g, region=r, rules=[dict(x) for x in g['rules']],
                                         tags=dict(g['tags']))
                                    for r, d in self.security_groups_of.items()
                                    for g in d.values() if g['id'] != PRESET_SG],
                'calls_by_region': {a: dict(d) for a, d in self.calls_by_region.items()},
                'catalog': self.catalog_state(),
                'calls': dict(self.calls),
                'dry_runs': dict(self.dry_runs),
                'launches_per_token': {t: v['launches'] for t, v in self.tokens.items()},
                'faults': [f.as_json() for f in self.faults],
                'settings': dict(self.settings),
            }

    def handle_control(self, handler, body):
        """(status, JSON body) of a /_fake/ request."""
        path = urllib.parse.urlsplit(handler.path).path
        method = handler.command
        try:
            data = json.loads(body.decode('utf-8')) if body.strip() else None
        except (UnicodeDecodeError, ValueError) as e:
            return 400, {'error': 'bad JSON: %s' % e}
        if path == '/_fake/state' and method == 'GET':
            return 200, self.state_json()
        if path == '/_fake/faults' and method == 'POST':
            specs = data if isinstance(data, list) else [data]
            try:
                faults = [Fault(s) for s in specs]
            except ValueError as e:
                return 400, {'error': str(e)}
            with self.lock:
                self.faults.extend(faults)
                return 200, {'faults': [f.as_json() for f in self.faults]}
        if path == '/_fake/faults' and method == 'DELETE':
            with self.lock:
                self.faults = []
            return 200, {'faults': []}
        if path == '/_fake/reclaim' and method == 'POST':
            return self.reclaim(data)
        if path == '/_fake/settings' and method == 'POST':
            problem = self.check_settings(data)
            if problem:
                return 400, {'error': problem}
            with self.lock:
                for name, value in data.items():
                    self.settings[name] = (value or None if name == 'page_size' else
                                           int(value) if name == 'ssh_silent' else value)
                return 200, {'settings': dict(self.settings)}
        if path == '/_fake/reset-calls' and method == 'POST':
            with self.lock:
                self.calls = {}
                self.calls_by_region = {}
                self.dry_runs = {}
            return 200, {'calls': {}}
        return 404, {'error': 'no such control request: %s %s' % (method, path)}


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'FakeEC2'
    timeout = 120  # an idle keep-alive connection is dropped after this

    def version_string(self):
        return self.server_version

    def log_message(self, format, *args):  # the server keeps requests.log instead
        pass

    def read_body(self):
        length = self.headers.get('Content-Length')
        if self.headers.get('Transfer-Encoding'):
            return None
        try:
            n = int(length) if length is not None else 0
        except ValueError:
            return None
        if n < 0 or n > MAX_BODY:
            return None
        return self.rfile.read(n) if n else b''

    def send(self, status, body, ctype):
        try:
            self.send_response(status)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test)

    def handle_any(self):
        fake = self.server.fake
        body = self.read_body()
        if body is None:
            self.close_connection = True
            rid = str(uuid.uuid4())
            self.send(400, error_body('InvalidParameter',
                                      'A body needs a valid Content-Length (no chunked '
                                      'encoding, at most %d bytes)' % MAX_BODY, rid),
                      'text/xml;charset=UTF-8')
            fake.write_log(None, 400, 'InvalidParameter')
            return
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith('/_fake/'):
            status, data = fake.handle_control(self, body)
            self.send(status, (json.dumps(data, indent=1) + '\n').encode('utf-8'),
                      'application/json')
            fake.write_log(path, status, None if status == 200 else 'ControlError')
            return
        host = self.headers.get('Host') or '127.0.0.1:%d' % self.server.server_address[1]
        if self.headers.get('X-Amz-Target') is not None:
            action, status, code, out = fake.handle_json(self, host, body)
            self.send(status, out, 'application/x-amz-json-1.1')
            fake.write_log(action, status, code)
            return
        action, status, code, out = fake.handle_api(self, host, body)
        self.send(status, out, 'text/html' if code == '-' else 'text/xml;charset=UTF-8')
        fake.write_log(action, status, code)

    do_POST = do_GET = do_DELETE = do_PUT = do_HEAD = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def write_atomic(path, text):
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'w') as f:
        f.write(text)
    os.rename(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description='A fake EC2 endpoint for the test suites.')
    ap.add_argument('--dir', required=True, help='state directory (port, pid, logs, hosts)')
    ap.add_argument('--port', type=int, default=0, help='port on 127.0.0.1 (0: any free one)')
    ap.add_argument('--region', default='us-east-1')
    ap.add_argument('--credentials', action='append', metavar='AKID:SECRET[:TOKEN]',
                    help='an accepted credential (repeatable; default %s)'
                    % DEFAULT_CREDENTIALS)
    ap.add_argument('--net', default='127.0.2', help='the /24 of the test-host addresses')
    ap.add_argument('--first', type=int, default=10, help='the first host number K')
    ap.add_argument('--testhosts', default=TESTHOSTS_SCRIPT, help=argparse.SUPPRESS)
    env = os.environ.get
    ap.add_argument('--delay-ms', type=int, default=int(env('FAKE_EC2_DELAY_MS') or 0),
                    help='every signed call waits this long')
    ap.add_argument('--regions', type=int, default=int(env('FAKE_EC2_REGIONS') or 0),
                    help='enable only the first N regions (0: all)')
    ap.add_argument('--fail-pricing', metavar='CODE', default=env('FAKE_EC2_FAIL_PRICING'),
                    help='answer every GetProducts with this error (HTTP 400)')
    ap.add_argument('--hang', metavar='ACTION', action='append',
                    default=(env('FAKE_EC2_HANG') or '').split() or None,
                    help='hold every call of ACTION for an hour (repeatable)')
    args = ap.parse_args(argv)
    if args.delay_ms < 0 or args.regions < 0:
        ap.error('--delay-ms and --regions must not be negative')
    if not re.fullmatch(r'127\.\d{1,3}\.\d{1,3}', args.net) or any(
            int(x) > 255 for x in args.net.split('.')):
        ap.error('--net must be a /24 of 127.0.0.0/8, like 127.0.2')
    if not 1 <= args.first <= 254:
        ap.error('--first must be within 1..254')

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    os.makedirs(args.dir, exist_ok=True)
    for name in ('port', 'pid'):
        try:
            os.unlink(os.path.join(args.dir, name))
        except FileNotFoundError:
            pass
    fake = FakeEC2(args)
    fake.prepare_hosts()
    server = Server(('127.0.0.1', args.port), Handler)
    server.fake = fake
    serving = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.2},
                               daemon=True)
    serving.start()
    write_atomic(os.path.join(fake.dir, 'pid'), '%d\n' % os.getpid())
    write_atomic(os.path.join(fake.dir, 'port'), '%d\n' % server.server_address[1])
    while not stop.wait(0.5):
        pass
    server.shutdown()
    server.server_close()
    fake.shutdown()
    for name in ('port', 'pid'):
        try:
            os.unlink(os.path.join(fake.dir, name))
        except FileNotFoundError:
            pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
