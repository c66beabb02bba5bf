-- The example schema the tests, the demo and the docs share: two tables an app would keep in
-- Supabase, with row-level security as Supabase sets it up (a user reads and writes only its own
-- rows), and a record of every apply (the order the instance applied writes in, for the tests'
-- exactly-once and order checks; an app does not need it).
--
-- Roles as PostgREST and Supabase have them: `anon` (no token) is granted nothing; `authenticated`
-- (a token with role=authenticated) may select, insert, update and delete; the owner of a row is
-- the token's `sub`, never a field of the request.

do $$
begin
  if not exists (select from pg_roles where rolname = 'anon') then create role anon nologin; end if;
  if not exists (select from pg_roles where rolname = 'authenticated') then create role authenticated nologin; end if;
end
$$;

create or replace function public.jwt_sub() returns text language sql stable as $$
  select coalesce(current_setting('request.jwt.claims', true), '{}')::json ->> 'sub'
$$;

create table public.lists (
  id bigint primary key,
  name text not null,
  owner text not null default public.jwt_sub()
);

create table public.todos (
  id bigint primary key,
  list_id bigint references public.lists (id),
  title text not null check (title <> ''),
  done boolean not null default false,
  owner text not null default public.jwt_sub()
);

alter table public.lists enable row level security;
alter table public.todos enable row level security;
create policy own_lists on public.lists for all to authenticated
  using (owner = public.jwt_sub()) with check (owner = public.jwt_sub());
create policy own_todos on public.todos for all to authenticated
  using (owner = public.jwt_sub()) with check (owner = public.jwt_sub());

revoke all on public.lists, public.todos from anon;
grant usage on schema public to anon, authenticated;
grant select, insert, update, delete on public.lists, public.todos to authenticated;

-- Every row change, in the order the instance applied it, with the outbox's write headers
-- (PostgREST hands SQL the request's headers, lowercased, in `request.headers`).
create table public.applied (
  seq bigserial primary key,
  tbl text not null,
  op text not null,
  row_id bigint not null,
  owner text,
  outbox_write text,
  outbox_origin text,
  at timestamptz not null default clock_timestamp()
);
revoke all on public.applied from anon, authenticated;

create or replace function public.record_apply() returns trigger language plpgsql security definer
set search_path = public as $$
declare
  headers json := coalesce(current_setting('request.headers', true), '{}')::json;
  changed record := case when tg_op = 'DELETE' then old else new end;
begin
  -- The reference instance names the one write it applies; PostgREST requests carry the headers.
  insert into public.applied (tbl, op, row_id, owner, outbox_write, outbox_origin)
  values (tg_table_name, lower(tg_op), changed.id, changed.owner,
          coalesce(nullif(current_setting('outbox.write', true), ''), headers ->> 'x-outbox-write'),
          coalesce(nullif(current_setting('outbox.origin', true), ''), headers ->> 'x-outbox-origin'));
  return null;
end
$$;

create trigger lists_applied after insert or update or delete on public.lists
  for each row execute function public.record_apply();
create trigger todos_applied after insert or update or delete on public.todos
  for each row execute function public.record_apply();

-- A custom mutation (`.custom("complete_list", table: "lists", key: ["id": 7], body: ["list_id": 7])`
-- posts its body as the arguments of `POST /rpc/complete_list`): marks every todo of a list done.
create or replace function public.complete_list(list_id bigint) returns void language sql volatile as $$
  update public.todos set done = true where todos.list_id = complete_list.list_id
$$;
revoke all on function public.complete_list(bigint) from public;
grant execute on function public.complete_list(bigint) to authenticated;

-- Counters, for the custom mutation `bump` of the reference instance (Specs/reference-instance.sql):
-- `.custom("bump", table: "counters", key: ["id": 3], body: [:])` adds 1 to `n` of counter 3,
-- creating it at 1. Exactly once per write, however often a lost acknowledgement makes it go again.
create table public.counters (
  id bigint primary key,
  n bigint not null default 0,
  owner text not null default public.jwt_sub()
);
alter table public.counters enable row level security;
create policy own_counters on public.counters for all to authenticated
  using (owner = public.jwt_sub()) with check (owner = public.jwt_sub());
revoke all on public.counters from anon;
grant select, insert, update, delete on public.counters to authenticated;
create trigger counters_applied after insert or update or delete on public.counters
  for each row execute function public.record_apply();

-- A mutation of the reference instance: run by `outbox_push` as the instance's owner, with the
-- caller named; never callable through the API itself.
create or replace function public.bump(key jsonb, args jsonb, caller text) returns jsonb language plpgsql as $$
declare
  total bigint;
begin
  insert into public.counters as c (id, n, owner) values ((key ->> 'id')::bigint, 1, caller)
    on conflict (id) do update set n = c.n + 1 where c.owner = caller
    returning c.n into total;
  if total is null then
    raise exception 'counter % is another user''s', key ->> 'id' using errcode = '42501';
  end if;
  return jsonb_build_object('n', total);
end
$$;
revoke all on function public.bump(jsonb, jsonb, text) from public;

-- The tables the reference instance writes (when it is installed: `scripts/instance start` installs
-- it first). Registering adds `version` and `field_versions` to each.
do $$
begin
  if to_regnamespace('outbox') is not null then
    perform outbox.register('public.lists');
    perform outbox.register('public.todos');
    perform outbox.register('public.counters');
    perform outbox.register_mutation('bump', 'public.bump(jsonb, jsonb, text)');
  end if;
end
$$;
