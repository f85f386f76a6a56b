#!/usr/bin/python3
# tests/fakegce/fake_gce.py: a fake Google Cloud endpoint for the test suites: the OAuth
# token endpoint (service-account JWTs verified with the key's public key, refresh tokens),
# the metadata server, and the Compute API routes of fake_compute.py behind bearer tokens.
"""A fake Google Cloud endpoint.

    fake_gce.py --dir DIR [--port 0] [--project cclfs-test] [--service-account KEY.json]...
                [--authorized-user FILE.json]... [--net 127.0.3] [--first 10]
                [--token-ttl 3599] [--billing-key KEY]
    fake_gce.py --make-key OUT.json --email NAME@PROJECT.iam.gserviceaccount.com
                --project P --token-uri URL

Listens on 127.0.0.1:PORT; once listening, DIR/port holds the port and DIR/pid the pid.
DIR/requests.log gets one line per request, "METHOD PATH STATUS" (never a token, an
assertion or a query). SIGTERM or SIGINT: the Compute part is closed, then it exits 0.

The credential files named by --service-account and --authorized-user are read at each
token request, so a test may start the fake first and write a key whose token_uri names
the fake's port afterwards; a file that does not exist (yet) is no account.

POST /token (form body):
    grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT: the JWT is
    checked as Google does (RS256 header with the kid of the key of its iss, the signature,
    aud == the key's token_uri and the URL it was posted to, the compute scope, iat within
    5 minutes of now, exp after now and at most 3600 s after iat);
    grant_type=refresh_token with client_id, client_secret and refresh_token of a known
    authorized_user file.
    200 {"access_token", "expires_in": token_ttl, "token_type": "Bearer"}, else 400
    {"error", "error_description"} with Google's wording.
GET /computeMetadata/v1/instance/service-accounts/default/token (Metadata-Flavor: Google,
    else 403): a token as above. GET /computeMetadata/v1/project/project-id: the project.
/compute/v1/...: needs "Authorization: Bearer TOKEN" of an issued token that has not
    expired (else 401 UNAUTHENTICATED), then fake_compute.ComputeAPI.handle answers
    (501 while fake_compute.py does not exist); aggregated/machineTypes and
    aggregated/acceleratorTypes are fake_catalog.py's.
/v1/services/6F81-5844-456A/skus: the Cloud Billing Catalog (fake_catalog.py), with
    ?key=KEY of --billing-key or a bearer token.
Control: GET /_fake/state (tokens issued, grants and failures by type, the Compute state
    under "compute"); POST /_fake/settings {"token_ttl": N, ...} (other keys go to the
    Compute part); /_fake/catalog/PATH goes to fake_catalog.FakeCatalog.control; any
    other /_fake/PATH goes to ComputeAPI.control(METHOD, /PATH, body).
"""

import argparse
import base64
import contextlib
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

import fake_catalog

JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
COMPUTE_SCOPE = 'https://www.googleapis.com/auth/compute'
MAX_BODY = 1 << 20
SKEW = 300  # how far iat may be from now, in seconds
MAX_LIFETIME = 3600

BAD_SIGNATURE = 'Invalid JWT Signature.'
BAD_TIME = ('Invalid JWT: Token must be a short-lived token (60 minutes) and in a '
            'reasonable timeframe. Check your iat and exp values in the JWT claim.')
UNAUTHENTICATED = ('Request had invalid authentication credentials. Expected OAuth 2 '
                   'access token, login cookie or other valid authentication credential. '
                   'See https://developers.google.com/identity/sign-in/web/devconsole-project.')


class GrantError(Exception):
    """A refused grant: (error, error_description)."""

    def __init__(self, error, description):
        super().__init__(description)
        self.error = error
        self.description = description


def b64url_decode(part):
    if not part or any(c in part for c in '=+/'):
        raise ValueError('not base64url')
    return base64.urlsafe_b64decode(part + '=' * (-len(part) % 4))


def read_json(path):
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class FakeGCE:
    def __init__(self, args):
        self.dir = os.path.abspath(args.dir)
        self.project = args.project
        self.net = args.net
        self.first = args.first
        self.sa_files = list(args.service_account or [])
        self.user_files = list(args.authorized_user or [])
        self.token_ttl = args.token_ttl
        self.lock = threading.Lock()
        self.tokens = {}  # access token -> expiry (time.time())
        self.issued = 0
        self.grants = {}  # grant type -> count of tokens given
        self.failures = {}  # grant type -> count of refusals
        self.base_url = None
        self.compute = None
        self.log = open(os.path.join(self.dir, 'requests.log'), 'a', buffering=1)
        self.catalog = fake_catalog.FakeCatalog(self, getattr(args, 'billing_key', None))

    # --- bookkeeping ---

    def write_log(self, method, path, status):
        with self.lock:
            self.log.write('%s %s %d\n' % (method, path, status))

    def count(self, table, kind):
        with self.lock:
            table[kind] = table.get(kind, 0) + 1

    def issue(self, kind):
        token = 'ya29.fake-' + secrets.token_urlsafe(24)
        with self.lock:
            ttl = self.token_ttl
            self.tokens[token] = time.time() + ttl
            self.issued += 1
            self.grants[kind] = self.grants.get(kind, 0) + 1
        return {'access_token': token, 'expires_in': ttl, 'token_type': 'Bearer'}

    def token_valid(self, token):
        with self.lock:
            expiry = self.tokens.get(token)
        return expiry is not None and expiry > time.time()

    # --- the token endpoint ---

    def service_accounts(self):
        """client_email -> key file contents, of the files that exist now."""
        found = {}
        for path in self.sa_files:
            key = read_json(path)
            if key and key.get('type') == 'service_account' and key.get('client_email'):
                found[key['client_email']] = key
        return found

    def check_jwt(self, assertion, url):
        parts = assertion.split('.')
        if len(parts) != 3:
            raise GrantError('invalid_grant', 'Invalid JWT: malformed')
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, UnicodeDecodeError):
            raise GrantError('invalid_grant', 'Invalid JWT: malformed') from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise GrantError('invalid_grant', 'Invalid JWT: malformed')
        if header.get('alg') != 'RS256' or header.get('typ') != 'JWT':
            raise GrantError('invalid_grant', BAD_SIGNATURE)
        key = self.service_accounts().get(claims.get('iss'))
        if key is None:
            raise GrantError('invalid_grant', 'Invalid grant: account not found')
        if header.get('kid') != key.get('private_key_id'):
            raise GrantError('invalid_grant', BAD_SIGNATURE)
        try:
            private = serialization.load_pem_private_key(
                key['private_key'].encode('ascii'), password=None)
            private.public_key().verify(signature, ('%s.%s' % (parts[0], parts[1])).encode(),
                                        padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError, TypeError, KeyError, AttributeError):
            raise GrantError('invalid_grant', BAD_SIGNATURE) from None
        if claims.get('aud') != key.get('token_uri') or claims.get('aud') != url:
            raise GrantError('invalid_grant',
                             'Invalid JWT: Failed audience check. The expected value was %s, '
                             'but the actual value was %s' % (url, claims.get('aud')))
        scopes = claims.get('scope')
        if not isinstance(scopes, str) or COMPUTE_SCOPE not in scopes.split():
            raise GrantError('invalid_scope',
                             'Invalid OAuth scope or ID token audience provided.')
        now = time.time()
        iat, exp = claims.get('iat'), claims.get('exp')
        if (not isinstance(iat, int) or not isinstance(exp, int) or abs(iat - now) > SKEW
                or exp <= now or exp - iat > MAX_LIFETIME):
            raise GrantError('invalid_grant', BAD_TIME)

    def check_refresh(self, form):
        def one(name):
            v = form.get(name)
            return v[0] if v else None
        for path in self.user_files:
            user = read_json(path)
            if (user and user.get('type') == 'authorized_user'
                    and user.get('client_id') == one('client_id')
                    and user.get('client_secret') == one('client_secret')
                    and user.get('refresh_token') == one('refresh_token')):
                return
        raise GrantError('invalid_grant', 'Bad Request')

    def handle_token(self, handler, body):
        if handler.command != 'POST':
            return 405, {'error': 'invalid_request', 'error_description': 'POST only'}
        try:
            form = urllib.parse.parse_qs(body.decode('utf-8'), strict_parsing=False)
        except UnicodeDecodeError:
            form = {}
        grant = (form.get('grant_type') or [''])[0]
        host = handler.headers.get('Host') or '127.0.0.1:%d' % handler.server.server_address[1]
        url = 'http://%s/token' % host
        try:
            if grant == JWT_BEARER:
                kind = 'jwt-bearer'
                self.check_jwt((form.get('assertion') or [''])[0], url)
            elif grant == 'refresh_token':
                kind = 'refresh_token'
                self.check_refresh(form)
            else:
                kind = 'other'
                raise GrantError('unsupported_grant_type',
                                 'Invalid grant_type: %s' % grant[:64])
        except GrantError as e:
            self.count(self.failures, kind)
            return 400, {'error': e.error, 'error_description': e.description}
        return 200, self.issue(kind)

    # --- the metadata server ---

    def handle_metadata(self, handler, path):
        if handler.headers.get('Metadata-Flavor') != 'Google':
            return 403, 'text/html', b'Missing Metadata-Flavor:Google header.\n'
        if path == '/computeMetadata/v1/instance/service-accounts/default/token':
            return 200, 'application/json', json.dumps(self.issue('metadata')).encode()
        if path == '/computeMetadata/v1/project/project-id':
            return 200, 'text/plain', self.project.encode()
        return 404, 'text/html', b'Not Found\n'

    # --- the Compute part ---

    def compute_api(self):
        """The ComputeAPI, made at first use; None while fake_compute.py is missing."""
        with self.lock:
            if self.compute is None:
                try:
                    import fake_compute
                except ModuleNotFoundError as e:
                    if e.name != 'fake_compute':
                        raise
                    return None
                self.compute = fake_compute.ComputeAPI(
                    self.dir, self.project, net=self.net, first=self.first,
                    base_url=self.base_url + '/compute/v1')
            return self.compute

    def handle_compute(self, handler, path, query, body):
        auth = handler.headers.get('Authorization') or ''
        if not auth.startswith('Bearer ') or not self.token_valid(auth[7:].strip()):
            return 401, {'error': {'code': 401, 'message': UNAUTHENTICATED,
                                   'status': 'UNAUTHENTICATED'}}
        answer = self.catalog.handle_compute(handler.command, path,
                                             urllib.parse.parse_qs(query))
        if answer is not None:
            return answer
        api = self.compute_api()
        if api is None:
            return 501, {'error': {'code': 501, 'message': 'fake_compute.py is not there',
                                   'status': 'UNIMPLEMENTED'}}
        return api.handle(handler.command, path[len('/compute/v1'):],
                          urllib.parse.parse_qs(query), body)

    # --- control ---

    def state_json(self):
        with self.lock:
            state = {'project': self.project, 'tokens_issued': self.issued,
                     'grants': dict(self.grants), 'failures': dict(self.failures),
                     'token_ttl': self.token_ttl}
        api = self.compute_api()
        if api is not None:
            status, data = api.control('GET', '/state', b'')
            if status == 200:
                state['compute'] = data
        return state

    def handle_control(self, method, path, body):
        if path.startswith('/_fake/catalog/'):
            return self.catalog.control(method, path[len('/_fake/catalog'):], body)
        if path == '/_fake/state' and method == 'GET':
            return 200, self.state_json()
        if path == '/_fake/settings' and method == 'POST':
            try:
                data = json.loads(body.decode('utf-8')) if body.strip() else {}
            except (UnicodeDecodeError, ValueError) as e:
                return 400, {'error': 'bad JSON: %s' % e}
            if not isinstance(data, dict):
                return 400, {'error': 'settings are a JSON object'}
            if 'token_ttl' in data:
                ttl = data.pop('token_ttl')
                if not isinstance(ttl, int) or ttl < 1:
                    return 400, {'error': 'token_ttl is a positive integer'}
                with self.lock:
                    self.token_ttl = ttl
            answer = {'settings': {'token_ttl': self.token_ttl}}
            if data:
                api = self.compute_api()
                if api is None:
                    return 501, {'error': 'fake_compute.py is not there'}
                status, more = api.control('POST', '/settings', json.dumps(data).encode())
                if status != 200:
                    return status, more
                answer['compute'] = more
            return 200, answer
        api = self.compute_api()
        if api is None:
            return 404, {'error': 'no such control request: %s %s' % (method, path)}
        return api.control(method, path[len('/_fake'):], body)

    def close(self):
        close = getattr(self.compute, 'close', None)
        if close:
            close()
        self.log.close()


class Handler(BaseHTTPRequestHandler):
    """One connection: routes each request to FakeGCE and logs it."""
    protocol_version = 'HTTP/1.1'
    timeout = 120  # an idle keep-alive connection is dropped after this

    def version_string(self):
        return 'FakeGCE'

    def log_message(self, format, *args):
        """requests.log is written instead, without queries."""

    def body(self):
        """The request body, or None when it has no usable Content-Length."""
        if self.headers.get('Transfer-Encoding'):
            return None
        try:
            size = int(self.headers.get('Content-Length') or 0)
        except ValueError:
            return None
        return self.rfile.read(size) if 0 < size <= MAX_BODY else (b'' if size == 0 else None)

    def answer(self, path, status, payload, ctype='application/json; charset=UTF-8'):
        if not isinstance(payload, bytes):
            # Without indent: json's C encoder. With one, json.dumps takes its pure
            # Python path, most of the fake's CPU for a list of 64 instances.
            payload = (json.dumps(payload) + '\n').encode('utf-8')
        try:
            self.send_response(status)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(payload)))
            self.end_headers()
            if self.command != 'HEAD':
                self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test)
        self.server.fake.write_log(self.command, path, status)

    def route(self):
        fake = self.server.fake
        split = urllib.parse.urlsplit(self.path)
        path = split.path
        body = self.body()
        if body is None:
            self.close_connection = True
            self.answer(path, 400, {'error': {
                'code': 400, 'status': 'INVALID_ARGUMENT',
                'message': 'A body needs a Content-Length of at most %d bytes' % MAX_BODY}})
        elif path == '/token':
            self.answer(path, *fake.handle_token(self, body))
        elif path.startswith('/computeMetadata/'):
            status, ctype, raw = fake.handle_metadata(self, path)
            self.answer(path, status, raw, ctype)
        elif path == '/compute/v1' or path.startswith('/compute/v1/'):
            self.answer(path, *fake.handle_compute(self, path, split.query, body))
        elif path.startswith(fake_catalog.BILLING_PREFIX):
            self.answer(path, *fake.catalog.handle_billing(self, path, split.query))
        elif path.startswith('/_fake/'):
            self.answer(path, *fake.handle_control(self.command, path, body))
        else:
            self.answer(path, 404, {'error': {'code': 404, 'message': 'Not Found',
                                              'status': 'NOT_FOUND'}})

    do_POST = do_GET = do_DELETE = do_PUT = do_PATCH = do_HEAD = route


def write_private(path, text, mode):
    """Write PATH whole at once (readers never see half of it), with MODE."""
    tmp = '%s.tmp.%d' % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, 'w') as f:
        f.write(text)
    os.rename(tmp, path)


def make_key(out, email, project, token_uri):
    """Write a service_account key file as the Cloud console gives one."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode('ascii')
    doc = {
        'type': 'service_account',
        'project_id': project,
        'private_key_id': secrets.token_hex(20),
        'private_key': pem,
        'client_email': email,
        'client_id': str(10 ** 20 + secrets.randbelow(9 * 10 ** 20)),
        'auth_uri': 'https://accounts.google.com/o/oauth2/auth',
        'token_uri': token_uri,
    }
    write_private(out, json.dumps(doc, indent=2) + '\n', 0o600)


def main(argv=None):
    ap = argparse.ArgumentParser(description='A fake Google Cloud endpoint for the tests.')
    ap.add_argument('--dir', help='state directory (port, pid, requests.log)')
    ap.add_argument('--port', type=int, default=0, help='port on 127.0.0.1 (0: any free one)')
    ap.add_argument('--project', default='cclfs-test')
    ap.add_argument('--service-account', action='append', metavar='KEY.json',
                    help='a known service account key file (repeatable)')
    ap.add_argument('--authorized-user', action='append', metavar='FILE.json',
                    help='a known authorized_user file (repeatable)')
    ap.add_argument('--net', default='127.0.3', help='the /24 of the test-host addresses')
    ap.add_argument('--first', type=int, default=10, help='the first host number')
    ap.add_argument('--token-ttl', type=int, default=3599, help='expires_in of tokens')
    ap.add_argument('--billing-key', help='the API key the Cloud Billing Catalog accepts')
    ap.add_argument('--make-key', metavar='OUT.json', help='write a key file and exit')
    ap.add_argument('--email', help='--make-key: the client_email')
    ap.add_argument('--token-uri', help='--make-key: the token_uri')
    args = ap.parse_args(argv)
    if args.make_key:
        if not args.email or not args.token_uri:
            ap.error('--make-key needs --email and --token-uri')
        make_key(args.make_key, args.email, args.project, args.token_uri)
        return 0
    if not args.dir:
        ap.error('--dir is required')
    if args.token_ttl < 1:
        ap.error('--token-ttl must be positive')
    return serve(args)


def serve(args):
    """Answer requests until SIGTERM or SIGINT; DIR/port and DIR/pid while listening."""
    os.makedirs(args.dir, exist_ok=True)
    marks = [os.path.join(args.dir, name) for name in ('port', 'pid')]
    for mark in marks:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(mark)
    # The signals are taken with sigwait by this thread; the server threads
    # inherit the mask, so none of them is interrupted by one.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    fake = FakeGCE(args)
    # Python's default backlog is 5: a client making 64 calls at once would
    # wait for TCP's retransmissions, as no real endpoint makes it do.
    ThreadingHTTPServer.request_queue_size = 128
    httpd = ThreadingHTTPServer(('127.0.0.1', args.port), Handler)
    httpd.daemon_threads = True
    httpd.fake = fake
    port = httpd.server_address[1]
    fake.base_url = 'http://127.0.0.1:%d' % port
    threading.Thread(target=httpd.serve_forever, kwargs={'poll_interval': 0.2},
                     daemon=True).start()
    write_private(marks[1], '%d\n' % os.getpid(), 0o644)
    write_private(marks[0], '%d\n' % port, 0o644)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    httpd.shutdown()
    httpd.server_close()
    fake.close()
    for mark in marks:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(mark)
    return 0


if __name__ == '__main__':
    sys.exit(main())
