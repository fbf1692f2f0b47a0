-- 0008: consolidation's dedup key (stage 5) no longer erases punctuation and symbols. 0004's key turned every
-- punctuation character into a space, so "status == 200" / "status != 200", "x > 5" / "x < 5" and "Use C++" /
-- "Use C" shared a key and deduplication deleted the newer one: a different fact lost.
--
-- The key now only folds differences that do not change what the text says:
--   * Unicode form (NFC): canonically equivalent spellings of one character ("é" precomposed or e + U+0301) are
--     the same text. Not NFKC, which also folds "x²" into "x2" and "ﬁ" into "fi".
--   * case (lower): "Deploy on Tuesday." and "deploy on TUESDAY." are one note written twice. This is the one
--     lossy fold kept: case rarely carries the meaning of a note (it can: "ls -r" / "ls -R", "Mb" / "MB").
--   * whitespace, line by line: CRLF/CR become LF; blanks (space, tab, no-break and other Unicode spaces) at the
--     end of a line go; a run of blanks inside a line becomes one space; the text is trimmed. Line breaks and
--     the indentation at the start of a line are kept: they are the structure of code ("if a:\n  b\nc" and
--     "if a:\n  b\n  c" differ).
-- Punctuation, symbols and digits are kept as they are. normalize() needs a UTF8 database (what `make run`
-- and the pgvector images create).
--
-- The key stays a stored generated column, indexed with the namespace (fragments_content_key_idx), so no writer
-- has to compute it and memory-api never does. Replacing its expression recomputes every row: ALTER TABLE
-- rewrites the table once and rebuilds its indexes (what a one-statement UPDATE would cost too, without leaving a
-- dead version of every row behind), holding an ACCESS EXCLUSIVE lock meanwhile: measured at 11 s per 100,000
-- fragments on two cores, so about two minutes at a million, once (the new expression costs what 0004's did;
-- rebuilding the indexes, the GIN ones above all, is most of it). Reads and writes of a running service wait for
-- it, as for any migration. DROP + ADD in one statement (one rewrite) rather than ALTER COLUMN ... SET EXPRESSION
-- so it also runs on PostgreSQL older than 17; the dropped index goes with the column and is built again below.
-- The rewritten table has no visibility map until vacuumed; the directive below has memento-migrate vacuum it.
-- "Blanks" below: space, tab, form feed, vertical tab, no-break and the other Unicode space separators.
-- memento:vacuum agent_memory.fragments
ALTER TABLE agent_memory.fragments
    DROP COLUMN content_key,
    ADD COLUMN content_key text GENERATED ALWAYS AS (md5(
        -- 4. trim: blanks and line breaks at either end of the text
        regexp_replace(
            -- 3. blanks after a non-blank become one space (a lone space is one already: left unmatched, faster)
            regexp_replace(
                -- 2. blanks at the end of a line or of the text go
                regexp_replace(
                    -- 1. one line ending
                    regexp_replace(
                        -- Unicode form and case; the quick NFC check spares normalize() on most rows
                        CASE WHEN content IS NFC NORMALIZED THEN lower(content)
                             ELSE lower(normalize(content, NFC)) END,
                        '\r\n?', E'\n', 'g'),
                    '[ \t\f\v\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+(\n|$)', '\1', 'g'),
                '([^\n \t\f\v\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000])([ \t\f\v\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000][ \t\f\v\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+|[\t\f\v\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000])', '\1 ', 'g'),
            '^[\n \t\f\v\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+|\n+$', '', 'g')
    )) STORED;

CREATE INDEX fragments_content_key_idx ON agent_memory.fragments (tenant_id, workspace, agent_id, content_key);
