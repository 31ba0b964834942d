-- sagacity journal, schema version 3: the checkpoint log (sagacity.checkpoint_log).
--
-- Signed checkpoints of chain heads, kept outside the journal table, as the leaves of an
-- RFC 6962 Merkle log; the hashes of its complete subtrees; and its signed tree heads.
-- All three are append-only like the journal (same refusing trigger, enabled ALWAYS).
-- The columns beside each note are an index: the signed note is the evidence, and
-- `sagacity verify` checks the columns against it.

CREATE TABLE sagacity_checkpoints (
    log_index bigint NOT NULL CHECK (log_index >= 0),
    saga_id   text COLLATE "C" NOT NULL,
    entries   bigint NOT NULL CHECK (entries >= 1),
    head_hash text NOT NULL,
    note      text NOT NULL,
    CONSTRAINT sagacity_checkpoints_pkey PRIMARY KEY (log_index),
    CONSTRAINT sagacity_checkpoints_saga_key UNIQUE (saga_id, entries)
);

CREATE TABLE sagacity_log_nodes (
    level integer NOT NULL CHECK (level >= 0),
    idx   bigint NOT NULL CHECK (idx >= 0),
    hash  bytea NOT NULL,
    CONSTRAINT sagacity_log_nodes_pkey PRIMARY KEY (level, idx)
);

CREATE TABLE sagacity_log_heads (
    size bigint NOT NULL CHECK (size >= 1),
    root bytea NOT NULL,
    note text NOT NULL,
    CONSTRAINT sagacity_log_heads_pkey PRIMARY KEY (size)
);

CREATE TRIGGER sagacity_checkpoints_no_update BEFORE UPDATE ON sagacity_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_checkpoints_no_delete BEFORE DELETE ON sagacity_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_checkpoints_no_truncate BEFORE TRUNCATE ON sagacity_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_log_nodes_no_update BEFORE UPDATE ON sagacity_log_nodes
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_log_nodes_no_delete BEFORE DELETE ON sagacity_log_nodes
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_log_nodes_no_truncate BEFORE TRUNCATE ON sagacity_log_nodes
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_log_heads_no_update BEFORE UPDATE ON sagacity_log_heads
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_log_heads_no_delete BEFORE DELETE ON sagacity_log_heads
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_log_heads_no_truncate BEFORE TRUNCATE ON sagacity_log_heads
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();

ALTER TABLE sagacity_checkpoints ENABLE ALWAYS TRIGGER sagacity_checkpoints_no_update;
ALTER TABLE sagacity_checkpoints ENABLE ALWAYS TRIGGER sagacity_checkpoints_no_delete;
ALTER TABLE sagacity_checkpoints ENABLE ALWAYS TRIGGER sagacity_checkpoints_no_truncate;
ALTER TABLE sagacity_log_nodes ENABLE ALWAYS TRIGGER sagacity_log_nodes_no_update;
ALTER TABLE sagacity_log_nodes ENABLE ALWAYS TRIGGER sagacity_log_nodes_no_delete;
ALTER TABLE sagacity_log_nodes ENABLE ALWAYS TRIGGER sagacity_log_nodes_no_truncate;
ALTER TABLE sagacity_log_heads ENABLE ALWAYS TRIGGER sagacity_log_heads_no_update;
ALTER TABLE sagacity_log_heads ENABLE ALWAYS TRIGGER sagacity_log_heads_no_delete;
ALTER TABLE sagacity_log_heads ENABLE ALWAYS TRIGGER sagacity_log_heads_no_truncate;
