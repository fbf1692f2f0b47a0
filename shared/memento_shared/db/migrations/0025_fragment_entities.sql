-- Issue 53: the entities a fragment names, written on insert (memory-api text.links), so a search by text can follow
-- them to other fragments about the same people, places and things (recall.hops: the second hop).
--   entities: 's:<speaker>', 'n:<name>', 'p:<place>' (lower case), and '=place' / '=named' when the text names a place
--             or anything else by name. A link between two fragments is the entities they share; its strength, how
--             rare those are among the rows a search reads, is computed when read, so no row is rewritten as later
--             fragments arrive. NULL: written before this migration (`memento-admin annotate --entities` fills it).
ALTER TABLE agent_memory.fragments ADD COLUMN entities text[];
CREATE INDEX fragments_entities_idx ON agent_memory.fragments USING gin (entities) WITH (gin_pending_list_limit = 128);
