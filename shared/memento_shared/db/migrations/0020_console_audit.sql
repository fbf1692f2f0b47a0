-- 0020: what people did through the web console (issue 32): who, which action, on what, when, and how it ended.
-- Never the content: a row names the target by id only. Written by memory-api's console routes after the tool
-- operation ran; read by the tenant's admins. Workspace-scoped under forced row-level security, as the documents
-- tables (0015); the service role gets its grants from memento-migrate (ensure_service_role, every table).
CREATE TABLE agent_memory.console_audit (
    id          bigserial PRIMARY KEY,
    tenant_id   text NOT NULL,
    workspace   text NOT NULL,
    actor       text NOT NULL,
    action      text NOT NULL,
    target_id   text NOT NULL,
    outcome     text NOT NULL CONSTRAINT console_audit_outcome_check CHECK (outcome IN ('ok', 'refused')),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX console_audit_scope_idx ON agent_memory.console_audit (tenant_id, workspace, created_at DESC);

DO $$
DECLARE
    in_workspace text := '(SELECT agent_memory.current_access()) = ''system'''
        ' OR (tenant_id = (SELECT agent_memory.current_tenant())'
        ' AND workspace = (SELECT agent_memory.current_workspace()))';
BEGIN
    ALTER TABLE agent_memory.console_audit ENABLE ROW LEVEL SECURITY;
    ALTER TABLE agent_memory.console_audit FORCE ROW LEVEL SECURITY;
    EXECUTE format('CREATE POLICY console_audit_isolation ON agent_memory.console_audit USING (%s) WITH CHECK (%s)',
                   in_workspace, in_workspace);
END $$;
