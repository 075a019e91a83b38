//! What replicas count together in orca's state database: `calls_per_minute`, the
//! failed-authentication throttle and the DPoP proofs seen.
//!
//! A limit is counted per minute of the clock (UTC) in `orca.rate_windows`. A replica takes a
//! lease of a few calls at a time ([`lease_size`]: a fiftieth of the limit, between 1 and 100)
//! and hands them out from memory; the lease is taken from what is left of the minute in one
//! statement, so the replicas together never admit more than the limit. At worst they admit
//! fewer: the calls leased by a replica and not used before the minute ends (at most a lease
//! less one per replica). Once a minute is used up, each replica refuses locally until it ends.
//! Failures of authentication are counted one by one (they are rare, and each must count at
//! once). When the database cannot be reached, each replica counts alone until it can (the
//! limit then holds per replica, as before). DPoP proofs are remembered in `orca.dpop_proofs`
//! until they expire; a proof is new only if its row could be inserted, so a proof is accepted
//! once by all the replicas together, and, the database unreachable, by none.

use std::collections::HashMap;
use std::sync::Mutex;

use sqlx::PgPool;

/// Calls a replica leases at a time for `limit` a minute.
#[must_use]
pub(crate) fn lease_size(limit: u32) -> u32 {
    (limit / 50).clamp(1, 100)
}

/// The minute `now` falls in, and the seconds left of it.
fn minute(now: chrono::DateTime<chrono::Utc>) -> (i64, u64) {
    let seconds = now.timestamp();
    let start = seconds - seconds.rem_euclid(60);
    (start, u64::try_from(start + 60 - seconds).unwrap_or(60).max(1))
}

/// What one replica holds of each key's current minute.
#[derive(Debug, Default)]
struct Held {
    minute: i64,
    /// Leased and not handed out yet.
    left: u32,
    /// The minute is used up: refuse until it ends.
    exhausted: bool,
    /// Counted alone while the database was unreachable.
    alone: u32,
}

/// Counters of keys (`calls:<identity>`, `auth-address:<ip>`, `auth-key:<hash>`) shared by the
/// replicas.
#[derive(Debug)]
pub(crate) struct SharedLimits {
    pool: PgPool,
    held: Mutex<HashMap<String, Held>>,
}

/// Keys held in memory before the minutes past are swept.
const SWEEP_ABOVE: usize = 10_000;

impl SharedLimits {
    pub(crate) fn new(pool: PgPool) -> SharedLimits {
        SharedLimits { pool, held: Mutex::default() }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admit one call of `key` within `limit` a minute: `None`, or `Some(seconds to wait)`
    /// (the call is then not counted).
    pub(crate) async fn admit(&self, key: &str, limit: u32) -> Option<u64> {
        self.count(key, limit, lease_size(limit)).await
    }

    /// Count one of `key` within `limit` a minute, leasing `want` at a time.
    async fn count(&self, key: &str, limit: u32, want: u32) -> Option<u64> {
        let (current, left_in_minute) = minute(chrono::Utc::now());
        {
            let mut held = self.held();
            if held.len() > SWEEP_ABOVE {
                held.retain(|_, entry| entry.minute == current);
            }
            let entry = held.entry(key.to_owned()).or_default();
            if entry.minute != current {
                *entry = Held { minute: current, ..Held::default() };
            }
            if entry.exhausted {
                return Some(left_in_minute);
            }
            if entry.left > 0 {
                entry.left -= 1;
                return None;
            }
        }
        match self.take(key, current, want, limit).await {
            Ok(granted) => {
                let mut held = self.held();
                let entry = held.entry(key.to_owned()).or_default();
                if entry.minute != current {
                    *entry = Held { minute: current, ..Held::default() };
                }
                if granted == 0 {
                    entry.exhausted = true;
                    return Some(left_in_minute);
                }
                entry.left += granted - 1;
                None
            }
            Err(error) => {
                tracing::debug!(%error, "a shared limit is counted by this replica alone");
                let mut held = self.held();
                let entry = held.entry(key.to_owned()).or_default();
                if entry.alone >= limit {
                    return Some(left_in_minute);
                }
                entry.alone += 1;
                None
            }
        }
    }

    /// Lease up to `want` of `key`'s `limit` in the minute starting at `minute`: what was left.
    async fn take(
        &self,
        key: &str,
        minute: i64,
        want: u32,
        limit: u32,
    ) -> Result<u32, sqlx::Error> {
        let used: i64 = sqlx::query_scalar(
            "INSERT INTO orca.rate_windows AS w (key, window_start, used) \
             VALUES ($1, to_timestamp($2), $3) \
             ON CONFLICT (key, window_start) DO UPDATE SET used = w.used + EXCLUDED.used \
             RETURNING used::int8",
        )
        .bind(key)
        .bind(minute as f64)
        .bind(i32::try_from(want).unwrap_or(i32::MAX))
        .fetch_one(&self.pool)
        .await?;
        // What was used before this lease, and what of the limit it leaves.
        let before = used - i64::from(want);
        Ok(u32::try_from((i64::from(limit) - before).clamp(0, i64::from(want))).unwrap_or(0))
    }

    /// Count one failure of `key`; `Some(seconds to wait)` when it is past `limit` this minute
    /// (counted with every replica's).
    pub(crate) async fn fail(&self, key: &str, limit: u32) -> Option<u64> {
        self.count(key, limit, 1).await
    }

    /// Whether `key` is past `limit` this minute, as far as this replica knows (what it counted
    /// or was told is used up).
    pub(crate) fn exhausted(&self, key: &str) -> Option<u64> {
        let (current, left) = minute(chrono::Utc::now());
        let held = self.held();
        let entry = held.get(key)?;
        (entry.minute == current && entry.exhausted).then_some(left)
    }
}

/// Drop the minutes long past and the proofs expired (each replica does it now and then; any
/// one suffices).
pub(crate) async fn sweep(pool: &PgPool) {
    let _ = sqlx::query(
        "DELETE FROM orca.rate_windows WHERE window_start < now() - interval '5 minutes'",
    )
    .execute(pool)
    .await;
    let _ =
        sqlx::query("DELETE FROM orca.dpop_proofs WHERE expires_at < now()").execute(pool).await;
}

/// Whether a DPoP proof was seen before, by any replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proof {
    First,
    Seen,
    /// The database could not say: refused (a replay could not be ruled out).
    Unknown,
}

/// Remember the proof `jti` of `key` until `expires`, and say whether it is new.
pub(crate) async fn remember_proof(
    pool: &PgPool,
    key: &str,
    jti: &str,
    expires: chrono::DateTime<chrono::Utc>,
) -> Proof {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(key.as_bytes());
    hash.update([0]);
    hash.update(jti.as_bytes());
    let inserted = sqlx::query(
        "INSERT INTO orca.dpop_proofs (proof, expires_at) VALUES ($1, $2) ON CONFLICT (proof) DO NOTHING",
    )
    .bind(hash.finalize().to_vec())
    .bind(expires)
    .execute(pool)
    .await;
    match inserted {
        Ok(done) if done.rows_affected() == 1 => Proof::First,
        Ok(_) => Proof::Seen,
        Err(error) => {
            tracing::warn!(%error, "a DPoP proof was refused: the replicas' memory of proofs cannot be reached");
            Proof::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_a_fiftieth_of_the_limit_between_one_and_a_hundred() {
        for (limit, lease) in
            [(1, 1), (4, 1), (49, 1), (100, 2), (600, 12), (5_000, 100), (1_000_000, 100)]
        {
            assert_eq!(lease_size(limit), lease, "{limit}");
        }
    }

    #[test]
    fn a_minute_starts_on_the_clock_and_says_what_is_left() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-02T10:00:42Z").unwrap().to_utc();
        let (start, left) = minute(at);
        assert_eq!(start % 60, 0);
        assert_eq!(left, 18);
    }
}
