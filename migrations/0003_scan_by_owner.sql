-- The revive scan looks only at tables that may need an owner: released by
-- a drain, stamped by an earlier process of the scanning instance's own id,
-- or owned by an instance no longer seen alive. These make each of those
-- lookups an index probe, so a scan costs what needs an owner, not what is
-- hosted.
ALTER TABLE tables ADD COLUMN owner_incarnation TEXT;
CREATE INDEX tables_open_by_owner ON tables (environment, owner_instance)
    WHERE state IN ('open', 'draining');
CREATE INDEX instances_last_seen ON instances (environment, last_seen);
