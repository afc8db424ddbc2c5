//! The options a push needs before it packs (`encryptionEnabled`: seal the payloads) and routes
//! (`maxSize`: the request goes through the all-or-nothing procedure), per (tenant, queue),
//! held for a short while.
//!
//! A hint, not the authority for the limit: the push procedures take the maxSize verdict under
//! the queue row lock. A configure or a queue deletion through this broker replaces or drops
//! the entry at once; a change made through another broker is seen after `TTL`. A queue that
//! does not exist yet has the defaults (no limit, not encrypted).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use uuid::Uuid;

use crate::storage::procs;
use crate::storage::DbError;

/// How long an entry is trusted.
const TTL: Duration = Duration::from_secs(1);
/// Past this many entries, stale ones are dropped before new ones go in.
const MAX_ENTRIES: usize = 100_000;

/// A queue's push-relevant options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueMeta {
    /// 0 = no limit.
    pub max_size: i64,
    pub encrypted: bool,
}

#[derive(Default)]
pub struct QueueMetas {
    map: Mutex<HashMap<(Uuid, String), (QueueMeta, Instant)>>,
}

impl QueueMetas {
    /// The options of `names` (a name may repeat), reading the ones not held fresh from
    /// PostgreSQL in one call (a pooled connection is taken only then).
    pub async fn of(
        &self,
        pool: &Pool,
        tenant: Uuid,
        names: &[&str],
    ) -> Result<HashMap<String, QueueMeta>, DbError> {
        let mut out = HashMap::new();
        let mut missing: Vec<&str> = Vec::new();
        {
            let map = self.map.lock().expect("queue meta lock");
            for name in names {
                match map.get(&(tenant, name.to_string())) {
                    Some((meta, at)) if at.elapsed() < TTL => {
                        out.insert(name.to_string(), *meta);
                    }
                    _ if !missing.contains(name) => missing.push(name),
                    _ => {}
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let db = pool
            .get()
            .await
            .map_err(|e| DbError::from_pool("queue_meta", e))?;
        let rows = procs::queues::queue_meta(&db, tenant, &missing).await?;
        let mut fresh: HashMap<String, QueueMeta> = missing
            .iter()
            .map(|n| (n.to_string(), QueueMeta::default()))
            .collect();
        for row in rows {
            let meta = QueueMeta {
                max_size: row.max_size,
                encrypted: row.encryption_enabled,
            };
            fresh.insert(row.name, meta);
        }
        let now = Instant::now();
        let mut map = self.map.lock().expect("queue meta lock");
        if map.len() > MAX_ENTRIES {
            map.retain(|_, (_, at)| at.elapsed() < TTL);
        }
        for (name, meta) in fresh {
            map.insert((tenant, name.clone()), (meta, now));
            out.insert(name, meta);
        }
        Ok(out)
    }

    /// A configure through this broker committed these options.
    pub fn set(&self, tenant: Uuid, name: &str, meta: QueueMeta) {
        let mut map = self.map.lock().expect("queue meta lock");
        map.insert((tenant, name.to_string()), (meta, Instant::now()));
    }

    /// The queue was deleted.
    pub fn forget(&self, tenant: Uuid, name: &str) {
        let mut map = self.map.lock().expect("queue meta lock");
        map.remove(&(tenant, name.to_string()));
    }
}
