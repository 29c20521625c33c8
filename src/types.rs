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

/// Declares a closed set of names stored as TEXT in Postgres and sent as
/// strings on the wire: one place spells each name, and every layer above
/// matches on the enum.
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<$name, UnknownName> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownName {
                        kind: stringify!($name),
                        name: other.to_string(),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }

        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::Type<sqlx::Postgres>>::type_info()
            }

            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <&str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        impl<'q> sqlx::Encode<'q, sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<sqlx::Postgres>>::encode_by_ref(&self.as_str(), buf)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $name {
            fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<$name, sqlx::error::BoxDynError> {
                let s = <&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
                Ok(s.parse()?)
            }
        }
    };
}

/// A stored name that no variant spells: data written by a newer version,
/// or by hand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {name:?}")]
pub struct UnknownName {
    pub kind: &'static str,
    pub name: String,
}

text_enum! {
    /// Where a table is in its life (`tables.state`). See DESIGN's "Table
    /// states": `open → draining → released` on shutdown, `→ frozen` on a
    /// lost lease or an internal error, and a frozen table's disposal
    /// `→ escape → custody → closed`.
    TableState {
        Open => "open",
        Draining => "draining",
        Released => "released",
        Frozen => "frozen",
        Escape => "escape",
        Custody => "custody",
        Closed => "closed",
    }
}

impl TableState {
    /// A state a table can be hosted from without an operator.
    pub fn is_hostable(self) -> bool {
        matches!(
            self,
            TableState::Open | TableState::Draining | TableState::Released
        )
    }
}

text_enum! {
    /// Why a table froze: what its watchers are told and what
    /// `tables.state_reason` records.
    FreezeReason {
        /// Its lease is gone, held by someone else, or past its deadline.
        LeaseLost => "lease_lost",
        /// The rules panicked or refused a command the runtime issued.
        InternalError => "internal_error",
        /// A boundary write failed for a reason other than a stale fence.
        StoreError => "store_error",
        /// An operator froze it.
        Operator => "operator",
    }
}

text_enum! {
    /// Why a table stopped dealing for a while without losing its lease:
    /// what its watchers are told in `paused`.
    PauseReason {
        /// The lease could not be proven (Redis slow or unreachable); the
        /// table resumes once its owner has re-asserted it.
        RedisUnreachable => "redis_unreachable",
        /// Another owner's value sits in the lease key, and Postgres has
        /// not given that owner the table: the table stays this owner's,
        /// held still until that value goes (re-asserted, it resumes) or
        /// the other owner stamps Postgres (its copy stops).
        Contested => "contested",
        /// Postgres could not record a boundary or this process's
        /// liveness; the table resumes once it can.
        StoreUnreachable => "store_unreachable",
    }
}

text_enum! {
    /// Why a table changed state (`tables.state_reason`, `table_events.reason`).
    StateReason {
        /// Created, not hosted yet.
        Created => "created",
        /// First hosted by its creator (or first join).
        Hosted => "hosted",
        /// Hosted again after a shutdown or idle release.
        Revived => "revived",
        /// Hosted again by an operator's recover.
        Recovered => "recovered",
        /// A new fence stamped without a change of state.
        Acquired => "acquired",
        /// Its owner took the lease again under a new fence after the key
        /// vanished or Redis was unreachable, with nobody stamping between.
        Reasserted => "reasserted",
        /// Taken from an owner that had not been seen alive for a TTL.
        TakenOver => "taken_over",
        /// Released by a drain.
        Shutdown => "shutdown",
        /// Released because nobody sat at it.
        Idle => "idle",
        /// Moved by an operator: released by its owner and promised to the
        /// instance `owner_instance` names, which hosts it next.
        Moved => "moved",
        LeaseLost => "lease_lost",
        InternalError => "internal_error",
        StoreError => "store_error",
        Operator => "operator",
        /// Disposal, first step: the hand in progress is void.
        HandVoided => "in-flight hand voided",
        /// Disposal, second step: every stack went back to its wallet.
        StacksReturned => "stacks returned to wallets",
        /// Disposal, last step.
        Disposed => "disposed",
    }
}

text_enum! {
    /// What moved chips (`ledger.kind`).
    LedgerKind {
        Grant => "grant",
        BuyIn => "buy_in",
        CashOut => "cash_out",
        Hand => "hand",
        /// A disposed table's stacks going back to their wallets.
        Custody => "custody",
    }
}

impl From<FreezeReason> for StateReason {
    fn from(r: FreezeReason) -> StateReason {
        match r {
            FreezeReason::LeaseLost => StateReason::LeaseLost,
            FreezeReason::InternalError => StateReason::InternalError,
            FreezeReason::StoreError => StateReason::StoreError,
            FreezeReason::Operator => StateReason::Operator,
        }
    }
}

/// Why a row Postgres holds in `state` is frozen, if it is: the freeze
/// reason its `state_reason` records (a frozen row whose reason names no
/// freeze is told as an internal error, the loud default).
pub fn recorded_freeze(state: TableState, reason: Option<StateReason>) -> Option<FreezeReason> {
    if state != TableState::Frozen {
        return None;
    }
    Some(match reason {
        Some(StateReason::LeaseLost) => FreezeReason::LeaseLost,
        Some(StateReason::StoreError) => FreezeReason::StoreError,
        Some(StateReason::Operator) => FreezeReason::Operator,
        _ => FreezeReason::InternalError,
    })
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
    fn a_frozen_row_names_the_freeze_its_reason_records_and_nothing_else_is_frozen() {
        for r in FreezeReason::ALL {
            assert_eq!(
                recorded_freeze(TableState::Frozen, Some(StateReason::from(*r))),
                Some(*r)
            );
        }
        assert_eq!(
            recorded_freeze(TableState::Frozen, None),
            Some(FreezeReason::InternalError)
        );
        for s in TableState::ALL.iter().filter(|s| **s != TableState::Frozen) {
            assert_eq!(recorded_freeze(*s, Some(StateReason::Operator)), None);
        }
    }

    #[test]
    fn table_id_rejects_characters_that_would_break_keys() {
        assert!(TableId::parse("tbl_0123abcd").is_some());
        assert!(TableId::parse("a:b").is_none());
        assert!(TableId::parse("").is_none());
        assert!(TableId::parse(&"x".repeat(65)).is_none());
    }

    #[test]
    fn state_names_round_trip_through_text_and_json() {
        for s in TableState::ALL {
            assert_eq!(s.as_str().parse::<TableState>(), Ok(*s));
            let json = serde_json::to_string(s).expect("serialize");
            assert_eq!(json, format!("{:?}", s.as_str()));
            assert_eq!(serde_json::from_str::<TableState>(&json).ok(), Some(*s));
        }
        for r in StateReason::ALL {
            assert_eq!(r.as_str().parse::<StateReason>(), Ok(*r));
        }
        for r in FreezeReason::ALL {
            assert_eq!(StateReason::from(*r).as_str(), r.as_str());
        }
        assert!("opne".parse::<TableState>().is_err());
        assert!(serde_json::from_str::<FreezeReason>("\"melted\"").is_err());
    }

    #[test]
    fn generated_table_ids_parse() {
        let id = TableId::generate();
        assert_eq!(TableId::parse(id.as_str()), Some(id));
    }
}

text_enum! {
    /// Every error code a client or an operator can be told: a refused
    /// frame's or request's `code` ([`ErrorCode::STABLE`] are the ones
    /// clients can rely on, docs/protocol.md). Tables, games and the
    /// manager refuse with these; only the protocol layer turns them into
    /// text.
    ErrorCode {
        BadJson => "bad_json",
        UnknownType => "unknown_type",
        BadField => "bad_field",
        BadAmount => "bad_amount",
        TableNotFound => "table_not_found",
        OwnedElsewhere => "owned_elsewhere",
        NotJoined => "not_joined",
        NotSeated => "not_seated",
        AlreadySeated => "already_seated",
        SeatTaken => "seat_taken",
        NotYourTurn => "not_your_turn",
        IllegalAction => "illegal_action",
        InsufficientFunds => "insufficient_funds",
        StaleHand => "stale_hand",
        StaleDecision => "stale_decision",
        TableFrozen => "table_frozen",
        Draining => "draining",
        Unavailable => "unavailable",
        RateLimited => "rate_limited",
        TooSlow => "too_slow",
        /// An action with no hand being played.
        NoHandInProgress => "no_hand_in_progress",
        /// A buy-in outside the table's range.
        BuyInOutOfRange => "buy_in_out_of_range",
        HandInProgress => "hand_in_progress",
        NotEnoughPlayers => "not_enough_players",
        BadDeck => "bad_deck",
        Overflow => "overflow",
        BadConfig => "bad_config",
        /// An invariant did not hold; never expected.
        Internal => "internal",
        /// `recover` of a table that is not frozen.
        NotFrozen => "not_frozen",
        /// An operation for the table's host sent to another instance.
        NotHosted => "not_hosted",
    }
}

impl ErrorCode {
    /// The codes clients can rely on (docs/protocol.md): every refused
    /// frame a client can cause carries one of these.
    pub const STABLE: &'static [ErrorCode] = &[
        ErrorCode::BadJson,
        ErrorCode::UnknownType,
        ErrorCode::BadField,
        ErrorCode::BadAmount,
        ErrorCode::TableNotFound,
        ErrorCode::OwnedElsewhere,
        ErrorCode::NotJoined,
        ErrorCode::NotSeated,
        ErrorCode::AlreadySeated,
        ErrorCode::SeatTaken,
        ErrorCode::NotYourTurn,
        ErrorCode::IllegalAction,
        ErrorCode::InsufficientFunds,
        ErrorCode::StaleHand,
        ErrorCode::StaleDecision,
        ErrorCode::TableFrozen,
        ErrorCode::Draining,
        ErrorCode::Unavailable,
        ErrorCode::RateLimited,
        ErrorCode::TooSlow,
    ];
}

/// Tests and checks compare a code with the text clients see.
impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}
