"""The login wave of `anyplay-load` (scenario `login`) as a Locust file, for the peer comparison.

Each user is one player and logs in once, as anyplay-load's players do: POST /v1/auth/email,
the code from the node's mail log, POST /v1/auth/code, POST /v1/auth/signup, the event
WebSocket until its welcome (`e2e_login`, from the first request to the welcome), then
GET /v1/friends. It then stays connected and reads its socket (pongs to the node's pings)
until the run ends. The wave's rate is Locust's spawn rate: `--users 3000 --spawn-rate 150`.

    ANYPLAY_MAIL_LOG=/path/mail.log locust -f deploy/peers/locustfile.py --headless \
        --host http://127.0.0.1:8080 --users 3000 --spawn-rate 150 --run-time 30s

Run it with Debian's Python (`/usr/bin/python3`, packages python3-locust and
python3-websocket); `deploy/peers.sh` installs them and runs both generators.
"""

import itertools
import json
import os
import time

import gevent
import websocket
from locust import FastHttpUser, constant, events, task

MAIL_LOG = os.environ.get("ANYPLAY_MAIL_LOG", "mail.log")
# As anyplay-load: the log is read at most every 2 ms while someone waits, 10 s at most.
POLL_S = 0.002
CODE_WAIT_S = 10.0
RUN_TAG = os.environ.get("ANYPLAY_PEER_TAG", "locust")

numbers = itertools.count()


class MailLog:
    """The codes appended to the node's mail log since the run started, shared by every user."""

    def __init__(self, path):
        self.path = path
        self.offset = os.path.getsize(path) if os.path.exists(path) else 0
        self.partial = b""
        self.codes = {}
        self.last_read = 0.0

    def _read(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            fields = line.decode(errors="replace").split()
            if len(fields) == 3 and fields[1].startswith("to=") and fields[2].startswith("code="):
                self.codes[fields[1][3:]] = fields[2][5:]

    def code_for(self, email):
        deadline = time.monotonic() + CODE_WAIT_S
        while True:
            code = self.codes.pop(email, None)
            if code is not None:
                return code
            now = time.monotonic()
            if now - self.last_read >= POLL_S:
                self.last_read = now
                self._read()
                code = self.codes.pop(email, None)
                if code is not None:
                    return code
            if now >= deadline:
                raise TimeoutError(f"no code for {email} in {CODE_WAIT_S} s")
            gevent.sleep(POLL_S)


mail = None


@events.test_start.add_listener
def open_mail_log(environment, **_):
    global mail
    mail = MailLog(MAIL_LOG)


def fire(environment, name, started, error=None):
    environment.events.request.fire(
        request_type="LOGIN", name=name, response_time=(time.perf_counter() - started) * 1000.0,
        response_length=0, exception=error, context={})


class Player(FastHttpUser):
    # One login per user, then idle: the only task waits.
    wait_time = constant(3600)

    def on_start(self):
        self.ws = None
        self.reader = None
        n = next(numbers)
        email = f"{RUN_TAG}.{n}@load.anyplay.test"
        started = time.perf_counter()
        try:
            self.log_in(email, f"p{RUN_TAG}_{n}", started)
        except Exception as e:  # every failure counts as a failed login, as in anyplay-load
            fire(self.environment, "e2e_login", started, e)

    def post(self, path, name, body, expect, token=None):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        with self.client.post(path, json=body, name=name, headers=headers,
                              catch_response=True) as resp:
            if resp.status_code != expect:
                resp.failure(f"status {resp.status_code}")
                raise RuntimeError(f"{name}: {resp.status_code}")
            return json.loads(resp.content)

    def log_in(self, email, handle, started):
        challenge = self.post("/v1/auth/email", "auth_email", {"email": email}, 202)
        code = mail.code_for(email)
        outcome = self.post("/v1/auth/code", "auth_code",
                            {"challenge_id": challenge["challenge_id"], "code": code}, 200)
        tokens = self.post("/v1/auth/signup", "auth_signup",
                           {"signup_token": outcome["signup_token"], "handle": handle}, 201)
        token = tokens["access_token"]
        opened = time.perf_counter()
        ws_url = self.host.replace("http://", "ws://", 1) + "/v1/events"
        self.ws = websocket.create_connection(
            ws_url, header=[f"Authorization: Bearer {token}"], timeout=10)
        fire(self.environment, "ws_connect", opened)
        while True:
            message = json.loads(self.ws.recv())
            if message.get("type") == "welcome":
                break
        fire(self.environment, "e2e_login", started)
        with self.client.get("/v1/friends", name="friends_list",
                             headers={"Authorization": f"Bearer {token}"},
                             catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"status {resp.status_code}")
        self.ws.settimeout(None)
        self.reader = gevent.spawn(self.read_events)

    def read_events(self):
        # recv() answers the node's pings; events are read and dropped.
        try:
            while True:
                self.ws.recv()
        except Exception:
            pass

    @task
    def idle(self):
        pass

    def on_stop(self):
        if self.reader is not None:
            self.reader.kill(block=False)
        if self.ws is not None:
            self.ws.close()
