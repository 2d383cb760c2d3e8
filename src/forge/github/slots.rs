//! `serve`'s connection slots, and whom to close when every one is taken. Opening a TCP
//! connection costs an attacker nothing, so whom to close is chosen by what each connection not
//! yet proven has shown (nothing, part of its headers, complete headers, a body arriving),
//! never by age alone: the one that has shown least goes first, among equals the one that has
//! sent nothing for longest; and when even that one is uploading a body at the minimum rate,
//! the newcomer is refused instead (only bandwidth holds a slot). A connection that delivered a
//! signed request is GitHub's and leaves the slots' reckoning: it is never closed to make room.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

/// What a connection has shown, least first (the order connections are closed in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Shown {
    /// Not a byte.
    Nothing = 0,
    /// Some bytes, not yet a request's complete headers.
    PartOfHeaders = 1,
    /// A delivery's complete headers (a signature of the right shape, a length), no body yet.
    Headers = 2,
    /// Its body is arriving.
    Body = 3,
}

impl Shown {
    fn from_u8(v: u8) -> Shown {
        match v {
            0 => Shown::Nothing,
            1 => Shown::PartOfHeaders,
            2 => Shown::Headers,
            _ => Shown::Body,
        }
    }
}

/// One connection's progress: what it has shown, and when its last bytes arrived.
#[derive(Debug)]
pub struct Progress {
    shown: AtomicU8,
    /// When its last bytes came, on the slots' tick (one per arrival, across connections).
    last: AtomicU64,
    tick: Arc<AtomicU64>,
}

impl Progress {
    fn new(tick: Arc<AtomicU64>) -> Progress {
        let p = Progress {
            shown: AtomicU8::new(Shown::Nothing as u8),
            last: AtomicU64::new(0),
            tick,
        };
        p.touch();
        p
    }

    fn touch(&self) {
        let now = self.tick.fetch_add(1, Ordering::Relaxed) + 1;
        self.last.store(now, Ordering::Relaxed);
    }

    /// Records that the connection has shown `s` (it never goes back).
    pub fn show(&self, s: Shown) {
        self.shown.fetch_max(s as u8, Ordering::Relaxed);
        self.touch();
    }

    /// What the connection has shown.
    pub fn shown(&self) -> Shown {
        Shown::from_u8(self.shown.load(Ordering::Relaxed))
    }

    fn last(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }
}

/// Connections not yet proven, by id: the means to close each, and its progress.
type Unproven = BTreeMap<u64, (oneshot::Sender<()>, Arc<Progress>)>;

/// The connections not yet proven, with the means to close each.
#[derive(Debug, Default)]
pub struct Slots {
    unproven: Mutex<Unproven>,
    tick: Arc<AtomicU64>,
}

impl Slots {
    fn map(&self) -> std::sync::MutexGuard<'_, Unproven> {
        self.unproven.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reckons connection `id` from now on: its progress, and what fires when it is to close.
    pub fn open(&self, id: u64) -> (Arc<Progress>, oneshot::Receiver<()>) {
        let progress = Arc::new(Progress::new(self.tick.clone()));
        let (close, closed) = oneshot::channel();
        self.map().insert(id, (close, progress.clone()));
        (progress, closed)
    }

    /// Connection `id` delivered a signed request, or ended: no longer reckoned.
    pub fn leave(&self, id: u64) {
        self.map().remove(&id);
    }

    /// Every slot is taken and a connection arrives: closes the connection that has shown
    /// least, among equals the one whose last bytes are oldest, and says so (`true`); refuses
    /// (`false`) when there is none, or when even that one is a body arriving (a slot held by
    /// bandwidth is not taken from it for a connection that has shown nothing yet; a body
    /// slower than the minimum rate is dropped by its own deadline within a rate window).
    pub fn make_room(&self) -> bool {
        let mut map = self.map();
        let victim = map
            .iter()
            .min_by_key(|(id, (_, p))| (p.shown(), p.last(), **id))
            .map(|(id, (_, p))| (*id, p.shown()));
        let Some((id, shown)) = victim else {
            return false;
        };
        if shown == Shown::Body {
            return false;
        }
        if let Some((close, _)) = map.remove(&id) {
            let _ = close.send(());
        }
        true
    }
}

/// A stream that records on its connection's progress when bytes arrive.
pub struct Watched<S> {
    inner: S,
    progress: Arc<Progress>,
}

impl<S> Watched<S> {
    pub fn new(inner: S, progress: Arc<Progress>) -> Self {
        Watched { inner, progress }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.progress.show(Shown::PartOfHeaders);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots_with(shown: &[Shown]) -> (Slots, Vec<oneshot::Receiver<()>>) {
        let slots = Slots::default();
        let mut closed = Vec::new();
        for (i, s) in shown.iter().enumerate() {
            let (p, c) = slots.open(i as u64);
            if *s != Shown::Nothing {
                p.show(*s);
            }
            closed.push(c);
        }
        (slots, closed)
    }

    #[test]
    fn the_connection_that_has_shown_least_is_closed_first_whatever_its_age() {
        let (slots, mut closed) = slots_with(&[
            Shown::Body,
            Shown::Headers,
            Shown::PartOfHeaders,
            Shown::Nothing,
        ]);
        assert!(slots.make_room());
        assert!(
            closed[3].try_recv().is_ok(),
            "the silent one, the newest, goes first"
        );
        assert!(slots.make_room());
        assert!(closed[2].try_recv().is_ok(), "then part of headers");
        assert!(slots.make_room());
        assert!(closed[1].try_recv().is_ok(), "then headers without a body");
        // A body arriving is not closed for a newcomer: the newcomer is refused.
        assert!(!slots.make_room());
        assert!(closed[0].try_recv().is_err());
    }

    #[test]
    fn among_equals_the_one_whose_last_bytes_are_oldest_goes() {
        let (slots, mut closed) = slots_with(&[Shown::PartOfHeaders, Shown::PartOfHeaders]);
        slots.map()[&0].1.show(Shown::PartOfHeaders);
        assert!(slots.make_room());
        assert!(closed[1].try_recv().is_ok(), "the stalest, not the oldest");
        assert!(closed[0].try_recv().is_err());
    }

    #[test]
    fn a_proven_connection_is_never_closed_to_make_room() {
        let (slots, mut closed) = slots_with(&[Shown::Nothing]);
        slots.leave(0);
        assert!(!slots.make_room());
        assert!(closed[0].try_recv().is_err());
    }
}
