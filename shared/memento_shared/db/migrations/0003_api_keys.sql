-- 0003: per-tenant API keys (issue 3). Only a SHA-256 of each key is stored; the key itself is shown once, when it
-- is created. A key is `mk_<id>_<secret>`: the id finds the row, the hash of the whole key proves possession.
-- Row-level security is enabled and forced like on every table: the gateway's checks and the admin command act
-- as 'system'; a tenant's admin sees its own tenant's keys.

CREATE TABLE agent_memory.api_keys (
    id            text PRIMARY KEY CONSTRAINT api_keys_id_check CHECK (id ~ '^[a-z0-9]{8,32}$'),
    tenant_id     text NOT NULL,
    name          text NOT NULL DEFAULT '',
    key_hash      bytea NOT NULL CONSTRAINT api_keys_key_hash_check CHECK (length(key_hash) = 32),
    workspaces    text[] NOT NULL DEFAULT '{*}',
    agents        text[] NOT NULL DEFAULT '{*}',
    scopes        text[] NOT NULL DEFAULT '{read,write}'
                  CONSTRAINT api_keys_scopes_check CHECK (scopes <@ ARRAY['read', 'write', 'admin']::text[]),
    profiles      text[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    revoked_at    timestamptz,
    last_used_at  timestamptz
);
CREATE INDEX api_keys_tenant_idx ON agent_memory.api_keys (tenant_id, created_at);

ALTER TABLE agent_memory.api_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.api_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY api_keys_isolation ON agent_memory.api_keys
    USING (agent_memory.current_access() = 'system'
           OR (tenant_id = agent_memory.current_tenant() AND agent_memory.current_access() = 'admin'))
    WITH CHECK (agent_memory.current_access() = 'system'
           OR (tenant_id = agent_memory.current_tenant() AND agent_memory.current_access() = 'admin'));
