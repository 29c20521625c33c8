//! One live process per instance id (I12). Each process registers
//! `instance:<env>:<owner>` with the lease TTL: JSON naming its advertised
//! address and a per-process incarnation, plus a beat that changes on every
//! refresh (every TTL/3, with the lease renew). A starting process that finds
//! the key held by another incarnation watches it for one refresh period: if
//! the beat moves, a live process holds the id and the newcomer refuses to
//! start; if it stands still, the holder is gone (crashed, killed) and the
//! newcomer takes the id over, at most TTL/3 + 1 s after it started.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redis::Script;
use serde::{Deserialize, Serialize};

use super::{LeaseClient, LeaseError};

/// Refreshes the registration only while it is this incarnation's; puts it
/// back if the key is gone (Redis lost it), refuses if another holds it.
static REFRESH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if v then
  local ok, held = pcall(cjson.decode, v)
  if not ok or held['incarnation'] ~= ARGV[1] then return 0 end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
",
    )
});

/// Replaces a registration only if it still holds exactly what was seen.
static TAKE_OVER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
",
    )
});

/// Deletes the registration if it is this incarnation's.
static DEREGISTER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local ok, held = pcall(cjson.decode, v)
if ok and held['incarnation'] == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
",
    )
});

/// What `instance:<env>:<owner>` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub advertise_url: String,
    pub incarnation: String,
    /// Unix millis when the process started.
    pub started_at: u64,
    /// Moves on every refresh, so a watcher can tell a live holder.
    pub beat: u64,
}

/// This process's registration.
#[derive(Debug)]
pub struct Registration {
    advertise_url: String,
    incarnation: String,
    started_at: u64,
    beat: AtomicU64,
}

/// How a process came to hold its instance id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Nobody was registered under the id.
    Free,
    /// A holder was registered but did not refresh for a whole period.
    TakenOver,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(
        "instance id {owner} is in use by a live process (incarnation {incarnation}, {advertise_url}); refusing to start"
    )]
    InUse {
        owner: String,
        incarnation: String,
        advertise_url: String,
    },
    #[error(transparent)]
    Lease(#[from] LeaseError),
}

impl Registration {
    pub fn new(advertise_url: String) -> Registration {
        Registration {
            advertise_url,
            incarnation: uuid::Uuid::new_v4().simple().to_string(),
            started_at: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0),
            beat: AtomicU64::new(0),
        }
    }

    pub fn incarnation(&self) -> &str {
        &self.incarnation
    }

    pub fn advertise_url(&self) -> &str {
        &self.advertise_url
    }

    /// The record with the next beat.
    fn next(&self) -> String {
        let record = InstanceRecord {
            advertise_url: self.advertise_url.clone(),
            incarnation: self.incarnation.clone(),
            started_at: self.started_at,
            beat: self.beat.fetch_add(1, Ordering::Relaxed) + 1,
        };
        serde_json::to_string(&record).unwrap_or_default()
    }
}

impl LeaseClient {
    pub fn instance_key(&self) -> String {
        format!("instance:{}:{}", self.env, self.owner)
    }

    async fn get_instance(&self) -> Result<Option<String>, LeaseError> {
        let key = self.instance_key();
        self.run(move |mut c| {
            Box::pin(async move { redis::cmd("GET").arg(key).query_async(&mut c).await })
        })
        .await
    }

    /// Registers this process under its instance id, or refuses when a live
    /// process holds the id. A holder that does not refresh within one
    /// refresh period plus a second is gone, and its id is taken over.
    ///
    /// Answers whether the key was free from the start: then nothing in
    /// Redis vouched for the id's last holder, and the caller should also
    /// look at the liveness Postgres recorded (Redis may have lost the
    /// registration), see [`Claim::Free`].
    pub async fn claim_instance(&self, me: &Registration) -> Result<Claim, ClaimError> {
        let watch = self.ttl / 3 + Duration::from_secs(1);
        loop {
            let key = self.instance_key();
            let (value, ttl_ms) = (me.next(), self.ttl_ms());
            let set: Option<String> = self
                .run(move |mut c| {
                    Box::pin(async move {
                        redis::cmd("SET")
                            .arg(key)
                            .arg(value)
                            .arg("NX")
                            .arg("PX")
                            .arg(ttl_ms)
                            .query_async(&mut c)
                            .await
                    })
                })
                .await?;
            if set.is_some() {
                return Ok(Claim::Free);
            }
            let Some(seen) = self.get_instance().await? else {
                continue;
            };
            let until = Instant::now() + watch;
            let mut moved = None;
            while Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match self.get_instance().await? {
                    Some(now) if now == seen => {}
                    other => {
                        moved = Some(other);
                        break;
                    }
                }
            }
            match moved {
                // Still the same beat after a whole refresh period: the
                // holder is gone. Take over unless someone else just did.
                None => {
                    let args = vec![seen, me.next(), self.ttl_ms().to_string()];
                    let taken: i64 = self
                        .invoke(&TAKE_OVER, vec![self.instance_key()], args)
                        .await?;
                    if taken == 1 {
                        return Ok(Claim::TakenOver);
                    }
                }
                // Expired or deleted meanwhile: try again from the top.
                Some(None) => {}
                Some(Some(now)) => {
                    let held: Option<InstanceRecord> = serde_json::from_str(&now).ok();
                    return Err(ClaimError::InUse {
                        owner: self.owner.clone(),
                        incarnation: held
                            .as_ref()
                            .map_or_else(|| "?".into(), |r| r.incarnation.clone()),
                        advertise_url: held.map_or_else(|| "?".into(), |r| r.advertise_url),
                    });
                }
            }
        }
    }

    /// Refreshes this process's registration (with a new beat); `false`
    /// when another incarnation holds the id now.
    pub async fn refresh_instance(&self, me: &Registration) -> Result<bool, LeaseError> {
        let args = vec![me.incarnation.clone(), me.next(), self.ttl_ms().to_string()];
        let ours: i64 = self
            .invoke(&REFRESH, vec![self.instance_key()], args)
            .await?;
        Ok(ours == 1)
    }

    /// Removes this process's registration at the end of a graceful stop.
    pub async fn deregister_instance(&self, me: &Registration) -> Result<(), LeaseError> {
        let _: i64 = self
            .invoke(
                &DEREGISTER,
                vec![self.instance_key()],
                vec![me.incarnation.clone()],
            )
            .await?;
        Ok(())
    }
}
