//! One actor per file: the manager, the tables it hosts, and the heartbeat.
pub mod heartbeat;
pub mod table;
pub mod table_manager;
