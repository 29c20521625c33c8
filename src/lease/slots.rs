//! Which Redis Cluster node serves a key: the key's hash slot (CRC16 of its
//! hash tag, as Redis computes it) and the slot ranges the cluster reported
//! (`CLUSTER SLOTS`). The batched lease calls use it to send one pipeline
//! per node; a map gone stale (a failover, a resharding) only costs a
//! fallback to one request per table, which the cluster client redirects.

use redis::Value;

/// The slots a cluster has.
const SLOTS: u16 = 16384;

/// The hash slot of `key`: of its hash tag (`{…}`, non-empty) if it has
/// one, else of the whole key.
pub(super) fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(bytes);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % SLOTS
}

/// A node's address as the cluster names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Node {
    pub host: String,
    pub port: u16,
}

/// The master of each slot range, from `CLUSTER SLOTS`.
#[derive(Debug, Default)]
pub(super) struct SlotMap {
    ranges: Vec<(u16, u16, Node)>,
}

impl SlotMap {
    /// Reads a `CLUSTER SLOTS` reply: `[[start, end, [host, port, …], …], …]`.
    /// `None` if it has another shape.
    pub(super) fn parse(reply: &Value) -> Option<SlotMap> {
        let Value::Array(ranges) = reply else {
            return None;
        };
        let mut map = SlotMap::default();
        for range in ranges {
            let Value::Array(parts) = range else {
                return None;
            };
            let (start, end) = (slot(parts.first()?)?, slot(parts.get(1)?)?);
            let Value::Array(master) = parts.get(2)? else {
                return None;
            };
            let host = match master.first()? {
                Value::BulkString(b) => String::from_utf8(b.clone()).ok()?,
                Value::SimpleString(s) => s.clone(),
                _ => return None,
            };
            let port = match master.get(1)? {
                Value::Int(p) => u16::try_from(*p).ok()?,
                _ => return None,
            };
            map.ranges.push((start, end, Node { host, port }));
        }
        Some(map)
    }

    /// The master serving `slot`, if the map names one.
    pub(super) fn node_of(&self, slot: u16) -> Option<&Node> {
        self.ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|(_, _, node)| node)
    }
}

fn slot(v: &Value) -> Option<u16> {
    match v {
        Value::Int(i) => u16::try_from(*i).ok().filter(|s| *s < SLOTS),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_those_redis_computes() {
        // Values from Redis's own cluster documentation and CLUSTER KEYSLOT.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("123456789"), 12739);
        assert_eq!(
            key_slot("{user1000}.following"),
            key_slot("{user1000}.followers")
        );
        assert_eq!(key_slot("lease:table:env:{tbl_1}"), key_slot("tbl_1"));
        // An empty tag, or none closed, hashes the whole key.
        assert_eq!(key_slot("foo{}{bar}"), crc16_of("foo{}{bar}"));
        assert_eq!(key_slot("foo{bar"), crc16_of("foo{bar"));
    }

    fn crc16_of(s: &str) -> u16 {
        crc16::State::<crc16::XMODEM>::calculate(s.as_bytes()) % SLOTS
    }

    #[test]
    fn a_cluster_slots_reply_maps_each_slot_to_its_master() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("10.0.0.2", 7001),
                node("10.0.0.3", 7002),
            ]),
        ]);
        let map = SlotMap::parse(&reply).expect("a valid reply");
        let at = |slot| map.node_of(slot).map(|n| (n.host.as_str(), n.port));
        assert_eq!(at(0), Some(("10.0.0.1", 7000)));
        assert_eq!(at(5460), Some(("10.0.0.1", 7000)));
        assert_eq!(at(5461), Some(("10.0.0.2", 7001)));
        assert_eq!(at(16383), Some(("10.0.0.2", 7001)));
        assert!(SlotMap::parse(&Value::Int(1)).is_none());
        assert!(SlotMap::default().node_of(1).is_none());
    }
}
