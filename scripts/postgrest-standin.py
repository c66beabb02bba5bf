#!/usr/bin/python3
"""A PostgREST stand-in for the tests: NOT PostgREST, a small HTTP server that answers the requests
the outbox's PostgREST transport makes the way PostgREST v14 answers them, over real PostgreSQL.

PostgREST itself cannot be installed here (no Debian package; it is a Haskell program). This server
mirrors what shared/research/postgrest.md §5 lists: the SQL PostgREST generates (so PostgreSQL
raises the same SQLSTATEs), mapSQLtoHTTP's status table, HS256 JWTs with PGRST301/303, the role
switch and request.jwt.claims / request.headers, Prefer, Content-Range, Retry-After: 0 on every 503,
and the four settings that keep it fast (TCP_NODELAY, HTTP/1.1 keep-alive, threads, exact
Content-Length). Fidelity gaps (see the end of this file's docstring):

- no schema-cache staleness (it reads the catalog on every request: PGRST204/205 are never stale);
- no embedding, select=, ordering, ranges, CSV or OpenAPI; filters are `eq.` only;
- message texts are PostgREST's for the codes it raises itself, PostgreSQL's otherwise;
- one version (v14): expired tokens are PGRST303, unknown tables PGRST205;
- RPC resolves a function by name and argument names, calls it with named arguments, and shapes
  void as 204, anything else as its JSON value; a STABLE function is not run read-only (no 25006);
- a pool of 10 database connections, as PostgREST's default db-pool, taken per request: idle keep-alive
  clients hold none; a request that waits 10 s for one gets 504 PGRST003 (db-pool-acquisition-timeout);
- as a server: a request whose head or body does not come within 10 s has its connection closed; a
  Content-Length that is not a number, negative, or past 16 MiB gets 400 (413 past the limit), as
  warp answers; JSON nested past what the parser takes is 400 PGRST102; HEAD answers as GET without
  a body, OPTIONS with 200 and Allow; any other method 405 PGRST117; anything unforeseen 500 PGRSTX00,
  always an answer in JSON, never a traceback without one.

Test-only control (not PostgREST), on the same port, with no authentication (loopback only):
  POST /_standin/faults  {"answers": [{"status": 503, "code": "PGRST001", "retryAfter": "0"},
                                      {"drop": true}, {"latency": 0.2}, ...]}
      the next requests to the API, one entry each: answer with that status (and code, Retry-After,
      body) without touching the database; {"drop": true}: run the request, commit, then close the
      connection without answering (the lost acknowledgement); {"latency": s}: wait, then answer;
      {}: answer as usual (lets the requests before a fault through); {"strip": "Content-Range"}: run
      the request, commit, answer without that header; {"status": 200, "raw": "<html>…</html>",
      "contentType": "text/html"}: answer that text (a middlebox's page) without touching the database.
  GET /_standin/requests   every API request received: method, path, headers (no Authorization)
  DELETE /_standin/requests  forgets them

Run by Debian's own python3 (the interpreter python3-psycopg is built for):
  STANDIN_JWT_SECRET=S [STANDIN_APIKEY=K] /usr/bin/python3 scripts/postgrest-standin.py --port 0
  --database URL [--prefix /rest/v1] [--port-file F]; it prints "listening on PORT" once ready. The
  secrets come from the environment, never the command line (other users see arguments in `ps`).
"""
import argparse
import base64
import hashlib
import hmac
import http.server
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.parse

import psycopg
from psycopg import sql

ANON_ROLE = "anon"
SCHEMAS = ["public"]


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.answers = []
        self.requests = []

    def next(self):
        with self.lock:
            return self.answers.pop(0) if self.answers else None

    def record(self, entry):
        with self.lock:
            self.requests.append(entry)


FAULTS = Faults()
CONFIG = {}


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_jwt(token, secret):
    """The claims of an HS256 token, or (status, code, message) for PostgREST's JWT errors."""
    parts = token.split(".")
    if len(parts) != 3:
        return None, (401, "PGRST301", "Expected 3 parts in JWT; got %d" % len(parts))
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except Exception:
        return None, (401, "PGRST301", "JWT cryptographic operation failed")
    if header.get("alg") != "HS256":
        return None, (401, "PGRST301", "Wrong or unsupported encoding algorithm")
    expected = hmac.new(secret.encode(), (parts[0] + "." + parts[1]).encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        return None, (401, "PGRST301", "JWT cryptographic operation failed")
    now = time.time()
    if isinstance(claims.get("exp"), (int, float)) and now - 30 > claims["exp"]:
        return None, (401, "PGRST303", "JWT expired")
    if isinstance(claims.get("nbf"), (int, float)) and now + 30 < claims["nbf"]:
        return None, (401, "PGRST303", "JWT not yet valid")
    return claims, None


def map_sql_to_http(sqlstate, message, authed):
    """PostgREST's mapSQLtoHTTP (Error.hs), first match wins."""
    s = sqlstate or ""
    if s == "21000":
        return 400 if message.endswith("requires a WHERE clause") else 500
    if s == "22023" and re.match(r'role ".*" does not exist', message):
        return 401
    if s == "57P01":
        return 503
    if s == "42883":
        return 406 if message.startswith("function xmlagg(") else 404
    if s.startswith("PT") and s[2:].isdigit():
        return int(s[2:])
    if s.startswith("08"):
        return 503
    if s.startswith("09"):
        return 500
    if s.startswith("0L") or s.startswith("0P"):
        return 403
    if s in ("23503", "23505"):
        return 409
    if s == "25006":
        return 405
    if s.startswith("25") or s.startswith("2D") or s.startswith("38") or s.startswith("39") or s.startswith("3B"):
        return 500
    if s.startswith("28"):
        return 403
    if s.startswith("40"):
        return 500
    if s == "53400":
        return 500
    if s.startswith("53"):
        return 503
    if s[:2] in ("54", "55", "57", "58", "F0", "HV", "XX"):
        return 500
    if s == "P0001":
        return 400
    if s.startswith("P0"):
        return 500
    if s == "42P01":
        return 404
    if s == "42P17":
        return 500
    if s == "42501":
        return 403 if authed else 401
    return 400


class Refused(Exception):
    def __init__(self, status, code, message, details=None, hint=None, headers=None):
        super().__init__(message)
        self.status, self.code, self.message, self.details, self.hint = status, code, message, details, hint
        self.headers = headers or {}


MAX_BODY = 16 << 20


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    # A head or body that does not come within this many seconds: the connection is closed (a slow
    # client never holds a thread for ever).
    timeout = 10

    def log_message(self, *args):
        pass

    def send_error(self, code, message=None, explain=None):
        """http.server's own refusals (a malformed request line, an unknown method) in PostgREST's JSON."""
        self.close_connection = True
        try:
            self.answer(code, {"code": None, "details": None, "hint": None, "message": message or "Bad Request"},
                        {"Connection": "close"})
        except OSError:
            pass

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (socket.timeout, TimeoutError, ConnectionError):
            self.close_connection = True

    # -- plumbing -------------------------------------------------------------------------------

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raise Refused(411, None, "chunked request bodies are not supported by the stand-in")
        text = (self.headers.get("Content-Length") or "0").strip()
        if not text.isdigit():
            self.close_connection = True
            raise Refused(400, None, "Bad Request: invalid Content-Length")
        length = int(text)
        if length > MAX_BODY:
            self.close_connection = True
            raise Refused(413, None, "Payload Too Large")
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            self.close_connection = True
            raise ConnectionResetError("the body ended early")
        return body

    def answer(self, status, body=None, headers=None):
        payload = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        if getattr(self, "head_only", False):
            headers = dict(headers or {})
            headers["Content-Length"] = str(len(payload))
            payload = b""
        headers = dict(headers or {})
        self.send_response(status)
        content_type = headers.pop("Content-Type", "application/json; charset=utf-8")
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 204:
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if status != 204 and payload:
            self.wfile.write(payload)

    def error(self, refused):
        headers = dict(refused.headers)
        if refused.code:
            headers["Proxy-Status"] = "PostgREST; error=%s" % refused.code
        if refused.status == 503:
            headers["Retry-After"] = "0"
        if refused.status == 401:
            headers.setdefault("WWW-Authenticate", "Bearer")
        body = {"message": refused.message}
        if refused.code is not None:
            body = {"code": refused.code, "details": refused.details, "hint": refused.hint, "message": refused.message}
        self.answer(refused.status, body, headers)

    # -- routing --------------------------------------------------------------------------------

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_PATCH(self):
        self.route("PATCH")

    def do_DELETE(self):
        self.route("DELETE")

    def do_PUT(self):
        self.route("PUT")

    def do_HEAD(self):
        self.head_only = True
        self.route("GET")

    def do_OPTIONS(self):
        try:
            self.read_body()
        except Refused as refused:
            return self.error(refused)
        self.answer(200, b"", {"Allow": "OPTIONS,GET,HEAD,POST,PUT,PATCH,DELETE"})

    def route(self, method):
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        try:
            body = self.read_body()
            if path.startswith("/_standin/"):
                return self.control(method, path, body)
            prefix = CONFIG.get("prefix") or ""
            if prefix and path.startswith(prefix):
                path = path[len(prefix):]
            FAULTS.record({"method": method, "path": self.path, "body": body.decode("utf-8", "replace"),
                           "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() != "authorization"}})
            fault = FAULTS.next()
            if fault and "latency" in fault:
                time.sleep(float(fault["latency"]))
                fault = None
            if fault and "status" in fault:
                headers = {}
                if fault.get("retryAfter") is not None:
                    headers["Retry-After"] = str(fault["retryAfter"])
                if fault["status"] == 503 and "Retry-After" not in headers:
                    headers["Retry-After"] = "0"
                if "raw" in fault:
                    headers["Content-Type"] = fault.get("contentType", "text/html")
                    return self.answer(fault["status"], fault["raw"].encode(), headers)
                body_out = fault.get("body", {"code": fault.get("code"), "details": None, "hint": None,
                                              "message": fault.get("message", "stand-in fault")})
                return self.answer(fault["status"], body_out, headers)
            self.api(method, path, urllib.parse.parse_qsl(url.query, keep_blank_values=True), body, fault or {})
        except Refused as refused:
            self.error(refused)
        except (BrokenPipeError, ConnectionResetError, socket.timeout, TimeoutError):
            self.close_connection = True
        except RecursionError:
            self.error(Refused(400, "PGRST102", "Empty or invalid json"))
        except Exception as error:  # never a traceback without an answer
            self.close_connection = True
            self.error(Refused(500, "PGRSTX00", "stand-in internal error: %s" % type(error).__name__))

    def control(self, method, path, body):
        if path == "/_standin/faults" and method == "POST":
            with FAULTS.lock:
                FAULTS.answers.extend(json.loads(body or b"{}").get("answers", []))
            return self.answer(204)
        if path == "/_standin/requests" and method == "GET":
            with FAULTS.lock:
                return self.answer(200, FAULTS.requests)
        if path == "/_standin/requests" and method == "DELETE":
            with FAULTS.lock:
                FAULTS.requests.clear()
            return self.answer(204)
        raise Refused(404, None, "no such control")

    # -- the API --------------------------------------------------------------------------------

    def claims(self):
        apikey = CONFIG.get("apikey")
        if apikey is not None:
            given = self.headers.get("apikey")
            if given is None:
                raise Refused(401, None, "No API key found in request", hint="No `apikey` request header or url param was found.")
            if given != apikey:
                raise Refused(401, None, "Invalid API key", hint="Double check your Supabase `anon` or `service_role` API key.")
        auth = self.headers.get("Authorization")
        if auth is None:
            return {"role": ANON_ROLE}
        if not auth.lower().startswith("bearer "):
            raise Refused(401, "PGRST301", "Expected 3 parts in JWT; got 1")
        claims, problem = verify_jwt(auth[7:].strip(), CONFIG["secret"])
        if problem:
            status, code, message = problem
            raise Refused(status, code, message, headers={
                "WWW-Authenticate": 'Bearer error="invalid_token", error_description="%s"' % message})
        return claims

    def schema(self, method):
        name = self.headers.get("Content-Profile" if method != "GET" else "Accept-Profile")
        if name is None:
            return SCHEMAS[0]
        if name not in SCHEMAS:
            raise Refused(406, "PGRST106", "Invalid schema: %s" % name,
                          hint="Only the following schemas are exposed: %s" % ", ".join(SCHEMAS))
        return name

    def api(self, method, path, query, body, fault):
        claims = self.claims()
        schema = self.schema(method)
        prefer = parse_prefer(self.headers.get_all("Prefer") or [])
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "rpc":
            if method != "POST":
                raise Refused(405, "PGRST101", "Only GET and POST verbs are allowed for functions")
            return self.run(claims, lambda cur: self.rpc(cur, schema, parts[1], body), fault)
        if len(parts) != 1:
            raise Refused(404, "PGRST125", "Invalid path specified in request URL")
        table = parts[0]
        handlers = {"GET": self.select, "POST": self.insert, "PATCH": self.update, "DELETE": self.delete}
        if method not in handlers:
            raise Refused(405, "PGRST117", "Unsupported HTTP method: %s" % method)
        return self.run(claims, lambda cur: handlers[method](cur, schema, table, query, body, prefer), fault)

    def run(self, claims, work, fault):
        """One transaction, as PostgREST runs a request: the role and claims set, then the work."""
        role = claims.get("role") or ANON_ROLE
        authed = role != ANON_ROLE
        conn = None
        try:
            conn = POOL.acquire()
            with conn.transaction():
                with conn.cursor() as cur:
                    headers = {k.lower(): v for k, v in self.headers.items() if k.lower() != "cookie"}
                    cur.execute("select set_config('request.jwt.claims', %s, true), set_config('request.headers', %s, true),"
                                " set_config('request.method', %s, true)",
                                (json.dumps(claims), json.dumps(headers), self.command))
                    cur.execute(sql.SQL("set local role {}").format(sql.Identifier(role)))
                    status, out, out_headers = work(cur)
        except psycopg.OperationalError:
            POOL.discard(conn)
            conn = None
            raise Refused(503, "PGRST000", "Database connection error. Retrying the connection.")
        except psycopg.Error as error:
            diag = error.diag
            code = diag.sqlstate or "XX000"
            message = diag.message_primary or str(error)
            raise Refused(map_sql_to_http(code, message, authed), code, message, diag.message_detail, diag.message_hint)
        finally:
            POOL.release(conn)
        if fault.get("strip"):
            out_headers = {k: v for k, v in (out_headers or {}).items() if k.lower() != fault["strip"].lower()}
        if fault.get("drop"):
            # Committed; the acknowledgement is lost: close without answering.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.answer(status, out, out_headers)

    # -- tables ---------------------------------------------------------------------------------

    def columns(self, cur, schema, table):
        cur.execute("select a.attname, format_type(a.atttypid, a.atttypmod) from pg_attribute a"
                    " join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace"
                    " where n.nspname = %s and c.relname = %s and a.attnum > 0 and not a.attisdropped"
                    " and c.relkind in ('r', 'v', 'p') order by a.attnum", (schema, table))
        found = cur.fetchall()
        if not found:
            raise Refused(404, "PGRST205", "Could not find the table '%s.%s' in the schema cache" % (schema, table))
        return dict(found)

    def primary_key(self, cur, schema, table):
        cur.execute("select a.attname from pg_index i join pg_attribute a on a.attrelid = i.indrelid"
                    " and a.attnum = any(i.indkey) where i.indrelid = %s::regclass and i.indisprimary",
                    ("%s.%s" % (schema, table),))
        return [row[0] for row in cur.fetchall()]

    def where(self, table, query, types):
        """The `where` of the request's `col=eq.value` filters (empty without any)."""
        clauses = []
        for name, value in query:
            if name in ("select", "columns", "on_conflict", "order", "limit", "offset"):
                continue
            if name not in types:
                raise Refused(400, "42703", "column %s.%s does not exist" % (table, name))
            if not value.startswith("eq."):
                raise Refused(400, "PGRST100", "\"failed to parse filter (%s)\" (line 1, column 1)" % value)
            clauses.append(sql.SQL("{} = {}::{}").format(sql.Identifier(name), sql.Literal(value[3:]), sql.SQL(types[name])))
        return sql.SQL(" where ") + sql.SQL(" and ").join(clauses) if clauses else sql.SQL("")

    @staticmethod
    def known_columns(names, types, table):
        """PGRST204 for a payload key that is not a column."""
        for name in names:
            if name not in types:
                raise Refused(400, "PGRST204", "Could not find the '%s' column of '%s' in the schema cache" % (name, table))

    def select(self, cur, schema, table, query, body, prefer):
        types = self.columns(cur, schema, table)
        where = self.where(table, query, types)
        cur.execute(sql.SQL("select coalesce(json_agg(t), '[]') from (select * from {}.{}{}) t").format(
            sql.Identifier(schema), sql.Identifier(table), where))
        return 200, cur.fetchone()[0], {"Content-Range": "*/*"}

    def payload(self, body):
        try:
            value = json.loads(body) if body else None
        except ValueError:
            value = None
        if isinstance(value, dict):
            return [value]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            keys = set(value[0])
            if any(set(v) != keys for v in value):
                raise Refused(400, "PGRST102", "All object keys must match")
            return value
        raise Refused(400, "PGRST102", "Empty or invalid json")

    def insert(self, cur, schema, table, query, body, prefer):
        types = self.columns(cur, schema, table)
        rows = self.payload(body)
        names = list(rows[0])
        self.known_columns(names, types, table)
        resolution = prefer.get("resolution")
        conflict = sql.SQL("")
        if resolution in ("merge-duplicates", "ignore-duplicates"):
            target = dict(query).get("on_conflict")
            keys = target.split(",") if target else self.primary_key(cur, schema, table)
            if resolution == "ignore-duplicates":
                conflict = sql.SQL(" on conflict ({}) do nothing").format(sql.SQL(", ").join(map(sql.Identifier, keys)))
            else:
                updates = [n for n in names if n not in keys] or keys[:1]
                conflict = sql.SQL(" on conflict ({}) do update set {}").format(
                    sql.SQL(", ").join(map(sql.Identifier, keys)),
                    sql.SQL(", ").join(sql.SQL("{0} = excluded.{0}").format(sql.Identifier(n)) for n in updates))
        # PostgREST's shape: json_to_recordset with the columns' own types, so bad values raise
        # the same SQLSTATEs (22P02, 22001, …) as PostgreSQL does for PostgREST.
        record = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(types[n])) for n in names)
        statement = sql.SQL(
            "with pgrst_source as (insert into {}.{} ({}) select {} from json_to_recordset(%s::json) as _({}){}"
            " returning (xmax = 0) as inserted) select count(*), coalesce(bool_or(inserted), false) from pgrst_source").format(
            sql.Identifier(schema), sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join(map(sql.Identifier, names)), record, conflict)
        cur.execute(statement, (json.dumps(rows),))
        count, inserted = cur.fetchone()
        # merge-duplicates: 201 when a row was inserted, 200 when every row only updated.
        status = 200 if resolution == "merge-duplicates" and not inserted else 201
        return status, None, {"Content-Range": "*/%d" % count if prefer.get("count") == "exact" else "*/*"}

    def update(self, cur, schema, table, query, body, prefer):
        types = self.columns(cur, schema, table)
        rows = self.payload(body)
        if len(rows) != 1:
            raise Refused(400, "PGRST102", "Empty or invalid json")
        names = list(rows[0])
        self.known_columns(names, types, table)
        where = self.where(table, query, types)
        if not names:
            return 204, None, {"Content-Range": "*/*"}
        record = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(types[n])) for n in names)
        statement = sql.SQL("with pgrst_source as (update {}.{} set {} from (select * from json_to_record(%s::json) as _({})) b{}"
                            " returning 1) select count(*) from pgrst_source").format(
            sql.Identifier(schema), sql.Identifier(table),
            sql.SQL(", ").join(sql.SQL("{0} = b.{0}").format(sql.Identifier(n)) for n in names), record, where)
        cur.execute(statement, (json.dumps(rows[0]),))
        return 204, None, {"Content-Range": content_range(cur.fetchone()[0], prefer)}

    def delete(self, cur, schema, table, query, body, prefer):
        types = self.columns(cur, schema, table)
        where = self.where(table, query, types)
        cur.execute(sql.SQL("with pgrst_source as (delete from {}.{}{} returning 1) select count(*) from pgrst_source").format(
            sql.Identifier(schema), sql.Identifier(table), where))
        count = cur.fetchone()[0]
        return 204, None, {"Content-Range": ("*/%d" % count) if prefer.get("count") == "exact" else "*/*"}

    def rpc(self, cur, schema, name, body):
        try:
            arguments = json.loads(body) if body else {}
        except ValueError:
            raise Refused(400, "PGRST102", "Empty or invalid json")
        if not isinstance(arguments, dict):
            raise Refused(400, "PGRST102", "Empty or invalid json")
        cur.execute("select p.oid, coalesce(p.proargnames, '{}'), p.prorettype = 'void'::regtype, p.provolatile,"
                    " p.pronargdefaults, p.pronargs from pg_proc p join pg_namespace n on n.oid = p.pronamespace"
                    " where n.nspname = %s and p.proname = %s", (schema, name))
        for oid, argnames, returns_void, volatile, defaults, count in cur.fetchall():
            required = set(argnames[:count - defaults])
            if required <= set(arguments) <= set(argnames[:count]):
                break
        else:
            raise Refused(404, "PGRST202", "Could not find the function %s.%s(%s) in the schema cache"
                          % (schema, name, ", ".join(sorted(arguments))))
        call = sql.SQL("select to_json({}.{}({}))").format(
            sql.Identifier(schema), sql.Identifier(name),
            sql.SQL(", ").join(sql.SQL("{} => %s").format(sql.Identifier(k)) for k in arguments))
        cur.execute(call, [json.dumps(v) if isinstance(v, (dict, list)) else v for v in arguments.values()])
        value = cur.fetchone()[0]
        # A function's NULL is the JSON `null` (PostgREST answers it so), not an empty body.
        return (204, None, {}) if returns_void else (200, b"null" if value is None else value, {})


class Pool:
    """A bounded pool of database connections, taken for one request (PostgREST's db-pool, 10)."""

    def __init__(self, size=10, wait=10.0):
        self.size, self.wait = size, wait
        self.idle, self.opened = [], 0
        self.lock = threading.Condition()

    def acquire(self):
        with self.lock:
            deadline = time.monotonic() + self.wait
            while not self.idle and self.opened >= self.size:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Refused(504, "PGRST003", "Timed out acquiring connection from connection pool.")
                self.lock.wait(left)
            if self.idle:
                conn = self.idle.pop()
                if not (conn.closed or conn.broken):
                    return conn
                self.opened -= 1
            self.opened += 1
        try:
            return psycopg.connect(CONFIG["database"], autocommit=True)
        except Exception:
            with self.lock:
                self.opened -= 1
                self.lock.notify()
            raise

    def release(self, conn):
        if conn is None:
            return
        with self.lock:
            if conn.closed or conn.broken:
                self.opened -= 1
            else:
                self.idle.append(conn)
            self.lock.notify()

    def discard(self, conn):
        if conn is None:
            return
        try:
            conn.close()
        except Exception:
            pass
        self.release(conn)


POOL = Pool()


def content_range(count, prefer):
    if prefer.get("count") == "exact":
        return "*/%d" % count
    return "0-%d/*" % (count - 1) if count else "*/*"


def parse_prefer(values):
    """RFC 7240 as PostgREST reads it: comma-separated, several headers, the first occurrence wins."""
    found = {}
    for value in values:
        for item in value.split(","):
            if "=" in item:
                name, _, setting = item.strip().partition("=")
                found.setdefault(name.strip(), setting.strip())
    return found


def main():
    parser = argparse.ArgumentParser(description="A PostgREST stand-in (not PostgREST) for the outbox's tests.")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--database", required=True)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--port-file")
    args = parser.parse_args()
    secret = os.environ.get("STANDIN_JWT_SECRET")
    if not secret:
        sys.exit("postgrest-standin: STANDIN_JWT_SECRET is not set")
    CONFIG.update(database=args.database, secret=secret, apikey=os.environ.get("STANDIN_APIKEY") or None, prefix=args.prefix)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file, "w") as handle:
            handle.write(str(port))
    print("listening on %d" % port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
