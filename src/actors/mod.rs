//! The actors of the runtime, one module each: the manager ([`table_manager`],
//! with its hosting, moves and revive scan), the tables it hosts ([`table`],
//! split by concern), and the [`heartbeat`].

pub mod heartbeat;
pub mod table;
pub mod table_manager;
