-- The outbox's reference instance: the server side of the outbox contract (Specs/contract.md, versions 1
-- and 2)
-- as SQL inside PostgreSQL 15 or later (PL/pgSQL, no extension). One command installs it into a
-- database (again and again: it replaces its functions and keeps its data):
--
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f Specs/reference-instance.sql
--
-- then each table the outbox writes is registered once, by its owner (Supabase: in the SQL editor):
--
--   select outbox.register('public.todos');                    -- key: the primary key; owner column: owner
--   select outbox.register('public.notes', mode => 'strict');  -- stale edits are blocked, never merged
--   select outbox.register_mutation('bump', 'public.bump(jsonb, jsonb, text)');
--
-- PostgREST (Supabase's Data API) then serves `POST /rpc/outbox_push` (a batch of writes, one verdict
-- each), `POST /rpc/outbox_row` (the row a withdraw reads) and `POST /rpc/outbox_sibling` (the losing
-- side of a conflict). What it keeps, and why:
--
-- * Exactly once. Every idempotency key is kept with a hash of the write it was first used for
--   (`outbox.keys`), and the answer to every applied write under (origin, write id) (`outbox.answers`).
--   A write sent again, under its key or under a fresh one after a release, gets its first answer,
--   marked replayed; a key sent with another write is blocked key_spent. Refusals are not kept as
--   answers: a refused write is judged again when it is resent (its parent row may have arrived).
-- * Bounded (version 2). A batch carries its origin's acknowledged watermark: every write of that
--   origin at or below it has its answer durably in the client's log and is never sent again. The
--   push that carries it drops the caller's keys and answers of that origin at or below it, in its
--   own transaction (`outbox.watermarks` keeps the highest), so what is kept per origin is bounded by
--   the writes in flight. A write sent again at or below it is a broken contract (the answer
--   `below_watermark`), never a second apply.
-- * Versions. A registered row has `version` (1 when created, +1 for each applied write) and
--   `field_versions` (each column → the version that last changed it; "*" → the version this
--   incarnation of the row began at). A write based on an older version is merged when the fields it
--   sets were not changed since (or are changed to the same value), and conflicted otherwise: nothing
--   of it is applied and the write is kept in `outbox.siblings`, for the app to read. Writes made
--   outside the outbox (a server job, a PostgREST PATCH) keep the versions up through the
--   `outbox_track` trigger, so a merge never misses them. A deleted row leaves a tombstone with its
--   last version; a row created again continues above it.
-- * The owner of every write is the caller (the JWT's `sub`), never a field of the request; another
--   user's rows read as absent.
-- * Order and locks. A batch is one transaction, applied in order; a write whose dependency earlier in
--   the batch was not applied is skipped. Before anything is applied, every existing row the batch's
--   updates, upserts and deletes name is locked, table by table in name order and row by row in key
--   order, so two devices writing the same rows queue instead of deadlocking. Each row is read FOR
--   UPDATE, so no update is lost (an insert needs neither: a row already there is its unique violation).
-- * A non-atomic batch gives each write a savepoint of its own (a refused write rolls back alone), and
--   is capped at 64 writes, the subtransactions a transaction holds before PostgreSQL's cache
--   overflows and slows every other session (413: the client splits the batch). An atomic batch is one
--   savepoint: all or none.
-- * An error that may pass (a deadlock, a serialization failure, a lost connection, anything PostgREST
--   answers 5xx) fails the whole request: nothing is kept, and the client sends it again.

set client_min_messages = warning;
create schema if not exists outbox;
revoke all on schema outbox from public;

create or replace function outbox.caller() returns text language sql stable
set search_path = pg_catalog, pg_temp as $$
  select coalesce(nullif(current_setting('request.jwt.claim.sub', true), ''),
                  nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
$$;

create table if not exists outbox.tables (
  api_name text primary key,                 -- the name writes use
  rel regclass not null unique,
  qualified text not null,                   -- schema-qualified and quoted, for generated SQL
  key_columns text[] not null,               -- the primary key, in its order
  columns text[] not null,                   -- every column but version and field_versions
  owner_column text not null,
  mode text not null check (mode in ('merge', 'strict'))
);
-- Made once by register: the key columns sorted, and the SQL that finds a row by its key.
alter table outbox.tables add column if not exists sorted_keys text[];
alter table outbox.tables add column if not exists key_match text;    -- (t.a, t.b) = (k.a, k.b)
alter table outbox.tables add column if not exists read_sql text;     -- the caller's row by key, FOR UPDATE

create table if not exists outbox.keys (
  idem_key text primary key,
  origin text not null,
  write_id bigint not null,
  owner text not null,
  write_hash bytea not null,
  first_seen timestamptz not null default now()
);

create table if not exists outbox.answers (
  origin text not null,
  write_id bigint not null,
  owner text not null,
  answer jsonb not null,
  answered_at timestamptz not null default now(),
  primary key (origin, write_id)
);

-- Who sent which write: the range a watermark prunes.
create index if not exists keys_by_write on outbox.keys (origin, owner, write_id);

-- Each (origin, caller)'s acknowledged watermark (version 2): their keys and answers at or below it
-- are gone, and a write at or below it is never applied.
create table if not exists outbox.watermarks (
  origin text not null,
  owner text not null,
  watermark bigint not null,
  primary key (origin, owner)
);

create table if not exists outbox.siblings (
  id uuid primary key default gen_random_uuid(),
  api_name text not null,
  key jsonb not null,
  owner text not null,
  origin text not null,
  write_id bigint not null,
  op text not null,
  body jsonb not null,
  base_version bigint,
  server_version bigint,
  fields text[] not null,
  deleted boolean not null default false,   -- the row was deleted after the write's base
  created_at timestamptz not null default now()
);

create table if not exists outbox.tombstones (
  api_name text not null,
  key jsonb not null,
  owner text,
  version bigint not null,
  deleted_at timestamptz not null default now(),
  primary key (api_name, key)
);

create table if not exists outbox.mutations (
  name text primary key,
  fn regprocedure not null,                  -- fn(key jsonb, args jsonb, caller text) returns jsonb
  call_sql text not null
);

-- PostgREST's status for a SQLSTATE (its mapSQLtoHTTP, for an authenticated caller).
create or replace function outbox.status_of(state text) returns int language sql immutable
set search_path = pg_catalog, pg_temp as $$
  select case
    when state = '42883' then 404
    when state ~ '^PT[0-9]{3}$' then substr(state, 3)::int
    when state like '08%' then 503
    when state like '09%' then 500
    when state like '0L%' or state like '0P%' or state like '28%' then 403
    when state in ('23503', '23505') then 409
    when state = '25006' then 405
    when left(state, 2) in ('25', '2D', '38', '39', '3B', '40', '54', '55', '57', '58', 'F0', 'HV', 'XX') then 500
    when state = '53400' then 500
    when state like '53%' then 503
    when state = 'P0001' then 400
    when state like 'P0%' then 500
    when state = '42P01' then 404
    when state = '42P17' then 500
    when state = '42501' then 403
    else 400
  end
$$;

create or replace function outbox.refused(status int, code text, reason text, fields text[] default '{}')
returns jsonb language sql immutable set search_path = pg_catalog, pg_temp as $$
  select jsonb_build_object('verdict', 'refused', 'status', status, 'code', code, 'reason', reason,
                            'fields', to_jsonb(coalesce(fields, '{}'::text[])))
$$;

create or replace function outbox.blocked(reason text, fields text[] default '{}') returns jsonb language sql immutable
set search_path = pg_catalog, pg_temp as $$
  select jsonb_build_object('verdict', 'blocked', 'reason', reason, 'fields', to_jsonb(coalesce(fields, '{}'::text[])))
$$;

-- The columns an error names: its column, else the columns of its constraint.
create or replace function outbox.error_fields(rel regclass, column_name text, constraint_name text) returns text[]
language sql stable set search_path = pg_catalog, pg_temp as $$
  select case
    when coalesce(column_name, '') <> '' then array[column_name]
    else coalesce((select array_agg(a.attname::text order by k.ord)
                     from pg_constraint c
                     cross join lateral unnest(c.conkey) with ordinality k(attnum, ord)
                     join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.attnum
                    where c.conrelid = rel and c.conname = constraint_name), '{}')
  end
$$;

-- `where` for the row a key names: `(t.a, t.b) = (k.a, k.b)`, with `k` the key as a record.
drop function if exists outbox.key_match(outbox.tables);  -- an earlier install's
create or replace function outbox.key_match(key_columns text[]) returns text language sql immutable
set search_path = pg_catalog, pg_temp as $$
  select format('(%s) = (%s)', string_agg(format('t.%I', c), ', '), string_agg(format('k.%I', c), ', '))
    from unnest(key_columns) c
$$;

-- Registers a table: checks its shape, adds `version` and `field_versions` when missing, and installs
-- the trigger that keeps them up for writes made outside the outbox.
create or replace function outbox.register(tbl regclass, api_name text default null, mode text default 'merge',
                                           owner_column text default 'owner') returns void
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  reg_name text := coalesce(api_name, (select c.relname::text from pg_class c where c.oid = tbl));
  qualified text := (select format('%I.%I', n.nspname, c.relname) from pg_class c
                       join pg_namespace n on n.oid = c.relnamespace where c.oid = tbl);
  keys text[];
  cols text[];
begin
  select array_agg(a.attname::text order by k.ord) into keys
    from pg_index i cross join lateral unnest(i.indkey) with ordinality k(attnum, ord)
    join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
   where i.indrelid = tbl and i.indisprimary;
  if keys is null then
    raise exception 'outbox.register: % has no primary key', tbl using errcode = '42P16';
  end if;
  if not exists (select from pg_attribute where attrelid = tbl and attname = owner_column and not attisdropped) then
    raise exception 'outbox.register: % has no owner column %', tbl, owner_column using errcode = '42703';
  end if;
  execute format('alter table %s add column if not exists version bigint not null default 1,'
                 ' add column if not exists field_versions jsonb not null default ''{}''', qualified);
  select array_agg(attname::text order by attnum) into cols from pg_attribute
   where attrelid = tbl and attnum > 0 and not attisdropped and attname not in ('version', 'field_versions');
  insert into outbox.tables (api_name, rel, qualified, key_columns, columns, owner_column, mode, sorted_keys, key_match,
                             read_sql)
    values (reg_name, tbl, qualified, keys, cols, owner_column, mode, array(select k from unnest(keys) k order by k),
            outbox.key_match(keys),
            format('select to_jsonb(t) from %s t, jsonb_populate_record(null::%s, $1) k where %s and t.%I::text = $2'
                   ' for update of t', qualified, qualified, outbox.key_match(keys), owner_column))
    on conflict on constraint tables_pkey do update
      set rel = excluded.rel, qualified = excluded.qualified, key_columns = excluded.key_columns,
          columns = excluded.columns, owner_column = excluded.owner_column, mode = excluded.mode,
          sorted_keys = excluded.sorted_keys, key_match = excluded.key_match, read_sql = excluded.read_sql;
  execute format('drop trigger if exists outbox_track on %s', qualified);
  execute format('create trigger outbox_track before insert or update or delete on %s'
                 ' for each row execute function outbox.track(%L)', qualified, reg_name);
end
$$;

-- Registers a custom mutation: `fn(key jsonb, args jsonb, caller text) returns jsonb`, run as the
-- instance's owner; it must filter by `caller` itself.
create or replace function outbox.register_mutation(mutation_name text, fn regprocedure) returns void
language plpgsql set search_path = pg_catalog, pg_temp as $$
begin
  insert into outbox.mutations values (mutation_name, fn, (select format('select %I.%I($1, $2, $3)', n.nspname, p.proname)
                                                     from pg_proc p join pg_namespace n on n.oid = p.pronamespace
                                                    where p.oid = fn))
    on conflict on constraint mutations_pkey do update set fn = excluded.fn, call_sql = excluded.call_sql;
end
$$;

-- Keeps `version` and `field_versions` up for every write, the outbox's and anyone else's: a new row
-- starts above the tombstone of its key, if any; an update from outside the outbox (a server job,
-- PostgREST) adds one and stamps the columns it changed, whatever version or stamps it set itself; a
-- delete leaves a tombstone.
-- It runs as the instance's owner (it writes the tombstones), for callers of any role.
create or replace function outbox.track() returns trigger language plpgsql security definer
set search_path = pg_catalog, pg_temp as $$
declare
  reg outbox.tables;
  before_row jsonb;
  after_row jsonb;
  row_key jsonb;
  next_version bigint;
  stamps jsonb;
  col text;
begin
  select * into reg from outbox.tables t where t.api_name = tg_argv[0];
  if tg_op = 'DELETE' then
    before_row := to_jsonb(old);
    row_key := (select jsonb_object_agg(k, before_row -> k) from unnest(reg.key_columns) k);
    insert into outbox.tombstones as t (api_name, key, owner, version)
      values (reg.api_name, row_key, before_row ->> reg.owner_column, (before_row ->> 'version')::bigint + 1)
      on conflict (api_name, key) do update
        set version = greatest(t.version, excluded.version), owner = excluded.owner, deleted_at = now();
    return old;
  end if;
  after_row := to_jsonb(new);
  if tg_op = 'INSERT' then
    row_key := (select jsonb_object_agg(k, after_row -> k) from unnest(reg.key_columns) k);
    delete from outbox.tombstones t where t.api_name = reg.api_name and t.key = row_key
      returning t.version + 1 into next_version;
    next_version := coalesce(next_version, 1);
    return jsonb_populate_record(new, jsonb_build_object('version', next_version,
                                                         'field_versions', jsonb_build_object('*', next_version)));
  end if;
  before_row := to_jsonb(old);
  -- Only the outbox's own apply (`outbox.write` set for its transaction) sets the version and the
  -- stamps itself; anyone else's `version` or `field_versions` (a plain PATCH) is recomputed, never
  -- taken: a row cannot be rewound past merge and conflict detection.
  if (after_row -> 'version') is distinct from (before_row -> 'version')
     and coalesce(current_setting('outbox.write', true), '') <> '' then
    return new;
  end if;
  next_version := (before_row ->> 'version')::bigint + 1;
  stamps := coalesce(before_row -> 'field_versions', '{}');
  for col in select jsonb_object_keys(after_row) loop
    if col not in ('version', 'field_versions') and (after_row -> col) is distinct from (before_row -> col) then
      stamps := stamps || jsonb_build_object(col, next_version);
    end if;
  end loop;
  return jsonb_populate_record(new, jsonb_build_object('version', next_version, 'field_versions', stamps));
end
$$;

-- The verdict on one write, applied (non-atomic: inside the caller's savepoint). Raises the errors
-- PostgreSQL raises; the caller maps them.
create or replace function outbox._apply(reg outbox.tables, w jsonb, caller text, origin text, atomic boolean)
returns jsonb language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  op text := w ->> 'op';
  row_key jsonb := w -> 'key';
  body jsonb := coalesce(w -> 'body', '{}');
  base bigint := (w ->> 'baseVersion')::bigint;
  current_row jsonb;
  current_version bigint;
  row_floor bigint;
  stamps jsonb;
  changed text[];
  overlap text[] := '{}';
  setting text[] := '{}';
  normalized jsonb;
  tomb bigint;
  sibling uuid;
  new_version bigint;
  col text;
  assignments text;
  inserted jsonb;
begin
  if jsonb_typeof(row_key) is distinct from 'object' or jsonb_typeof(body) is distinct from 'object'
     or array(select k from jsonb_object_keys(row_key) k order by k) is distinct from reg.sorted_keys then
    return outbox.refused(400, 'OB400', format('the key must name the key columns of %s (%s), and the body be an object',
                                                reg.api_name, array_to_string(reg.key_columns, ', ')), reg.key_columns);
  end if;
  for col in select jsonb_object_keys(body) loop
    if col in ('version', 'field_versions') then
      return outbox.refused(400, 'OB400', format('%s is the instance''s to set', col), array[col]);
    elsif not col = any(reg.columns) then
      return outbox.refused(400, '42703', format('column "%s" of relation "%s" does not exist', col, reg.api_name),
                            array[col]);
    elsif col = reg.owner_column and body ->> col is distinct from caller then
      return outbox.refused(403, '42501', 'the owner of a row is the caller', array[col]);
    end if;
  end loop;

  -- An insert does not read first: a row already there (anyone's) is the unique violation it raises.
  if op <> 'insert' then
    execute reg.read_sql into current_row using row_key, caller;
  end if;

  if current_row is null then
    if op = 'delete' then
      return jsonb_build_object('verdict', 'accepted', 'version', null);  -- gone either way
    elsif op = 'update' then
      select t.version into tomb from outbox.tombstones t where t.api_name = reg.api_name and t.key = row_key
         and t.owner = caller;
      if base is not null and tomb is not null and tomb > base then
        if atomic then return outbox.blocked('version_conflict', array(select jsonb_object_keys(body))); end if;
        insert into outbox.siblings (api_name, key, owner, origin, write_id, op, body, base_version, server_version,
                                     fields, deleted)
          values (reg.api_name, row_key, caller, origin, (w ->> 'id')::bigint, op, body, base, tomb,
                  array(select jsonb_object_keys(body)), true)
          returning id into sibling;
        return jsonb_build_object('verdict', 'conflicted', 'siblingId', sibling, 'fields',
                                  to_jsonb(array(select jsonb_object_keys(body))), 'deleted', true, 'version', tomb);
      elsif base is not null then
        return outbox.blocked('ancestor_unavailable');
      end if;
      return outbox.refused(404, 'P0002', 'no row has this key', reg.key_columns);
    end if;
    -- insert, or an upsert of a row that is not there: only the columns the write names, so the
    -- others take their defaults; the owner is the caller.
    inserted := row_key || body || jsonb_build_object(reg.owner_column, caller);
    execute format('insert into %s (%s) select %s from jsonb_populate_record(null::%s, $1) p returning version',
                   reg.qualified,
                   (select string_agg(format('%I', k), ', ') from jsonb_object_keys(inserted) k),
                   (select string_agg(format('p.%I', k), ', ') from jsonb_object_keys(inserted) k),
                   reg.qualified)
      into new_version using inserted;
    return jsonb_build_object('verdict', 'accepted', 'version', new_version);
  end if;

  current_version := (current_row ->> 'version')::bigint;
  stamps := coalesce(current_row -> 'field_versions', '{}');
  row_floor := coalesce((stamps ->> '*')::bigint, 1);
  -- Both sides through the column types: `"2026-01-01T00:00:00Z"` is the stored timestamp, and a
  -- value of the wrong type is refused here (22P02) before anything is written.
  execute format('select to_jsonb(jsonb_populate_record(null::%s, $1))', reg.qualified) into normalized using body;
  if base is not null and (base > current_version or base < row_floor) then
    return outbox.blocked('ancestor_unavailable');  -- a version this row never had
  end if;
  if base is not null and base < current_version then
    changed := array(select e.key from jsonb_each_text(stamps) e where e.key <> '*' and e.value::bigint > base
                     order by e.key);
    if reg.mode = 'strict' then
      return outbox.blocked('version_conflict', changed);
    end if;
    if op = 'delete' then
      overlap := changed;  -- a delete overlaps every change since its base
    else
      overlap := array(select c from jsonb_object_keys(body) c
                        where c = any(changed) and (normalized -> c) is distinct from (current_row -> c) order by c);
    end if;
    if cardinality(overlap) > 0 then
      if atomic then return outbox.blocked('version_conflict', overlap); end if;
      insert into outbox.siblings (api_name, key, owner, origin, write_id, op, body, base_version, server_version, fields)
        values (reg.api_name, row_key, caller, origin, (w ->> 'id')::bigint, op, body, base, current_version, overlap)
        returning id into sibling;
      return jsonb_build_object('verdict', 'conflicted', 'siblingId', sibling, 'fields', to_jsonb(overlap),
                                'version', current_version);
    end if;
  end if;

  new_version := current_version + 1;
  if op = 'delete' then
    execute format('delete from %s t using jsonb_populate_record(null::%s, $1) k where %s', reg.qualified,
                   reg.qualified, reg.key_match)
      using row_key;
    return jsonb_build_object('verdict', 'accepted', 'version', new_version);
  end if;
  -- Only the columns whose value changes are set and stamped.
  setting := array(select c from jsonb_object_keys(body) c where (normalized -> c) is distinct from (current_row -> c)
                   order by c);
  for col in select unnest(setting) loop
    stamps := stamps || jsonb_build_object(col, new_version);
  end loop;
  assignments := (select string_agg(format('%I = p.%I', c, c), ', ') from unnest(setting) c);
  execute format('update %s t set %sversion = $2, field_versions = $3 from jsonb_populate_record(null::%s, $1) p,'
                 ' jsonb_populate_record(null::%s, $4) k where %s',
                 reg.qualified, coalesce(assignments || ', ', ''), reg.qualified, reg.qualified, reg.key_match)
    using body, new_version, stamps, row_key;
  if base is not null and base < current_version then
    return jsonb_build_object('verdict', 'merged', 'fields', to_jsonb(array(select jsonb_object_keys(body))),
                              'kept', to_jsonb(array(select c from unnest(changed) c where not body ? c)),
                              'version', new_version);
  end if;
  return jsonb_build_object('verdict', 'accepted', 'version', new_version);
end
$$;

-- The write's identity for its key: everything that makes it this write, in jsonb's canonical text.
create or replace function outbox.write_hash(origin text, w jsonb) returns bytea language sql immutable
set search_path = pg_catalog, pg_temp as $$
  select sha256(convert_to(origin || ' ' || jsonb_build_object(
    'id', w -> 'id', 'user', w -> 'user', 'table', w -> 'table', 'op', w -> 'op', 'name', w -> 'name', 'key', w -> 'key',
    'body', coalesce(w -> 'body', '{}'), 'baseVersion', w -> 'baseVersion')::text, 'UTF8'))
$$;

-- One write of a batch: its key checked and kept, an earlier answer replayed, or the write judged and
-- applied. Non-atomic, the apply runs in a savepoint of its own and a refusal rolls back only it.
create or replace function outbox._push_one(origin text, w jsonb, caller text, atomic boolean)
returns jsonb language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  wid bigint;
  idem_key text := w ->> 'idempotencyKey';
  op text := w ->> 'op';
  reg outbox.tables;
  hash bytea := outbox.write_hash(origin, w);
  kept outbox.keys;
  earlier outbox.answers;
  verdict jsonb;
  mutation outbox.mutations;
  result jsonb;
  state text;
  message text;
  col text;
  cons text;
begin
  if jsonb_typeof(w) is distinct from 'object' or jsonb_typeof(w -> 'id') is distinct from 'number'
     or idem_key is null or op is null or w ->> 'table' is null or w ->> 'user' is null then
    return outbox.refused(400, 'OB400', 'a write needs id, idempotencyKey, user, table, op and key')
           || jsonb_build_object('id', w -> 'id', 'replayed', false);
  end if;
  wid := (w ->> 'id')::bigint;
  if w ->> 'user' is distinct from caller then
    return outbox.refused(403, '42501', 'the write''s user is not the caller')
           || jsonb_build_object('id', wid, 'replayed', false);
  end if;
  insert into outbox.keys (idem_key, origin, write_id, owner, write_hash)
    values (idem_key, _push_one.origin, wid, caller, hash) on conflict do nothing;
  if not found then
    select * into kept from outbox.keys k where k.idem_key = w ->> 'idempotencyKey';
    if kept.write_hash <> hash then
      return outbox.blocked('key_spent') || jsonb_build_object('id', wid, 'replayed', false);
    end if;
  end if;
  select * into earlier from outbox.answers a where a.origin = _push_one.origin and a.write_id = wid;
  if found then
    if earlier.owner <> caller then
      return outbox.refused(403, '42501', 'the write''s user is not the caller')
             || jsonb_build_object('id', wid, 'replayed', false);
    end if;
    return earlier.answer || jsonb_build_object('replayed', true);
  end if;

  -- The write being applied, for the app's own triggers (an audit trail): `outbox.origin`, `outbox.write`.
  perform set_config('outbox.origin', _push_one.origin, true), set_config('outbox.write', wid::text, true);
  select * into reg from outbox.tables t where t.api_name = w ->> 'table';
  if op = 'custom' then
    select * into mutation from outbox.mutations m where m.name = w ->> 'name';
    if not found then
      verdict := outbox.refused(404, '42883', format('no mutation named %s is registered', w ->> 'name'));
    elsif atomic then
      execute mutation.call_sql into result using w -> 'key', coalesce(w -> 'body', '{}'), caller;
      verdict := jsonb_build_object('verdict', 'accepted', 'result', result);
    else
      begin
        execute mutation.call_sql into result using w -> 'key', coalesce(w -> 'body', '{}'), caller;
        verdict := jsonb_build_object('verdict', 'accepted', 'result', result);
      exception when others then
        get stacked diagnostics state = returned_sqlstate, message = message_text;
        if outbox.status_of(state) >= 500 then raise; end if;
        verdict := outbox.refused(outbox.status_of(state), state, message);
      end;
    end if;
  elsif op not in ('insert', 'update', 'upsert', 'delete') then
    verdict := outbox.refused(400, 'OB400', format('no operation %s (insert, update, upsert, delete or custom)', op));
  elsif reg.api_name is null then
    verdict := outbox.refused(404, '42P01', format('table %s is not registered with the outbox', w ->> 'table'));
  elsif atomic then
    verdict := outbox._apply(reg, w, caller, origin, true);
  else
    begin
      verdict := outbox._apply(reg, w, caller, origin, false);
    exception when others then
      get stacked diagnostics state = returned_sqlstate, message = message_text, col = column_name,
                              cons = constraint_name;
      if outbox.status_of(state) >= 500 then raise; end if;  -- may pass: the whole request fails
      verdict := outbox.refused(outbox.status_of(state), state, message, outbox.error_fields(reg.rel, col, cons));
    end;
  end if;

  if verdict ->> 'verdict' in ('accepted', 'merged', 'conflicted') then
    insert into outbox.answers (origin, write_id, owner, answer)
      values (_push_one.origin, wid, caller, verdict || jsonb_build_object('id', wid))
      on conflict do nothing;
    if not found then
      -- A concurrent request answered this write under another key: fail, and the resend replays.
      raise exception 'write % was answered by a concurrent request', wid using errcode = '40001';
    end if;
  end if;
  return verdict || jsonb_build_object('id', wid, 'replayed', false);
end
$$;

-- POST /rpc/outbox_push {"batch": {"version": 2, "origin": …, "watermark": …, "atomic": false, "writes": […]}}
-- (version 1: no watermark, nothing forgotten)
create or replace function public.outbox_push(batch jsonb) returns jsonb language plpgsql security definer
set search_path = pg_catalog, pg_temp as $$
declare
  caller text := outbox.caller();
  origin text := batch ->> 'origin';
  writes jsonb := batch -> 'writes';
  batch_version int;
  this_origin text := batch ->> 'origin';
  acknowledged bigint;
  kept_watermark bigint;
  below jsonb;
  atomic boolean := coalesce((batch ->> 'atomic')::boolean, false);
  verdicts jsonb := '[]';
  verdict jsonb;
  unapplied jsonb := '[]';
  reg outbox.tables;
  keys jsonb;
  culprit jsonb;
  failed_index int;
  state text;
  message text;
  col text;
  cons text;
  i int;
begin
  if caller is null then
    raise exception 'the outbox needs a signed-in caller' using errcode = '42501';
  end if;
  if (batch -> 'version') is distinct from '1'::jsonb and (batch -> 'version') is distinct from '2'::jsonb then
    return jsonb_build_object('version', 2, 'error', 'version_unsupported', 'versions', jsonb_build_array(1, 2));
  end if;
  batch_version := (batch ->> 'version')::int;
  if origin is null or jsonb_typeof(writes) is distinct from 'array' then
    raise exception 'a batch needs an origin and a list of writes' using errcode = 'PT400';
  end if;
  if batch_version = 2 then
    if batch ? 'watermark' and jsonb_typeof(batch -> 'watermark') is distinct from 'number' then
      raise exception 'a watermark is a write id' using errcode = 'PT400';
    end if;
    acknowledged := (batch ->> 'watermark')::bigint;
    -- A write whose answer this instance may have forgotten is never applied again.
    select w.watermark into kept_watermark from outbox.watermarks w
      where w.origin = this_origin and w.owner = caller;
    below := (select jsonb_agg(w -> 'id') from jsonb_array_elements(writes) w
               where jsonb_typeof(w -> 'id') = 'number' and (w ->> 'id')::bigint <= kept_watermark);
    if below is not null then
      return jsonb_build_object('version', 2, 'error', 'below_watermark', 'watermark', kept_watermark,
                                'writes', below);
    end if;
    -- Forgotten in this push's transaction: a failure that rolls the push back keeps them.
    if acknowledged > coalesce(kept_watermark, 0) then
      delete from outbox.answers a where a.origin = this_origin and a.owner = caller and a.write_id <= acknowledged;
      delete from outbox.keys k where k.origin = this_origin and k.owner = caller and k.write_id <= acknowledged;
      insert into outbox.watermarks (origin, owner, watermark) values (this_origin, caller, acknowledged)
        on conflict on constraint watermarks_pkey
        do update set watermark = greatest(outbox.watermarks.watermark, excluded.watermark);
    end if;
  end if;
  if not atomic and jsonb_array_length(writes) > 64 then
    raise exception 'a non-atomic batch holds at most 64 writes' using errcode = 'PT413';
  end if;

  -- Every existing row the batch names, locked before anything is applied: tables in name order,
  -- rows in key order (best effort: a table whose keys do not read as its key columns is skipped).
  for reg in select t.* from outbox.tables t
              where t.api_name in (select w ->> 'table' from jsonb_array_elements(writes) w) order by t.api_name loop
    -- (An insert locks nothing up front: a row already there is its unique violation.)
    keys := (select jsonb_agg(w -> 'key') from jsonb_array_elements(writes) w
              where w ->> 'table' = reg.api_name and w ->> 'op' <> 'insert' and jsonb_typeof(w -> 'key') = 'object');
    continue when keys is null;
    begin
      execute format('select 1 from %s t join jsonb_populate_recordset(null::%s, $1) k on %s where t.%I::text = $2'
                     ' order by %s for update of t', reg.qualified, reg.qualified, reg.key_match,
                     reg.owner_column, (select string_agg(format('t.%I', c), ', ') from unnest(reg.key_columns) c))
        using keys, caller;
    exception when others then
      get stacked diagnostics state = returned_sqlstate;
      if outbox.status_of(state) >= 500 then raise; end if;
    end;
  end loop;

  if not atomic then
    -- A write whose dependency earlier in the batch was not applied is skipped: the client sends it
    -- again once that one is settled.
    for i in 0 .. jsonb_array_length(writes) - 1 loop
      if exists (select from jsonb_array_elements(coalesce(writes -> i -> 'dependsOn', '[]')) d
                  where d in (select jsonb_array_elements(unapplied))) then
        verdict := jsonb_build_object('verdict', 'skipped', 'id', writes -> i -> 'id', 'replayed', false);
      else
        verdict := outbox._push_one(origin, writes -> i, caller, false);
      end if;
      if verdict ->> 'verdict' not in ('accepted', 'merged', 'conflicted') then
        unapplied := unapplied || jsonb_build_array(writes -> i -> 'id');
      end if;
      verdicts := verdicts || jsonb_build_array(verdict);
    end loop;
    return jsonb_build_object('version', batch_version, 'verdicts', verdicts, 'aborted', false);
  end if;

  -- Atomic: all or none. The first write not applied aborts the whole batch, keys included.
  begin
    for i in 0 .. jsonb_array_length(writes) - 1 loop
      failed_index := i;
      verdict := outbox._push_one(origin, writes -> i, caller, true);
      if verdict ->> 'verdict' not in ('accepted', 'merged') then
        culprit := verdict;
        raise exception 'atomic batch aborted' using errcode = 'OB001';
      end if;
      verdicts := verdicts || jsonb_build_array(verdict);
    end loop;
  exception when others then
    get stacked diagnostics state = returned_sqlstate, message = message_text, col = column_name,
                            cons = constraint_name;
    if state <> 'OB001' then
      if outbox.status_of(state) >= 500 then raise; end if;
      select * into reg from outbox.tables t where t.api_name = writes -> failed_index ->> 'table';
      culprit := outbox.refused(outbox.status_of(state), state, message, outbox.error_fields(reg.rel, col, cons))
                 || jsonb_build_object('id', writes -> failed_index -> 'id', 'replayed', false);
    end if;
    verdicts := '[]';
    for i in 0 .. jsonb_array_length(writes) - 1 loop
      verdicts := verdicts || jsonb_build_array(case when i = failed_index then culprit else
        outbox.refused(409, 'batch_aborted', format('write %s of the atomic batch was not applied', failed_index))
        || jsonb_build_object('id', writes -> i -> 'id', 'replayed', false) end);
    end loop;
    return jsonb_build_object('version', batch_version, 'verdicts', verdicts, 'aborted', true, 'failedIndex', failed_index);
  end;
  return jsonb_build_object('version', batch_version, 'verdicts', verdicts, 'aborted', false);
end
$$;

-- POST /rpc/outbox_row {"table": "todos", "key": {"id": 1}}: the row as the caller may see it.
create or replace function public.outbox_row("table" text, key jsonb) returns jsonb language plpgsql stable
security definer set search_path = pg_catalog, pg_temp as $$
declare
  caller text := outbox.caller();
  reg outbox.tables;
  found_row jsonb;
  tomb bigint;
begin
  if caller is null then
    raise exception 'the outbox needs a signed-in caller' using errcode = '42501';
  end if;
  select * into reg from outbox.tables t where t.api_name = outbox_row."table";
  if not found then
    raise exception 'table % is not registered with the outbox', outbox_row."table" using errcode = '42P01';
  end if;
  execute format('select to_jsonb(t) - ''field_versions'' from %s t, jsonb_populate_record(null::%s, $1) k'
                 ' where %s and t.%I::text = $2', reg.qualified, reg.qualified, reg.key_match, reg.owner_column)
    into found_row using key, caller;
  if found_row is null then
    select t.version into tomb from outbox.tombstones t where t.api_name = reg.api_name and t.key = outbox_row.key
       and t.owner = caller;
  end if;
  return jsonb_build_object('version', 1, 'table', reg.api_name, 'key', key, 'exists', found_row is not null,
                            'deleted', tomb is not null, 'rowVersion', coalesce((found_row ->> 'version')::bigint, tomb),
                            'row', found_row);
end
$$;

-- POST /rpc/outbox_sibling {"id": "…"}: the losing side of a conflict, the caller's own.
create or replace function public.outbox_sibling(id uuid) returns jsonb language sql stable security definer
set search_path = pg_catalog, pg_temp as $$
  select jsonb_build_object('id', s.id, 'table', s.api_name, 'key', s.key, 'op', s.op, 'body', s.body,
                            'baseVersion', s.base_version, 'serverVersion', s.server_version,
                            'fields', to_jsonb(s.fields), 'deleted', s.deleted, 'writeId', s.write_id,
                            'createdAt', s.created_at)
    from outbox.siblings s where s.id = outbox_sibling.id and s.owner = outbox.caller()
$$;

revoke all on function public.outbox_push(jsonb), public.outbox_row(text, jsonb), public.outbox_sibling(uuid)
  from public;
-- PostgREST's role for a signed-in caller (Supabase has it; a plain PostgREST setup may not yet).
do $$
begin
  if not exists (select from pg_roles where rolname = 'authenticated') then create role authenticated nologin; end if;
end
$$;
grant usage on schema outbox to authenticated;
grant execute on function outbox.caller() to authenticated;
grant execute on function public.outbox_push(jsonb), public.outbox_row(text, jsonb), public.outbox_sibling(uuid)
  to authenticated;

-- An upgrade: the tables registered by an earlier install are registered again (the SQL made for each).
do $$
declare
  reg outbox.tables;
begin
  for reg in select * from outbox.tables loop
    perform outbox.register(reg.rel, reg.api_name, reg.mode, reg.owner_column);
  end loop;
end
$$;
