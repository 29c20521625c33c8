//! Identifiers and small value types shared by the runtime.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A table's id: `tbl_` and 16 hex digits when pitboss makes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TableId(String);

impl TableId {
    pub fn generate() -> TableId {
        let raw = uuid::Uuid::new_v4().simple().to_string();
        TableId(format!("tbl_{}", &raw[..16]))
    }

    /// Accepts what a client sends, without allocating ids that could never
    /// exist (keeps junk out of Redis keys and log lines).
    pub fn parse(s: &str) -> Option<TableId> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        ok.then(|| TableId(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A fencing token: strictly increases with every acquire of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fence(pub u64);

impl Fence {
    /// Postgres stores tokens as BIGINT.
    pub fn as_db(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    pub fn from_db(v: i64) -> Fence {
        Fence(u64::try_from(v).unwrap_or(0))
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Player names are what tokens carry; kept short and printable.
pub fn valid_player_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_id_rejects_characters_that_would_break_keys() {
        assert!(TableId::parse("tbl_0123abcd").is_some());
        assert!(TableId::parse("a:b").is_none());
        assert!(TableId::parse("").is_none());
        assert!(TableId::parse(&"x".repeat(65)).is_none());
    }

    #[test]
    fn generated_table_ids_parse() {
        let id = TableId::generate();
        assert_eq!(TableId::parse(id.as_str()), Some(id));
    }
}
