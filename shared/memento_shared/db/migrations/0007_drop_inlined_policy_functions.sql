-- 0007: since 0006 no policy calls row_visible() or row_in_workspace(); dropping them keeps 0006's expressions the
-- one definition of who sees a row (and DROP fails loudly if any policy still depended on them).
DROP FUNCTION agent_memory.row_visible(text, text, text);
DROP FUNCTION agent_memory.row_in_workspace(text, text);
