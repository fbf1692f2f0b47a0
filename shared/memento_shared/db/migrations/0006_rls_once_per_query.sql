-- 0006: the same policies, with the caller's settings read once per query instead of once per row.
-- row_visible() and row_in_workspace() are inlined into every query, and their current_setting() calls were then
-- evaluated for each row a scan looked at: a vector search's exact scan of 3.4k rows spent about a third of its time
-- there. Written as scalar subqueries, the settings become InitPlans that run once per query; what a policy lets
-- through is unchanged (tests/integration/test_isolation.py checks it table by table).
DO $$
DECLARE
    t text;
    visible text := '(SELECT agent_memory.current_access()) = ''system'''
        ' OR (tenant_id = (SELECT agent_memory.current_tenant())'
        ' AND workspace = (SELECT agent_memory.current_workspace())'
        ' AND (agent_id = (SELECT agent_memory.current_agent()) OR agent_id = ''default'''
        ' OR (SELECT agent_memory.current_access()) = ''admin''))';
    in_workspace text := '(SELECT agent_memory.current_access()) = ''system'''
        ' OR (tenant_id = (SELECT agent_memory.current_tenant())'
        ' AND workspace = (SELECT agent_memory.current_workspace()))';
BEGIN
    FOREACH t IN ARRAY ARRAY['fragments', 'fragment_embeddings', 'fragment_links', 'fragment_versions',
                             'tool_feedback', 'task_feedback']
    LOOP
        EXECUTE format('ALTER POLICY %I ON agent_memory.%I USING (%s) WITH CHECK (%s)',
                       t || '_isolation', t, visible, visible);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['outbox', 'dead_letters', 'consolidation_runs']
    LOOP
        EXECUTE format('ALTER POLICY %I ON agent_memory.%I USING (%s) WITH CHECK (%s)',
                       t || '_isolation', t, in_workspace, in_workspace);
    END LOOP;
END $$;
