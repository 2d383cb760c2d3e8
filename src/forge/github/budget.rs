//! The webhook receiver's memory for request bodies: a budget shared by every connection,
//! taken as bytes arrive, with a share per peer address and room always made for an upload
//! that is arriving.
//!
//! Anyone who can reach the receiver can upload, and an unsigned upload is known to be bogus
//! only once all of it has arrived (the signature covers the body). So an upload that stops
//! short of its declared length (one byte will do) holds what it sent until a deadline drops
//! it, and a few of them would otherwise hold the whole budget while a genuine delivery is
//! refused. Here, when a chunk does not fit (in the budget, or in its peer's share), the
//! unfinished upload that made progress least recently is evicted: its
//! share is released at once and its reader told to stop. The arriving upload just made
//! progress, so it never loses to a stalled one; holding the budget against a delivery takes
//! uploads that keep sending, not stalling. A finished body (being checked) is never evicted.
//! Peers behind one proxy, or on loopback, share an address: the per-peer share bounds one
//! remote address, eviction is what protects a delivery from its neighbours.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// How much body memory may be held: in all, and by one peer address.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub total: usize,
    pub per_peer: usize,
}

struct Upload {
    peer: IpAddr,
    held: usize,
    /// When its last byte arrived, as a count of chunks taken by all uploads (an order, no
    /// clock).
    last: u64,
    /// All of its body arrived: it is being checked, not evictable.
    finished: bool,
    evicted: Arc<Notify>,
}

#[derive(Default)]
struct Inner {
    uploads: HashMap<u64, Upload>,
    total: usize,
    next: u64,
    /// Chunks taken so far, by all uploads.
    tick: u64,
}

impl Inner {
    fn held_by(&self, peer: IpAddr) -> usize {
        self.uploads
            .values()
            .filter(|u| u.peer == peer)
            .map(|u| u.held)
            .sum()
    }

    /// The upload to evict for `id`: unfinished, holding something, from `peer` if given;
    /// the one whose last chunk is oldest.
    fn victim(&self, id: u64, peer: Option<IpAddr>) -> Option<u64> {
        self.uploads
            .iter()
            .filter(|(k, u)| **k != id && !u.finished && u.held > 0)
            .filter(|(_, u)| peer.is_none_or(|p| u.peer == p))
            .min_by_key(|(_, u)| u.last)
            .map(|(k, _)| *k)
    }

    fn evict(&mut self, victim: u64) {
        if let Some(v) = self.uploads.remove(&victim) {
            self.total -= v.held;
            v.evicted.notify_one();
        }
    }
}

/// The shared budget.
pub struct Budget {
    limits: Limits,
    inner: Mutex<Inner>,
}

/// A chunk that cannot be held even after evicting every other unfinished upload it could.
#[derive(Debug, PartialEq, Eq)]
pub struct Full;

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Budget {
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts an upload from `peer`, holding nothing yet.
    pub fn open(&self, peer: IpAddr) -> Lease<'_> {
        let evicted = Arc::new(Notify::new());
        let mut inner = self.lock();
        inner.next += 1;
        let id = inner.next;
        let last = inner.tick;
        inner.uploads.insert(
            id,
            Upload {
                peer,
                held: 0,
                last,
                finished: false,
                evicted: evicted.clone(),
            },
        );
        Lease {
            budget: self,
            id,
            evicted,
        }
    }

    /// Bytes held in all.
    pub fn held(&self) -> usize {
        self.lock().total
    }
}

/// One upload's share; released when dropped.
pub struct Lease<'a> {
    budget: &'a Budget,
    id: u64,
    evicted: Arc<Notify>,
}

impl Lease<'_> {
    /// Holds `n` more bytes that just arrived, evicting the stalest other uploads (of the same
    /// peer first, if its share is what is full) until they fit.
    pub fn take(&self, n: usize) -> Result<(), Full> {
        let limits = self.budget.limits;
        let mut inner = self.budget.lock();
        let Some(peer) = inner.uploads.get(&self.id).map(|u| u.peer) else {
            // Evicted meanwhile: its reader stops at its next wait.
            return Err(Full);
        };
        let mine = inner.uploads.get(&self.id).map_or(0, |u| u.held);
        if mine + n > limits.per_peer || n > limits.total {
            return Err(Full);
        }
        while inner.held_by(peer) + n > limits.per_peer {
            let victim = inner.victim(self.id, Some(peer)).ok_or(Full)?;
            inner.evict(victim);
        }
        while inner.total + n > limits.total {
            let victim = inner.victim(self.id, None).ok_or(Full)?;
            inner.evict(victim);
        }
        inner.total += n;
        inner.tick += 1;
        let tick = inner.tick;
        if let Some(u) = inner.uploads.get_mut(&self.id) {
            u.held += n;
            u.last = tick;
        }
        Ok(())
    }

    /// All of the body arrived: it can no longer be evicted (it is checked at once).
    pub fn finish(&self) {
        if let Some(u) = self.budget.lock().uploads.get_mut(&self.id) {
            u.finished = true;
        }
    }

    /// Resolves once this upload has been evicted to make room.
    pub async fn evicted(&self) {
        self.evicted.notified().await;
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut inner = self.budget.lock();
        if let Some(u) = inner.uploads.remove(&self.id) {
            inner.total -= u.held;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn an_arriving_upload_evicts_the_stalest_unfinished_one() {
        let b = Budget::new(Limits {
            total: 100,
            per_peer: 100,
        });
        // Three peers hold the whole budget and stall.
        let stalled: Vec<_> = (1..=3).map(|i| b.open(ip(i))).collect();
        stalled[0].take(40).unwrap();
        stalled[1].take(40).unwrap();
        stalled[2].take(20).unwrap();
        assert_eq!(b.held(), 100);
        // A finished body is never evicted.
        stalled[0].finish();
        let genuine = b.open(ip(9));
        genuine.take(30).unwrap();
        // The oldest unfinished one (the second) made room.
        assert_eq!(b.held(), 90);
        assert_eq!(stalled[1].take(1), Err(Full));
        drop(stalled);
        assert_eq!(b.held(), 30);
    }

    #[test]
    fn a_peer_over_its_share_evicts_its_own_uploads_first() {
        let b = Budget::new(Limits {
            total: 100,
            per_peer: 50,
        });
        let other = b.open(ip(2));
        other.take(40).unwrap();
        let a1 = b.open(ip(1));
        a1.take(30).unwrap();
        let a2 = b.open(ip(1));
        a2.take(30).unwrap();
        // a1 made room for a2 (same peer); the other peer's upload, older still, stays.
        assert_eq!(b.held(), 70);
        assert_eq!(a1.take(1), Err(Full));
        other.take(10).unwrap();
        // Nothing left to evict: a chunk larger than a share is refused.
        assert_eq!(a2.take(21), Err(Full));
    }
}
