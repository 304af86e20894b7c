//! A Valkey mark store for lambda-dedup: `MarkStore<ValkeyEffect>`.
//!
//! Each mark is a hash at `<prefix><dedup key>`. Every decision is one server-side script
//! (Valkey runs a script atomically: no other command runs in between), so of any number of
//! concurrent claims of one key one wins (S4). A claim is `SET key … NX PX …` in substance —
//! written only where no live mark stands — extended to what the other stores do: a lease
//! that ran out is taken over keeping the first attempt's time (S16), a fingerprint that
//! differs is a conflict (S11). The key's own expiry (`PEXPIRE`) is the retention, so the
//! server deletes marks when it is over; expiry is also judged at read by the store's clock
//! (S9), so a mark the server has not deleted yet counts as absent all the same.
//!
//! The transactional flow commits the completed mark and your own Valkey commands
//! ([`ValkeyEffect`]: typed `SET`, `HSET`, `HINCRBY`, `INCRBY`, `DEL`, with [`Guard`]s) in
//! **one script** (S5). Valkey does not roll a script back, so the script judges everything
//! first — the mark, every guard, whether each command can succeed on the keys as they stand
//! — and writes only when nothing can fail any more: a failed guard or a refused command
//! leaves no mark and no partial effect. The leased flow (claim, your external call,
//! complete or release) uses [`MarkStore::claim`](lambda_dedup::MarkStore::claim),
//! [`MarkStore::complete`](lambda_dedup::MarkStore::complete) and
//! [`MarkStore::release`](lambda_dedup::MarkStore::release), the last two fenced on the lease's owner token in one script each
//! (S6).
//!
//! Sequence and create-once modes are DynamoDB item modes: this store does not implement
//! their traits, [`SequenceStore`](lambda_dedup::SequenceStore) and
//! [`CreateOnceStore`](lambda_dedup::CreateOnceStore), so a flow of either mode cannot be given
//! it — asking for one does not compile:
//!
//! ```compile_fail,E0277
//! fn create_once(store: &lambda_dedup_valkey::ValkeyStore) -> &dyn lambda_dedup::CreateOnceStore {
//!     store
//! }
//! ```
//!
//! ```compile_fail,E0277
//! fn in_sequence(store: &lambda_dedup_valkey::ValkeyStore) -> &dyn lambda_dedup::SequenceStore {
//!     store
//! }
//! ```
//!
//! while the same code compiles for a store that has both (the memory store):
//!
//! ```
//! use lambda_dedup::{CreateOnceStore, SequenceStore};
//! use lambda_dedup_memory::MemoryStore;
//! fn create_once(store: &MemoryStore) -> &dyn CreateOnceStore {
//!     store
//! }
//! fn in_sequence(store: &MemoryStore) -> &dyn SequenceStore {
//!     store
//! }
//! ```
//!
//! # What persistence and failover do to the guarantee
//! A mark protects against a duplicate only while the server still has it. Valkey
//! acknowledges a write once it is in memory; whether it survives depends on settings that are
//! the operator's, not the store's:
//!
//! - **A crash loses what was not fsynced.** With `appendonly no` (snapshots only) a crash
//!   loses every write since the last snapshot (a killed process too); with the AOF on and
//!   `appendfsync everysec` (its default) a killed process loses nothing (the file was
//!   written before the reply), a machine that loses power up to about a second. A lost mark
//!   of an external effect (the leased flow) is an event processed once whose next delivery
//!   is processed again: **a duplicate later**. A transactional effect in the same server is
//!   lost with its mark: the event's effect is gone if its delivery was acknowledged, and
//!   applied again (once) if it is redelivered. Keep it: `appendonly yes` and
//!   `appendfsync always` (every write fsynced before it is acknowledged).
//! - **A failover loses what the replica had not received.** Replication is asynchronous: a
//!   primary that acknowledged a mark and died before sending it leaves a promoted replica
//!   without it — a duplicate later. Keep it: [`ValkeyStore::with_replicas`] (the store sends
//!   `WAIT` after each write and reports a write not acknowledged by that many replicas as a
//!   transient error, so the message is redelivered and the mark decides), and have the
//!   failover promote only a replica that is not lagging (Sentinel or your operator picks the
//!   most up-to-date replica; `min-replicas-to-write` / `min-replicas-max-lag` on the primary
//!   refuse writes it cannot replicate).
//! - **Eviction deletes marks.** Under `maxmemory` with any policy but `noeviction`, Valkey
//!   drops keys to make room, marks included, silently: a duplicate later. Keep it:
//!   `maxmemory-policy noeviction` (writes are then refused when memory is full; the store
//!   reports that as transient, [`lambda_dedup::FaultKind::Throttled`]).
//! - **Clock.** Leases and expiry are judged by the store's clock (the Lambda's), the key's
//!   deletion by the server's `PEXPIRE`, relative to when it runs: a skew between them does
//!   not shorten retention.
//!
//! # Errors
//! A command refused as it is — the wrong type at a key (`WRONGTYPE`), a value that is not an
//! integer where an increment needs one (`NOT_AN_INTEGER`), an increment past ±2^53
//! (`OVERFLOW`), an expiry of zero (`INVALID_EXPIRE`) — is [`StoreError::Refused`] for that
//! event with that code and the effect's position (S15); nothing of the event is written. A
//! refused connection, a broken one, a timeout, a server loading its data, out of memory,
//! read-only (a replica after failover) or without enough replicas are transient
//! [`StoreError::Store`]s (S13). Server messages are not kept (they may quote values, S3).
//!
//! # Connections
//! One multiplexed connection per store, opened on first use and reopened when it breaks
//! (the client's `ConnectionManager`): build the store once in `main` and reuse it across
//! invocations. Connecting is bounded (2 s, the TLS handshake included), each reply too (5 s),
//! and a `WAIT` for replicas under that ([`WAIT_LIMIT`], and what is left before a claim's
//! deadline): no call waits on the server for ever.
//!
//! # TLS
//! A `rediss://` URL connects over TLS (rustls, with aws-lc-rs; no OpenSSL), and the server's
//! certificate is verified: against the system's roots (the CA bundle of the Lambda image)
//! with [`ValkeyStore::from_url`], or against roots of your own (a private CA) with
//! [`ValkeyStore::from_url_with_roots`]; and against the URL's host. When the process has no
//! default rustls crypto provider installed, the store installs aws-lc-rs as the default (the
//! client builds its TLS configuration with the process's default). There is no insecure mode:
//! the client's `#insecure` fragment is refused when the store is built. A server that does not
//! speak TLS, or whose certificate is not trusted or for another name, is a failed connection,
//! a transient [`StoreError::Store`] whose message says TLS (and the handshake's error) — the
//! client never falls back to plain text.
//!
//! # Valkey Cluster
//! A script may touch the keys of one hash slot only: Valkey Cluster refuses any other
//! (`CROSSSLOT`). [`ValkeyStore::with_hash_tag`] puts a hash tag in the mark keys —
//! [`HashTag::Event`], `<prefix>{<dedup key>}`, a slot per event; or [`HashTag::Fixed`],
//! `<prefix>{<tag>}<dedup key>`, one slot for all — and [`ValkeyStore::slot_tag`] is the tag an
//! effect's keys carry to land in the mark's slot. With a tag, a commit whose effect names a
//! key of another slot is refused before anything is sent ([`StoreError::Invalid`], naming both
//! slots); [`slot::key_slot`] computes a key's slot as the cluster does. The connection is one
//! node's (the cluster's `MOVED` redirections are not followed): a cluster behind one endpoint
//! that routes by slot (a cluster-aware proxy), or a cluster of one shard, works (the tests run
//! a node in cluster mode holding every slot); spreading the marks over shards with a client
//! that follows redirections is not built in.

#![warn(missing_docs)]

mod effect;
mod program;
mod scripts;
pub mod slot;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lambda_dedup::clock::{epoch_millis, epoch_secs, from_epoch_millis};
use lambda_dedup::store::{MarkStoreImpl, StoreOptions};
use lambda_dedup::{
    Claim, Commit, CommitRequest, DedupKey, FaultKind, Fingerprint, Lease, Mark, MarkStatus,
    OwnerToken, Retention, StoreError,
};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, IntoConnectionInfo};
use tokio::sync::OnceCell;

pub use effect::{Guard, MAX_COUNTER, Op, ValkeyEffect};
use scripts::{FIELDS, Scripts};
pub use slot::HashTag;

/// The default prefix of mark keys.
pub const DEFAULT_PREFIX: &str = "dedup:mark:";

/// How long connecting may take (TCP and, for `rediss://`, the TLS handshake).
const CONNECT_LIMIT: Duration = Duration::from_secs(2);
/// How long the client waits for any one reply.
const CALL_LIMIT: Duration = Duration::from_secs(5);
/// The longest a `WAIT` may block the connection: under the client's 5 s limit on a reply,
/// so the server's answer (how many replicas acknowledged) comes before the client gives up.
pub const WAIT_LIMIT: Duration = Duration::from_secs(4);

/// The Valkey mark store. Cheap to clone (the clones share the connection).
#[derive(Clone)]
pub struct ValkeyStore {
    client: redis::Client,
    conn: Arc<OnceCell<ConnectionManager>>,
    scripts: Arc<Scripts>,
    prefix: String,
    options: StoreOptions,
    replicas: Option<(usize, Duration)>,
    hash_tag: HashTag,
    tls: bool,
}

impl fmt::Debug for ValkeyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValkeyStore")
            .field("prefix", &self.prefix)
            .field("retention", &self.options.retention)
            .field("lease", &self.options.lease)
            .field("replicas", &self.replicas)
            .field("hash_tag", &self.hash_tag)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// What a script answered: its verdict and the strings after it.
type Reply = Vec<Option<String>>;

impl ValkeyStore {
    /// A store on the server of `url` (`redis://[user:password@]host:port[/db]`, or
    /// `rediss://…` for TLS), keeping marks for `retention` under [`DEFAULT_PREFIX`]. Connects
    /// lazily, on the first call.
    ///
    /// Over `rediss://` the server's certificate is verified (rustls) against the system's
    /// roots (the CA bundle of the Lambda image) and the URL's host; a server that does not
    /// speak TLS, or presents a certificate those roots did not sign or for another name, is a
    /// failed connection (a transient [`StoreError::Store`]), never a session in clear. The
    /// client's `#insecure` (no verification) is refused: for a private CA, give its roots to
    /// [`from_url_with_roots`](Self::from_url_with_roots).
    pub fn from_url(url: &str, retention: Retention) -> Result<Self, StoreError> {
        Self::build(url, None, retention)
    }

    /// A store on the server of a `rediss://` `url` whose certificate is verified against
    /// `pem_roots` (PEM certificates, in place of the system's roots): a private CA, or the
    /// one bundle your provider names when its certificates do not chain to the system's.
    pub fn from_url_with_roots(
        url: &str,
        pem_roots: &[u8],
        retention: Retention,
    ) -> Result<Self, StoreError> {
        Self::build(url, Some(pem_roots), retention)
    }

    fn build(url: &str, roots: Option<&[u8]>, retention: Retention) -> Result<Self, StoreError> {
        let info = url
            .into_connection_info()
            .map_err(|_| StoreError::Invalid("the Valkey URL does not parse".into()))?;
        let tls = match info.addr() {
            ConnectionAddr::TcpTls { insecure: true, .. } => {
                return Err(StoreError::Invalid(
                    "the Valkey URL asks for TLS without verifying the server (`#insecure`); \
                     this store always verifies it: give a private CA's roots to \
                     ValkeyStore::from_url_with_roots"
                        .into(),
                ));
            }
            ConnectionAddr::TcpTls { .. } => true,
            _ => false,
        };
        if tls {
            rustls_provider();
        }
        let client = match roots {
            None => redis::Client::open(info)
                .map_err(|_| StoreError::Invalid("the Valkey URL does not parse".into()))?,
            Some(_) if !tls => {
                return Err(StoreError::Invalid(
                    "TLS roots were given for a Valkey URL without TLS (use rediss://)".into(),
                ));
            }
            Some(pem) => {
                let certs = redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.to_vec()),
                };
                redis::Client::build_with_tls(info, certs).map_err(|_| {
                    StoreError::Invalid("the TLS roots are not PEM certificates".into())
                })?
            }
        };
        Ok(Self {
            client,
            conn: Arc::new(OnceCell::new()),
            scripts: Arc::new(Scripts::new()),
            prefix: DEFAULT_PREFIX.to_owned(),
            options: StoreOptions::new(retention),
            replicas: None,
            hash_tag: HashTag::None,
            tls,
        })
    }

    /// Keeps marks under `prefix` (not empty; with a [`HashTag`], without `{` or `}`, which
    /// would move the tag). Effects may not write keys under it.
    pub fn with_prefix(mut self, prefix: &str) -> Result<Self, StoreError> {
        if prefix.is_empty() {
            return Err(StoreError::Invalid("the mark prefix is empty".into()));
        }
        self.prefix = prefix.to_owned();
        self.check_tag()?;
        Ok(self)
    }

    /// Puts a hash tag in the mark keys, for Valkey Cluster (see [`HashTag`]): a script may
    /// touch the keys of one hash slot only, so the mark and every key its effects name must
    /// share one. With a tag, a commit whose effect names a key of another slot is refused
    /// before anything is sent ([`StoreError::Invalid`], naming both slots); build effect keys
    /// around [`slot_tag`](Self::slot_tag). Changing the tag of a store in use moves its marks
    /// (the old ones are no longer read): choose it before the first event.
    pub fn with_hash_tag(mut self, tag: HashTag) -> Result<Self, StoreError> {
        self.hash_tag = tag;
        self.check_tag()?;
        Ok(self)
    }

    fn check_tag(&self) -> Result<(), StoreError> {
        let braces = |s: &str| s.contains(['{', '}']);
        if let HashTag::Fixed(t) = &self.hash_tag
            && (t.is_empty() || braces(t))
        {
            return Err(StoreError::Invalid(
                "a fixed hash tag is not empty and has no `{` or `}`".into(),
            ));
        }
        if self.hash_tag != HashTag::None && braces(&self.prefix) {
            return Err(StoreError::Invalid(
                "with a hash tag, the mark prefix has no `{` or `}`".into(),
            ));
        }
        Ok(())
    }

    /// The hash tag an effect's keys carry to share the slot of `key`'s mark (`{<dedup key>}`
    /// or `{<tag>}`), or `None` without a [`HashTag`]. An effect key is any key with it as its
    /// first `{…}`: `format!("outbox:{}", store.slot_tag(&key)?)`.
    pub fn slot_tag(&self, key: &DedupKey) -> Option<String> {
        match &self.hash_tag {
            HashTag::None => None,
            HashTag::Event => Some(format!("{{{}}}", key.as_str())),
            HashTag::Fixed(t) => Some(format!("{{{t}}}")),
        }
    }

    lambda_dedup::store_options_builders!(options);

    /// After each write, `WAIT replicas timeout`: a write not acknowledged by `replicas`
    /// replicas within `timeout` is reported as a transient error (it may have been applied on
    /// the primary; the redelivery finds the mark). See the crate documentation on failover.
    ///
    /// The wait is always bounded: `timeout` is cut to [`WAIT_LIMIT`] (under the client's
    /// reply limit, so the server's count arrives) and to what is left before a claim's
    /// deadline, and a `timeout` of zero is [`WAIT_LIMIT`] — never `WAIT n 0`, which blocks
    /// the connection until enough replicas answer, however long.
    pub fn with_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.replicas = (replicas > 0).then_some((replicas, timeout));
        self
    }

    /// The key a mark of `key` is kept at.
    pub fn mark_key(&self, key: &DedupKey) -> String {
        match &self.hash_tag {
            HashTag::None => format!("{}{}", self.prefix, key.as_str()),
            HashTag::Event => format!("{}{{{}}}", self.prefix, key.as_str()),
            HashTag::Fixed(t) => format!("{}{{{t}}}{}", self.prefix, key.as_str()),
        }
    }

    /// How long a `WAIT` after a write may block, in ms (at least 1: `WAIT n 0` is forever).
    fn wait_ms(&self, timeout: Duration, deadline: Option<SystemTime>) -> u64 {
        let mut limit = if timeout.is_zero() {
            WAIT_LIMIT
        } else {
            timeout.min(WAIT_LIMIT)
        };
        if let Some(deadline) = deadline {
            let left = deadline
                .duration_since(self.options.now())
                .unwrap_or_default();
            limit = limit.min(left);
        }
        u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1)
    }

    async fn conn(&self) -> Result<ConnectionManager, StoreError> {
        let conn = self
            .conn
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_LIMIT))
                    .set_response_timeout(Some(CALL_LIMIT))
                    .set_number_of_retries(2);
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            })
            .await
            .map_err(|e| self.fault(&e))?;
        Ok(conn.clone())
    }

    /// Runs a write script and, with [`with_replicas`](Self::with_replicas), waits for it to
    /// reach them, no longer than [`wait_ms`](Self::wait_ms) (`deadline`: a claim's).
    async fn write(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
        deadline: Option<SystemTime>,
    ) -> Result<Reply, StoreError> {
        let mut conn = self.conn().await?;
        let reply: Reply = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.fault(&e))?;
        if let Some((replicas, timeout)) = self.replicas {
            let acked: usize = redis::cmd("WAIT")
                .arg(replicas)
                .arg(self.wait_ms(timeout, deadline))
                .query_async(&mut conn)
                .await
                .map_err(|e| self.fault(&e))?;
            if acked < replicas {
                return Err(StoreError::store(
                    FaultKind::ServerError,
                    format!("valkey: the write reached {acked} of {replicas} replicas in time"),
                ));
            }
        }
        Ok(reply)
    }

    /// The mark's expiry (epoch s, rounded up as DynamoDB's TTL) and the key's expiry in ms
    /// from now.
    fn expiry(&self, now: SystemTime) -> (u64, u64) {
        let exp_s = epoch_secs(self.options.expires_at(now));
        let px = (exp_s * 1000).saturating_sub(epoch_millis(now)).max(1);
        (exp_s, px)
    }

    fn fenced(&self, key: &DedupKey, reply: &Reply) -> Result<(), StoreError> {
        match verdict(reply) {
            "done" => Ok(()),
            "fenced" => Err(StoreError::Fenced {
                key: key.clone(),
                current: decode(key, &reply[1..])?.map(Box::new),
            }),
            _ => Err(corrupt(key, "the script's answer")),
        }
    }
}

impl MarkStoreImpl<ValkeyEffect> for ValkeyStore {
    async fn claim(
        &self,
        key: &DedupKey,
        fp: Option<&Fingerprint>,
        deadline: Option<SystemTime>,
    ) -> Result<Claim, StoreError> {
        let now = self.options.now();
        let lease_end = self.options.lease_end(now, deadline)?;
        let owner = OwnerToken::random();
        let (exp_s, px) = self.expiry(now);
        let mut inv = self.scripts.claim.prepare_invoke();
        inv.key(self.mark_key(key))
            .arg(epoch_millis(now))
            .arg(epoch_secs(now))
            .arg(owner.as_str())
            .arg(epoch_millis(self.options.lease_held_until(lease_end)))
            .arg(exp_s)
            .arg(px)
            .arg(fp.map_or("", Fingerprint::as_str));
        let reply = self.write(&inv, deadline).await?;
        match verdict(&reply) {
            "claimed" => {
                let first = millis_at(&reply, 1).ok_or_else(|| corrupt(key, "first attempt"))?;
                Ok(Claim::Claimed(Lease {
                    key: key.clone(),
                    owner,
                    expires_at: from_epoch_millis(epoch_millis(lease_end)),
                    fingerprint: fp.cloned(),
                    first_attempt_at: first,
                }))
            }
            "seen" => explain(key, &reply, fp, now).map(Claim::Seen),
            _ => Err(corrupt(key, "the claim script's answer")),
        }
    }

    async fn commit(&self, r: CommitRequest<'_, ValkeyEffect>) -> Result<Commit, StoreError> {
        self.options.check_result(r.result)?;
        let mark_key = self.mark_key(r.key);
        let slot = (self.hash_tag != HashTag::None).then(|| slot::key_slot(&mark_key));
        let program = program::Program::build(r.key, &mark_key, &self.prefix, slot, r.effects)?;
        let now = self.options.now();
        let (exp_s, px) = self.expiry(now);
        let mut inv = self.scripts.commit.prepare_invoke();
        for k in &program.keys {
            inv.key(k);
        }
        inv.arg(epoch_millis(now))
            .arg(epoch_secs(now))
            .arg(exp_s)
            .arg(px)
            .arg(r.fingerprint.map_or("", Fingerprint::as_str))
            .arg(if r.result.is_some() { "1" } else { "0" })
            .arg(r.result.unwrap_or(""))
            .arg(r.effects.len());
        for a in &program.args {
            inv.arg(a);
        }
        let reply = self.write(&inv, None).await?;
        let index = || {
            reply
                .get(1)
                .and_then(|s| s.as_deref())
                .and_then(|s| s.parse::<usize>().ok())
                .ok_or_else(|| corrupt(r.key, "the commit script's answer"))
        };
        match verdict(&reply) {
            "applied" => Ok(Commit::Applied),
            "seen" => explain(r.key, &reply, r.fingerprint, now).map(Commit::Seen),
            "rejected" => Ok(Commit::EffectRejected { index: index()? }),
            "refused" => Err(StoreError::Refused {
                key: r.key.clone(),
                code: reply.get(2).cloned().flatten().unwrap_or_default(),
                position: Some(index()? + 1),
            }),
            _ => Err(corrupt(r.key, "the commit script's answer")),
        }
    }

    /// One script per event, in order (a later event of the batch sees an earlier one's
    /// mark); one event's refusal or failed condition is its own. A fault fails the event it
    /// hit and every one after it, which were not tried.
    async fn commit_batch(
        &self,
        requests: &[CommitRequest<'_, ValkeyEffect>],
    ) -> Vec<Result<Commit, StoreError>> {
        let mut out = Vec::with_capacity(requests.len());
        let mut fault: Option<(FaultKind, String)> = None;
        for r in requests {
            if let Some((kind, message)) = &fault {
                out.push(Err(StoreError::store(*kind, message.clone())));
                continue;
            }
            let result = self.commit(*r).await;
            if let Err(StoreError::Store { kind, message }) = &result
                && *kind != FaultKind::Refused
            {
                fault = Some((*kind, message.clone()));
            }
            out.push(result);
        }
        out
    }

    async fn complete(&self, lease: &Lease, result: Option<&str>) -> Result<(), StoreError> {
        self.options.check_result(result)?;
        let mut inv = self.scripts.complete.prepare_invoke();
        inv.key(self.mark_key(&lease.key))
            .arg(epoch_millis(self.options.now()))
            .arg(lease.owner.as_str())
            .arg(if result.is_some() { "1" } else { "0" })
            .arg(result.unwrap_or(""));
        let reply = self.write(&inv, None).await?;
        self.fenced(&lease.key, &reply)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let mut inv = self.scripts.release.prepare_invoke();
        inv.key(self.mark_key(&lease.key))
            .arg(epoch_millis(self.options.now()))
            .arg(lease.owner.as_str());
        let reply = self.write(&inv, None).await?;
        self.fenced(&lease.key, &reply)
    }

    async fn get_many(&self, keys: &[&DedupKey]) -> Result<Vec<Option<Mark>>, StoreError> {
        let now = self.options.now();
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.cmd("HMGET").arg(self.mark_key(key)).arg(&FIELDS[..]);
        }
        let mut conn = self.conn().await?;
        let rows: Vec<Reply> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.fault(&e))?;
        keys.iter()
            .zip(&rows)
            .map(|(key, row)| Ok(decode(key, row)?.filter(|m| m.is_live(now))))
            .collect()
    }

    async fn get(&self, key: &DedupKey) -> Result<Option<Mark>, StoreError> {
        let keys = [key];
        Ok(self.get_many(&keys).await?.pop().flatten())
    }

    fn options(&self) -> &StoreOptions {
        &self.options
    }
}

fn verdict(reply: &Reply) -> &str {
    reply.first().and_then(|v| v.as_deref()).unwrap_or("")
}

fn corrupt(key: &DedupKey, reason: &str) -> StoreError {
    StoreError::Corrupt {
        key: key.as_str().to_owned(),
        reason: reason.to_owned(),
    }
}

fn millis_at(fields: &[Option<String>], i: usize) -> Option<SystemTime> {
    let v = fields.get(i)?.as_deref()?;
    v.parse::<u64>().ok().map(from_epoch_millis)
}

/// What stood in the way, from the mark a script returned after its verdict.
fn explain(
    key: &DedupKey,
    reply: &Reply,
    fp: Option<&Fingerprint>,
    now: SystemTime,
) -> Result<lambda_dedup::Seen, StoreError> {
    decode(key, &reply[1..])?
        .and_then(|m| m.classify(fp, now))
        .ok_or_else(|| StoreError::Contended(key.clone()))
}

/// A mark from its [`FIELDS`], or `None` when the hash is absent.
fn decode(key: &DedupKey, f: &[Option<String>]) -> Result<Option<Mark>, StoreError> {
    let get = |i: usize| f.get(i).cloned().flatten();
    let Some(status) = get(0) else {
        return Ok(None);
    };
    let status = MarkStatus::parse(&status).ok_or_else(|| corrupt(key, "status"))?;
    let expires: u64 = get(3)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| corrupt(key, "expiry"))?;
    Ok(Some(Mark {
        key: key.clone(),
        status,
        owner: get(1).map(OwnerToken::from_stored),
        lease_expires_at: millis_at(f, 2),
        expires_at: lambda_dedup::clock::from_epoch_secs(expires),
        fingerprint: get(4).map(Fingerprint::from_stored),
        result: get(5),
        first_seen_at: millis_at(f, 6).ok_or_else(|| corrupt(key, "first attempt"))?,
        completed_at: millis_at(f, 7),
    }))
}

impl ValkeyStore {
    /// A client error as the store's: the kind from the client's typed error kinds, and for
    /// server errors the server's error code (the reply's first word); never its message.
    /// Over TLS, a connection that failed or timed out says so, a failed one with the
    /// client's own words (the handshake's error: a certificate not trusted, a reply that is
    /// not TLS), which come from this side of the connection and name no value.
    fn fault(&self, e: &redis::RedisError) -> StoreError {
        let kind = fault_kind(e);
        if self.tls && e.code().is_none() {
            match kind {
                FaultKind::Network => {
                    return StoreError::store(kind, format!("valkey: {kind} over TLS: {e}"));
                }
                FaultKind::Timeout => {
                    return StoreError::store(kind, format!("valkey: {kind} over TLS"));
                }
                _ => {}
            }
        }
        match e.code() {
            Some(code) => StoreError::store(kind, format!("valkey: {kind} ({code})")),
            None => StoreError::store(kind, format!("valkey: {kind}")),
        }
    }
}

/// The rustls crypto provider of `rediss://`: the process's default if one is installed, else
/// aws-lc-rs, installed as the default (the client builds its TLS configuration with the
/// default; with two providers compiled in and none installed, it would have none).
fn rustls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one in between: either is fine.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

fn fault_kind(e: &redis::RedisError) -> FaultKind {
    use redis::{ErrorKind, ServerErrorKind};
    if e.is_timeout() {
        return FaultKind::Timeout;
    }
    if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        return FaultKind::Network;
    }
    match e.kind() {
        ErrorKind::Server(
            ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ReadOnly
            | ServerErrorKind::ExecAbort,
        ) => FaultKind::ServerError,
        // Codes the client has no kind for: the server's own words.
        ErrorKind::Extension => match e.code() {
            Some("OOM") => FaultKind::Throttled,
            Some("BUSY" | "MISCONF" | "NOREPLICAS" | "LOADING") => FaultKind::ServerError,
            _ => FaultKind::Refused,
        },
        ErrorKind::Io => FaultKind::Network,
        _ => FaultKind::Refused,
    }
}

#[cfg(test)]
mod tests;
