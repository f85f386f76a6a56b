#!/usr/bin/python3
# tests/fakegce/test_fake_gce.py: the fake Google Cloud endpoint (fake_gce.py) against JWTs
# signed here with python3-cryptography: good and bad assertions, the refresh-token flow,
# the metadata server and the bearer check of the Compute API. Exits non-zero on failure.
"""Run: python3 tests/fakegce/test_fake_gce.py [-v]"""

import base64
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

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, 'fake_gce.py')
EMAIL = 'cclfs@cclfs-test.iam.gserviceaccount.com'
SCOPE = 'https://www.googleapis.com/auth/compute'
JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
USER = {'type': 'authorized_user', 'client_id': '764086051850-fake.apps.googleusercontent.com',
        'client_secret': 'd-FL95Q19q7MQmFpd7hHD0Ty', 'refresh_token': '1//fake-refresh-token'}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode('ascii')


def sign_jwt(key, header=None, claims=None, signer=None):
    """A JWT for KEY (a key file's contents), with header and claim fields overridden."""
    now = int(time.time())
    h = {'alg': 'RS256', 'typ': 'JWT', 'kid': key['private_key_id']}
    c = {'iss': key['client_email'], 'scope': SCOPE, 'aud': key['token_uri'],
         'iat': now, 'exp': now + 3600}
    h.update(header or {})
    c.update(claims or {})
    c = {k: v for k, v in c.items() if v is not None}
    signing = b64url(json.dumps(h).encode()) + '.' + b64url(json.dumps(c).encode())
    private = serialization.load_pem_private_key(
        (signer or key)['private_key'].encode('ascii'), password=None)
    sig = private.sign(signing.encode('ascii'), padding.PKCS1v15(), hashes.SHA256())
    return signing + '.' + b64url(sig)


class FakeGCETest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='fakegce-test.')
        cls.dir = os.path.join(cls.tmp, 'fake')
        cls.key_path = os.path.join(cls.tmp, 'sa.json')
        cls.user_path = os.path.join(cls.tmp, 'user.json')
        with open(cls.user_path, 'w') as f:
            json.dump(USER, f)
        cls.log = open(os.path.join(cls.tmp, 'fake.log'), 'w')
        # The key file is written once the port is known: the fake reads it lazily.
        cls.proc = subprocess.Popen(
            [sys.executable, FAKE, '--dir', cls.dir, '--project', 'cclfs-test',
             '--service-account', cls.key_path, '--authorized-user', cls.user_path],
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
        cls.key = cls.make_key(cls.key_path, EMAIL)
        # A key the fake does not know (same account name, another key pair).
        cls.other = cls.make_key(os.path.join(cls.tmp, 'other.json'), EMAIL)

    @classmethod
    def make_key(cls, path, email):
        subprocess.run([sys.executable, FAKE, '--make-key', path, '--email', email,
                        '--project', 'cclfs-test', '--token-uri', cls.url + '/token'],
                       check=True)
        with open(path) as f:
            return json.load(f)

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            try:
                cls.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def request(self, method, path, body=None, headers=None):
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.headers.get('Content-Type'), r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get('Content-Type'), e.read()

    def token(self, form):
        status, _, body = self.request(
            'POST', '/token', urllib.parse.urlencode(form).encode(),
            {'Content-Type': 'application/x-www-form-urlencoded'})
        return status, json.loads(body)

    def jwt_grant(self, assertion):
        return self.token({'grant_type': JWT_BEARER, 'assertion': assertion})

    def state(self):
        status, _, body = self.request('GET', '/_fake/state')
        self.assertEqual(status, 200)
        return json.loads(body)

    def test_key_file(self):
        self.assertEqual(self.key['type'], 'service_account')
        self.assertRegex(self.key['private_key_id'], r'^[0-9a-f]{40}$')
        self.assertTrue(self.key['private_key'].startswith('-----BEGIN PRIVATE KEY-----'))
        self.assertEqual(self.key['token_uri'], self.url + '/token')
        self.assertEqual(os.stat(self.key_path).st_mode & 0o777, 0o600)

    def test_good_assertion(self):
        before = self.state()['grants'].get('jwt-bearer', 0)
        status, tok = self.jwt_grant(sign_jwt(self.key))
        self.assertEqual(status, 200, tok)
        self.assertTrue(tok['access_token'].startswith('ya29.fake-'))
        self.assertEqual(tok['token_type'], 'Bearer')
        self.assertEqual(tok['expires_in'], 3599)
        # Several scopes, space-separated, are fine.
        status, _ = self.jwt_grant(sign_jwt(
            self.key, claims={'scope': 'https://www.googleapis.com/auth/cloud-platform ' + SCOPE}))
        self.assertEqual(status, 200)
        self.assertEqual(self.state()['grants']['jwt-bearer'], before + 2)

    def bad(self, assertion, error='invalid_grant', description=None):
        status, answer = self.jwt_grant(assertion)
        self.assertEqual(status, 400, answer)
        self.assertEqual(answer['error'], error)
        if description:
            self.assertIn(description, answer['error_description'])

    def test_bad_assertions(self):
        now = int(time.time())
        self.bad(sign_jwt(self.key, signer=self.other), description='Invalid JWT Signature.')
        self.bad(sign_jwt(self.key, header={'kid': self.other['private_key_id']}),
                 description='Invalid JWT Signature.')
        self.bad(sign_jwt(self.key, header={'alg': 'RS512'}))
        self.bad(sign_jwt(self.key, claims={'exp': now + 7200}),
                 description='short-lived token (60 minutes)')
        self.bad(sign_jwt(self.key, claims={'iat': now - 3000, 'exp': now + 500}),
                 description='reasonable timeframe')
        self.bad(sign_jwt(self.key, claims={'iat': now - 3700, 'exp': now - 100}),
                 description='short-lived')
        self.bad(sign_jwt(self.key, claims={'aud': 'https://oauth2.googleapis.com/token'}),
                 description='audience')
        self.bad(sign_jwt(self.key, claims={'scope': None}), error='invalid_scope')
        self.bad(sign_jwt(self.key, claims={
            'scope': 'https://www.googleapis.com/auth/devstorage.read_only'}),
            error='invalid_scope')
        self.bad(sign_jwt(self.key, claims={'iss': 'nobody@cclfs-test.iam.gserviceaccount.com'}))
        self.bad('not-a-jwt')
        self.bad(sign_jwt(self.key)[:-4] + 'AAAA', description='Invalid JWT Signature.')
        status, answer = self.token({'grant_type': 'password'})
        self.assertEqual((status, answer['error']), (400, 'unsupported_grant_type'))
        self.assertGreaterEqual(self.state()['failures']['jwt-bearer'], 12)

    def test_refresh_token(self):
        status, tok = self.token(dict(USER, grant_type='refresh_token'))
        self.assertEqual(status, 200, tok)
        self.assertTrue(tok['access_token'].startswith('ya29.fake-'))
        status, answer = self.token(dict(USER, grant_type='refresh_token',
                                         refresh_token='1//revoked'))
        self.assertEqual((status, answer), (400, {'error': 'invalid_grant',
                                                  'error_description': 'Bad Request'}))
        self.assertGreaterEqual(self.state()['grants']['refresh_token'], 1)

    def test_metadata(self):
        path = '/computeMetadata/v1/instance/service-accounts/default/token'
        status, _, _ = self.request('GET', path)
        self.assertEqual(status, 403)
        status, _, body = self.request('GET', path, headers={'Metadata-Flavor': 'Google'})
        self.assertEqual(status, 200)
        self.assertTrue(json.loads(body)['access_token'].startswith('ya29.fake-'))
        status, ctype, body = self.request('GET', '/computeMetadata/v1/project/project-id',
                                           headers={'Metadata-Flavor': 'Google'})
        self.assertEqual((status, body), (200, b'cclfs-test'))
        self.assertTrue(ctype.startswith('text/plain'))
        self.assertEqual(self.request('GET', '/computeMetadata/v1/project/project-id')[0], 403)

    def test_compute_needs_a_token(self):
        path = '/compute/v1/projects/cclfs-test/zones/us-central1-a/instances'
        for headers in ({}, {'Authorization': 'Bearer ya29.fake-never-issued'}):
            status, _, body = self.request('GET', path, headers=headers)
            self.assertEqual(status, 401)
            self.assertEqual(json.loads(body)['error']['status'], 'UNAUTHENTICATED')
        _, tok = self.jwt_grant(sign_jwt(self.key))
        status, _, _ = self.request('GET', path, headers={
            'Authorization': 'Bearer ' + tok['access_token']})
        self.assertNotEqual(status, 401)  # 501 until the Compute part exists

    def test_token_ttl_setting(self):
        status, _, body = self.request('POST', '/_fake/settings',
                                       json.dumps({'token_ttl': 200}).encode())
        self.assertEqual(status, 200, body)
        try:
            self.assertEqual(self.jwt_grant(sign_jwt(self.key))[1]['expires_in'], 200)
        finally:
            self.request('POST', '/_fake/settings', json.dumps({'token_ttl': 3599}).encode())
        self.assertEqual(self.request('POST', '/_fake/settings', b'{"token_ttl": 0}')[0], 400)

    def test_zz_log_has_no_secret(self):
        _, tok = self.jwt_grant(sign_jwt(self.key))
        with open(os.path.join(self.dir, 'requests.log')) as f:
            log = f.read()
        self.assertIn('POST /token 200\n', log)
        self.assertIn('POST /token 400\n', log)
        self.assertNotIn(tok['access_token'], log)
        self.assertNotIn('ya29', log)
        self.assertNotIn('eyJ', log)  # no JWT part


if __name__ == '__main__':
    unittest.main()
