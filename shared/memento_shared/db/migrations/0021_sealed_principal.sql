-- 0021: the sealed principal (issue 31, item 3). Until now the service role set the principal with set_config(...,
-- true), and any later statement of the same transaction (a bug, an injected statement) could call set_config again
-- and act as another tenant. Now a transaction enters its principal once, through agent_memory.enter(), which runs as
-- the schema owner, sets the four settings and seals them: memento.seal is an HMAC-SHA256, under a key only the
-- schema owner can read, of the four values, the transaction's id and the server's start time. Every accessor the
-- policies call checks the seal against the settings as they are at that moment, in the current transaction:
--   * a set_config of any principal setting after enter()  -> error 42501 as soon as a policy reads the principal
--   * a seal copied from another transaction (a replay)    -> error 42501 (its transaction id differs)
--   * a second enter() in the same transaction             -> error 42501 (the transaction already has an id, and no
--     statement can take it away: clearing the settings first does not help)
--   * principal settings set without enter()               -> error 42501
--   * no principal at all (every setting empty)            -> no rows, as before
-- Errors rather than empty answers, so tampering is loud; a query whose scan meets no row may end before any policy
-- reads the principal, and then it has nothing to show either. Which principal enter() accepts at the start of a
-- transaction stays the service role's choice, as before: the seal fixes that choice for the rest of the transaction.
-- Cost: enter() gives every transaction an id (read-only ones too: one more commit record in the WAL, not waited
-- for); each accessor computes two SHA-256 of a short input (about 5 us a check). The policies keep
-- 0006's shape, every accessor an InitPlan run once per query, so the cost is per query, never per row.

-- The key lives outside agent_memory, because memento-migrate grants the service role every table there.
CREATE SCHEMA memento_seal;
REVOKE ALL ON SCHEMA memento_seal FROM PUBLIC;
CREATE TABLE memento_seal.hmac_key (
    only_row   boolean PRIMARY KEY DEFAULT true CONSTRAINT hmac_key_only_row_check CHECK (only_row),
    inner_pad  bytea NOT NULL CONSTRAINT hmac_key_inner_pad_check CHECK (length(inner_pad) = 64),  -- key XOR 0x36
    outer_pad  bytea NOT NULL CONSTRAINT hmac_key_outer_pad_check CHECK (length(outer_pad) = 64)   -- key XOR 0x5c
);
REVOKE ALL ON memento_seal.hmac_key FROM PUBLIC;

-- A 64-byte key from gen_random_uuid() (a cryptographically strong source: 4 x 122 random bits), kept as HMAC's pads.
DO $$
DECLARE
    key bytea := decode(replace(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text
                                || gen_random_uuid()::text, '-', ''), 'hex');
    inner_pad bytea := key;
    outer_pad bytea := key;
BEGIN
    FOR i IN 0 .. 63 LOOP
        inner_pad := set_byte(inner_pad, i, get_byte(key, i) # 54);
        outer_pad := set_byte(outer_pad, i, get_byte(key, i) # 92);
    END LOOP;
    INSERT INTO memento_seal.hmac_key (inner_pad, outer_pad) VALUES (inner_pad, outer_pad);
END $$;

-- The key as {inner_pad, outer_pad}. Declared IMMUTABLE though it reads a table: seal() reads it in a plain
-- expression, which the planner folds into a constant when a session first plans it, so the table is read once
-- per session instead of on every check (a third of a check's time). The key never changes in place: a new key is
-- a new CREATE OR REPLACE of this function too (dropping every cached plan), or new sessions after a restore. No
-- SET clause, which would keep it from being folded: it only runs inside seal(), whose search_path is pinned.
CREATE FUNCTION memento_seal.pads() RETURNS bytea[]
    LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY[k.inner_pad, k.outer_pad] FROM memento_seal.hmac_key k
$$;
REVOKE ALL ON FUNCTION memento_seal.pads() FROM PUBLIC;

-- The seal, hex. Each value is length-prefixed, so no two principals encode alike; the server's start time (as
-- epoch seconds, whatever the session's TimeZone) keeps a restored cluster, which may count transaction ids from
-- the same point again, from accepting an old seal. Plain expressions only: a query taking the values as
-- parameters was planned again on every call (21 us a check instead of 7). Only the two SECURITY DEFINER functions
-- below run it.
CREATE FUNCTION memento_seal.seal(tenant text, workspace text, agent text, access text, xact xid8) RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    pads bytea[] := memento_seal.pads();
BEGIN
    RETURN encode(sha256(pads[2] || sha256(pads[1] || convert_to(
        length(tenant) || ':' || tenant || length(workspace) || ':' || workspace || length(agent) || ':' || agent
        || length(access) || ':' || access || xact::text || '@' || extract(epoch FROM pg_postmaster_start_time()),
        'UTF8'))), 'hex');
END $$;
REVOKE ALL ON FUNCTION memento_seal.seal(text, text, text, text, xid8) FROM PUBLIC;

-- SECURITY DEFINER functions pin search_path (pg_temp last): the caller could otherwise put its own operators or
-- tables first and run them as the schema owner. set_config(..., true) inside still lasts until the transaction ends.
CREATE FUNCTION agent_memory.enter(tenant text, workspace text, agent text, access text DEFAULT 'agent')
    RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    xact xid8;
BEGIN
    -- enter() is a transaction's first act and gives it an id: an id already there means the transaction was entered
    -- (or has written) before
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'the principal is entered once per transaction, before anything else'
            USING ERRCODE = '42501';
    END IF;
    IF tenant IS NULL OR workspace IS NULL OR agent IS NULL OR access IS NULL THEN
        RAISE EXCEPTION 'enter(): tenant, workspace, agent and access must not be null' USING ERRCODE = '22004';
    END IF;
    IF access NOT IN ('agent', 'admin', 'system') THEN
        RAISE EXCEPTION 'enter(): access must be agent, admin or system' USING ERRCODE = '22023';
    END IF;
    xact := pg_current_xact_id();
    PERFORM set_config('memento.tenant_id', tenant, true), set_config('memento.workspace', workspace, true),
            set_config('memento.agent_id', agent, true), set_config('memento.access', access, true),
            set_config('memento.seal', memento_seal.seal(tenant, workspace, agent, access, xact), true);
END $$;

-- The principal as it stands, checked against its seal: {tenant, workspace, agent, access}, or NULL when none was
-- entered. PARALLEL RESTRICTED: it reads the transaction's id.
CREATE FUNCTION agent_memory.sealed_principal() RETURNS text[]
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant text := coalesce(current_setting('memento.tenant_id', true), '');
    workspace text := coalesce(current_setting('memento.workspace', true), '');
    agent text := coalesce(current_setting('memento.agent_id', true), '');
    access text := coalesce(current_setting('memento.access', true), '');
    seal text := coalesce(current_setting('memento.seal', true), '');
    xact xid8 := pg_current_xact_id_if_assigned();
BEGIN
    IF seal = '' AND tenant = '' AND workspace = '' AND agent = '' AND access = '' THEN
        RETURN NULL;
    END IF;
    IF xact IS NULL OR seal <> memento_seal.seal(tenant, workspace, agent, access, xact) THEN
        RAISE EXCEPTION 'the principal was not entered with agent_memory.enter() in this transaction, or has changed'
            USING ERRCODE = '42501';
    END IF;
    RETURN ARRAY[tenant, workspace, agent, access];
END $$;

-- The accessors keep their names and stay SQL (inlined into 0006's InitPlans, so every policy is unchanged); they
-- now return only what the seal vouches for.
CREATE OR REPLACE FUNCTION agent_memory.current_tenant() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT (agent_memory.sealed_principal())[1] $$;
CREATE OR REPLACE FUNCTION agent_memory.current_workspace() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT (agent_memory.sealed_principal())[2] $$;
CREATE OR REPLACE FUNCTION agent_memory.current_agent() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT (agent_memory.sealed_principal())[3] $$;
CREATE OR REPLACE FUNCTION agent_memory.current_access() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT coalesce(nullif((agent_memory.sealed_principal())[4], ''), 'agent') $$;

-- api_keys' policy (0003) predates 0006 and called the accessors for every row: once per query, like the rest.
ALTER POLICY api_keys_isolation ON agent_memory.api_keys
    USING ((SELECT agent_memory.current_access()) = 'system'
           OR (tenant_id = (SELECT agent_memory.current_tenant()) AND (SELECT agent_memory.current_access()) = 'admin'))
    WITH CHECK ((SELECT agent_memory.current_access()) = 'system'
           OR (tenant_id = (SELECT agent_memory.current_tenant()) AND (SELECT agent_memory.current_access()) = 'admin'));
